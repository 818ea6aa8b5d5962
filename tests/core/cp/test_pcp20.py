"""PCP'20: the position model's decisions are valid and agree with PCP3's optima."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from cpsched.core import make_dispatcher
from cpsched.core.allocators import BestFit
from cpsched.core.cp import ModelConfig, SearchConfig
from cpsched.core.cp.pcp3_greedy import candidate_node_plans, hostable
from cpsched.core.cp.pcp20 import PCP20Dispatcher, position_plan
from cpsched.core.cp.pcp20_model import build_position_model, layout, running_rects
from tests.core.cp._util import DETERMINISTIC, decide, mixed_instance, objective, prepared_of
from tests.core.cp.test_pcp3 import NO_GUARD, fragmented, instances, pcp3
from tests.factories import job, limits_as_durations, nodes, running, snapshot


def pcp20(model=NO_GUARD, search=DETERMINISTIC, **kwargs):
    return PCP20Dispatcher(BestFit(), search, model, **kwargs)


def test_known_node_level_optimum_for_every_variant():
    snap = fragmented()
    for kwargs in ({}, {"order_units": False}):
        decision = decide(snap, dispatcher=pcp20(**kwargs))
        d = decision.diagnostics
        assert d.dispatcher == "pcp20" and d.solver_status == "optimal"
        assert decision.planned == {"a": 100, "b": 100, "c": 110}
        assert sorted(s.job_id for s in decision.starts) == ["a", "b"]


def test_a_unit_never_straddles_two_nodes():
    # 3 units of 2 cores on two 3-core nodes: 6 cores in total, but one unit per node.
    snap = snapshot(0, nodes(3, 3), queue=[job("w", units=3, unit=2, limit=10)])
    decision = decide(snap, dispatcher=pcp20())
    assert decision.starts == () and decision.planned == {}  # never placeable: dropped
    snap = snapshot(0, nodes(4, 3), queue=[job("w", units=3, unit=2, limit=10)])
    decision = decide(snap, dispatcher=pcp20())
    assert decision.starts[0].allocation == ((0, 2), (1, 1))


def test_positions_are_scaled_by_the_gcd():
    snap = snapshot(
        0, nodes((4, 4096), (4, 2048)), queue=[job("m", unit=(1, 1024))], resources=("cpu", "mem")
    )
    lay = layout(snap, prepared_of(snap))
    assert lay.scale == (1, 1024) and lay.total == (8, 6)


def test_the_position_hints_are_solutions_of_the_model():
    snap, durations, prepared, hosts, plans = mixed_instance()
    for plan in plans.values():
        built = build_position_model(snap, durations, prepared, hosts)
        lay = layout(snap, prepared)
        held = running_rects(snap, durations, prepared, lay)
        placed = position_plan(lay, held, prepared, hosts, plan)
        values = built.hint_values(prepared, placed)
        for var, value in zip(built.decision_variables(), values, strict=True):
            built.model.add(var == value)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        assert solver.solve(built.model) == cp_model.OPTIMAL


def test_empty_queue_and_nothing_startable_give_an_empty_decision():
    r = job("r", units=4, limit=100)
    for queue in ([], [job("a")]):
        snap = snapshot(0, nodes(4), [running(r, 0, [(0, 4)])], queue)
        decision = decide(snap, dispatcher=pcp20())
        assert decision.starts == () and decision.planned == {}
        assert decision.diagnostics.solver_status == "empty"


def test_past_the_deadline_the_fallback_decision_is_returned_and_marked():
    snap = fragmented()
    ticks = iter([0.0])  # the first read starts the call; every later read is 100 s on
    dispatcher = pcp20(search=SearchConfig(deadline=2.0), clock=lambda: next(ticks, 100.0))
    decision = decide(snap, dispatcher=dispatcher)
    easy = make_dispatcher("easy", "best-fit").decide(snap, limits_as_durations(snap))
    assert decision.starts == easy.starts and decision.planned == easy.planned
    d = decision.diagnostics
    assert d.fallback and d.dispatcher == "pcp20" and d.solver_status == "deadline"
    # Every read after the first is past the deadline: no phase after the fallback runs.
    assert d.model_variables == 0
    assert "fallback: no time left for prepare; decision of easy" in d.notes


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(), st.booleans())
def test_decisions_are_valid_and_match_pcp3_when_both_are_optimal(snap, guarded):
    """Equal optima. Strictly, packing rectangles on a node (a unit
    keeps its positions for its whole run) can be tighter than PCP3's per-node cumulative
    when units need several contiguous positions, so equality is asserted where every
    unit request is at most 1 per type (interval colouring: always packable) and PCP'20
    may only be worse otherwise (not seen in 600 examples either)."""
    model = ModelConfig(reserve_above=1.0 if guarded else None)
    decision = decide(snap, dispatcher=pcp20(model))  # decide() checks validity
    assert not decision.diagnostics.fallback
    if guarded or decision.diagnostics.solver_status != "optimal":
        return
    other = decide(snap, dispatcher=pcp3())
    if other.diagnostics.solver_status == "optimal":
        prepared = prepared_of(snap)
        ours, theirs = objective(prepared, decision.planned), objective(prepared, other.planned)
        assert ours >= theirs
        if all(a <= 1 for j in snap.queued for a in j.unit_request):
            assert ours == theirs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_position_plans_of_random_instances_are_solutions(snap):
    durations = limits_as_durations(snap)
    prepared, hosts = hostable(snap, prepared_of(snap))
    if not prepared.jobs:
        return
    lay = layout(snap, prepared)
    held = running_rects(snap, durations, prepared, lay)
    for plan in candidate_node_plans(snap, durations, prepared, hosts, {}).values():
        built = build_position_model(snap, durations, prepared, hosts)
        values = built.hint_values(prepared, position_plan(lay, held, prepared, hosts, plan))
        for var, value in zip(built.decision_variables(), values, strict=True):
            built.model.add(var == value)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        assert solver.solve(built.model) == cp_model.OPTIMAL


def test_running_rectangles_that_touch_and_end_together_are_one():
    from cpsched.core.cp.pcp20_model import merged

    # Node 0 holds positions 0-3 and node 1 positions 4-7: a job holding both nodes whole
    # until 50 is one rectangle; one ending at 60, or not adjacent, stays apart.
    rects = [(0, 50, 4, 8), (0, 50, 0, 4), (0, 60, 8, 10), (0, 50, 12, 16)]
    assert merged(rects) == [(0, 50, 0, 8), (0, 60, 8, 10), (0, 50, 12, 16)]
    assert merged([]) == []


def test_node_bounds_are_linear_only_where_every_host_is_on_one_line():
    from cpsched.core.cp.pcp20_model import _line

    offsets = [0, 16, 32, 48, 64, 66, 68]  # four 16-core nodes, then 2-core ones
    assert _line([0, 1, 3], offsets) == (0, 16)
    assert _line([4, 5, 6], offsets) == (64 - 2 * 4, 2)
    assert _line([2, 3, 4, 5], offsets) is None  # two groups: the element tables serve
    assert _line([0, 3], [0, 1, 2, 4]) is None  # a step of 4/3 is not an integer line


def test_hosts_are_cut_into_runs_with_linear_bounds():
    from cpsched.core.cp.pcp20_model import _pieces

    offsets = [0, 16, 32, 48, 64, 66, 68]  # four 16-core nodes, then three 2-core ones
    top = [o + 15 for o in offsets[:4]] + [o + 1 for o in offsets[4:]]
    runs = [(p.first, p.last, p.lo, p.hi) for p in _pieces(range(7), offsets, top)]
    assert runs == [(0, 3, (0, 16), (15, 16)), (4, 6, (56, 2), (57, 2))]
    apart = _pieces([2, 5], offsets, top)  # 34/3 per node: no line, two constant runs
    assert [(p.first, p.last, p.lo, p.hi) for p in apart] == [
        (2, 2, (32, 0), (47, 0)),
        (5, 5, (66, 0), (67, 0)),
    ]


@pytest.mark.parametrize("pieces", [16, 1])
def test_both_encodings_of_node_bounds_give_the_same_optimum(monkeypatch, pieces):
    # Two node sizes: the bounds are linear on two runs of hosts (literals per run); with
    # MAX_PIECES 1 the element tables serve instead. The optimum must not change.
    import cpsched.core.cp.pcp20_model as pcp20_model

    monkeypatch.setattr(pcp20_model, "MAX_PIECES", pieces)
    snap = mixed_instance()[0]
    decision = decide(snap, dispatcher=pcp20())
    assert decision.diagnostics.solver_status in ("optimal", "trivial")
    unmodified = decide(snap, dispatcher=pcp3())
    prepared = prepared_of(snap)
    assert objective(prepared, decision.planned) == objective(prepared, unmodified.planned)
