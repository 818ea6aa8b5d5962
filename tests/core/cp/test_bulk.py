import pytest
from ortools.sat.python import cp_model

from cpsched.core.cp.bulk import Model, add_sum_equal, indices_of, new_int_vars


def test_bulk_variables_are_the_builders_variables_without_names():
    model, reference = cp_model.CpModel(), cp_model.CpModel()
    model.new_int_var(0, 5, "before")
    reference.new_int_var(0, 5, "before")
    xs = new_int_vars(model, [3, 1, 7])
    ys = [reference.new_int_var(0, upper, "") for upper in (3, 1, 7)]
    assert [x.index for x in xs] == [y.index for y in ys] == [1, 2, 3]
    assert str(model.proto) == str(reference.proto)
    assert new_int_vars(model, []) == []


def test_long_runs_of_one_upper_bound_come_out_in_order():
    # Runs are copied from cached blocks of 2^j variables: 300 = 256 + 32 + 8 + 4.
    uppers = [1] * 300 + [2] * 5 + [1] * 3
    model, reference = cp_model.CpModel(), cp_model.CpModel()
    xs = new_int_vars(model, uppers)
    ys = [reference.new_int_var(0, upper, "") for upper in uppers]
    assert [x.index for x in xs] == [y.index for y in ys] == list(range(308))
    assert str(model.proto) == str(reference.proto)
    assert len(model.proto.variables) == 308 and not model.proto.constraints
    # The cached blocks are copied, not shared: changing one model leaves the next intact.
    model.proto.variables[0].domain[1] = 9
    again, fresh = cp_model.CpModel(), cp_model.CpModel()
    new_int_vars(again, uppers)
    for upper in uppers:
        fresh.new_int_var(0, upper, "")
    assert str(again.proto) == str(fresh.proto)


def test_bulk_sum_is_the_builders_linear_constraint_and_holds_in_a_solve():
    model, reference = cp_model.CpModel(), cp_model.CpModel()
    xs = new_int_vars(model, [2, 2, 2])
    ys = new_int_vars(reference, [2, 2, 2])
    add_sum_equal(model, indices_of(xs), 5)
    reference.add(sum(ys) == 5)
    assert str(model.proto) == str(reference.proto)
    model.maximize(xs[0] - xs[1])
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    assert [solver.value(x) for x in xs] == [2, 1, 2]


def test_proto_indices_refuse_negated_literals():
    model = cp_model.CpModel()
    b = model.new_bool_var("")
    assert indices_of([b]) == [0]
    with pytest.raises(ValueError, match="negated"):
        indices_of([b, ~b])


def test_a_model_without_the_camel_case_aliases_builds_and_solves_as_cp_sats():
    model, reference = Model(), cp_model.CpModel()
    for m in (model, reference):
        x = m.new_int_var(0, 10, "x")
        y = m.new_int_var(0, 10, "y")
        m.add(x + y == 7)
        m.add_hint(x, 3)
        m.minimize(x - y)
    assert str(model.proto) == str(reference.proto)
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL and solver.objective_value == -7
    assert hasattr(reference, "NewIntVar") and not hasattr(model, "NewIntVar")
