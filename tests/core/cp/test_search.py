"""Search control: restarts, limits, the deadline, infeasibility and the fallback."""

import dataclasses
import itertools
from types import SimpleNamespace

import pytest
from ortools.sat.python import cp_model

import cpsched.core.cp.flow as flow_module
import cpsched.core.cp.search as search
from cpsched.core import make_dispatcher
from cpsched.core.cp import SearchConfig
from cpsched.core.cp.bulk import add_strategy, indices_of
from cpsched.core.cp.search import solve_with_restarts
from cpsched.errors import ConfigError
from tests.core.cp._util import DETERMINISTIC, decide, hcp3, started, without_timings
from tests.factories import job, limits_as_durations, nodes, running, snapshot


def busy_snapshot():
    r = job("r", units=3, limit=100)
    queue = [job("h", units=4, limit=50), job("short", limit=100), job("long", limit=500)]
    return snapshot(0, nodes(4), [running(r, 0, [(0, 3)])], queue)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_limit": 0},
        {"growth": 1.0},
        {"max_limit": 0.01},  # below the first limit
        {"patience": 0},
        {"deadline": 0},
        {"min_run": -1},
        {"margin": -0.1},
        {"deadline": 0.02},  # below the default margin
        {"num_workers": 0},
        {"random_seed": -1},
        {"search_size_cap": 0},
    ],
)
def test_search_config_is_validated(kwargs):
    with pytest.raises(ConfigError):
        SearchConfig(**kwargs)


def test_defaults_are_the_products_restarts_on_one_worker():
    # The papers' doubling restarts scaled to the product's 0.2 s deadline.
    c = SearchConfig()
    assert (c.initial_limit, c.growth, c.max_limit, c.patience) == (0.02, 2.0, 0.32, 1)
    assert c.deadline == 0.2
    assert c.num_workers == 1 and not c.deterministic


class FakeClock:
    """Advances by what the fake solver is told it may use, so runs cost their limit."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class FakeSolver:
    def __init__(self, clock, limit, left, results):
        self.clock, self.limit, self.left, self.results = clock, limit, left, results
        self.objective_value = 0.0

    def solve(self, model):
        self.used = self.deterministic_time = min(self.limit, self.left)  # each run: its limit
        self.clock.now += self.used
        code, objective = next(self.results)
        self.objective_value = float(objective or 0)
        return code

    @property
    def response_proto(self):
        # The loop's one variable (index 0) takes the objective's value.
        return SimpleNamespace(solution=[int(self.objective_value)])


def run_loop(monkeypatch, config, results, incumbent=None):
    clock = FakeClock()
    runs = []
    results = iter(results)

    def fake_solver(cfg, limit, left):
        runs.append((limit, round(left, 6)))
        return FakeSolver(clock, limit, left, results)

    monkeypatch.setattr(search, "_solver", fake_solver)
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    outcome = solve_with_restarts(model, [x.index], [3], config, clock, 0.0, incumbent=incumbent)
    return outcome, runs


def papers(**changes):
    """The papers' restarts: δ = 1 s doubling up to δ_max = 16 s, patience k = 2."""
    return SearchConfig(initial_limit=1.0, max_limit=16.0, patience=2, **changes)


def test_limit_doubles_while_no_solution_up_to_max_limit(monkeypatch):
    config = papers(deadline=1000.0)
    outcome, runs = run_loop(monkeypatch, config, itertools.repeat((cp_model.UNKNOWN, None)))
    assert [limit for limit, _ in runs] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert outcome.status == "unknown" and outcome.values is None and outcome.runs == 5


def test_each_run_gets_at_most_the_time_left(monkeypatch):
    config = papers(deadline=5.03)  # 5 s once the margin is kept back
    outcome, runs = run_loop(monkeypatch, config, itertools.repeat((cp_model.UNKNOWN, None)))
    assert runs == [(1.0, 5.0), (2.0, 4.0), (4.0, 2.0)]
    assert outcome.status == "deadline"


def test_restarts_stop_after_k_runs_without_improvement(monkeypatch):
    results = [(cp_model.FEASIBLE, 50), (cp_model.FEASIBLE, 40), (cp_model.FEASIBLE, 40)]
    results += [(cp_model.FEASIBLE, 40), (cp_model.FEASIBLE, 10)]
    outcome, _ = run_loop(monkeypatch, papers(deadline=1000.0), results)
    assert outcome.runs == 4  # 50, 40, then two runs without improvement
    assert outcome.status == "feasible" and outcome.objective == 40
    assert outcome.values == (40,)


def test_a_work_limited_call_shares_its_work_budget_among_its_runs(monkeypatch):
    config = papers(deterministic=True, wall_clock=False, work_budget=5.0)
    outcome, runs = run_loop(monkeypatch, config, itertools.repeat((cp_model.UNKNOWN, None)))
    assert [limit for limit, _ in runs] == [1.0, 2.0, 2.0]  # 1 + 2, then what is left
    assert all(left == float("inf") for _, left in runs)  # no wall clock at all
    assert (outcome.status, outcome.stop) == ("unknown", "work budget spent")


def test_a_search_without_the_wall_clock_must_be_limited_by_work():
    with pytest.raises(ConfigError, match="must be limited by work"):
        SearchConfig(wall_clock=False)
    with pytest.raises(ConfigError, match="work_budget"):
        SearchConfig(deterministic=True, work_budget=0)


def test_a_proven_optimum_or_no_improve_stops_at_once(monkeypatch):
    outcome, _ = run_loop(monkeypatch, SearchConfig(), [(cp_model.OPTIMAL, 7)])
    assert (outcome.status, outcome.runs, outcome.objective) == ("optimal", 1, 7)
    config = SearchConfig(improve=False)
    outcome, _ = run_loop(monkeypatch, config, [(cp_model.FEASIBLE, 9)])
    assert (outcome.status, outcome.runs) == ("feasible", 1)


def test_proven_infeasibility_is_never_retried(monkeypatch):
    outcome, runs = run_loop(
        monkeypatch, SearchConfig(), itertools.repeat((cp_model.INFEASIBLE, None))
    )
    assert outcome.status == "infeasible" and len(runs) == 1


def test_a_hint_with_its_objective_is_the_answer_when_nothing_better_comes(monkeypatch):
    # The fake solver's solution is its objective, so the hint [3] has objective 3.
    config = papers(deadline=1000.0)
    nothing = itertools.repeat((cp_model.UNKNOWN, None))
    outcome, runs = run_loop(monkeypatch, config, nothing, incumbent=3)
    assert (outcome.status, outcome.values, outcome.objective) == ("hint", (3,), 3)
    assert len(runs) == config.patience  # runs without a solution do not improve either


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ((cp_model.FEASIBLE, 2), ("feasible", (2,))),  # better than the hint
        ((cp_model.OPTIMAL, 3), ("optimal", (3,))),  # the hint, proven optimal
        ((cp_model.OPTIMAL, 5), ("optimal", (5,))),  # a hint below the optimum was wrong
    ],
)
def test_the_incumbent_hint_against_the_solvers_solutions(monkeypatch, result, expected):
    results = [result, (cp_model.FEASIBLE, 4), (cp_model.FEASIBLE, 4)]
    outcome, _ = run_loop(monkeypatch, papers(deadline=1000.0), results, incumbent=3)
    assert (outcome.status, outcome.values) == expected


def test_the_hint_plan_answers_when_the_solver_finds_nothing(monkeypatch):
    class Silent:  # a solver that never finds anything in its time
        objective_value = 0.0
        deterministic_time = 0.1

        def solve(self, model):
            return cp_model.UNKNOWN

    monkeypatch.setattr(search, "_solver", lambda config, limit, left: Silent())
    snap = busy_snapshot()
    decision = decide(snap)  # checked by the validator
    d = decision.diagnostics
    assert (d.solver_status, d.fallback) == ("hint", False)
    assert started(decision) == ["short"]
    assert any(n.startswith("hint: ") for n in d.notes)


def test_solver_parameters_follow_the_mode():
    wall = search._solver(SearchConfig(num_workers=2, random_seed=7), 1.0, 0.25).parameters
    assert (wall.max_time_in_seconds, wall.num_workers, wall.random_seed) == (0.25, 2, 7)
    det = search._solver(SearchConfig(deterministic=True), 4.0, 9.0).parameters
    assert (det.max_deterministic_time, det.max_time_in_seconds) == (4.0, 9.0)


def test_a_real_infeasible_model_stops_after_one_run():
    model = cp_model.CpModel()
    x = model.new_int_var(0, 3, "x")
    model.add(x >= 5)
    outcome = solve_with_restarts(model, [x.index], [0], DETERMINISTIC, lambda: 0.0, 0.0)
    assert (outcome.status, outcome.runs, outcome.values) == ("infeasible", 1, None)


def easy_decision(snap):
    return make_dispatcher("easy", "best-fit").decide(snap, limits_as_durations(snap))


def test_past_the_deadline_the_fallback_decision_is_returned_and_marked():
    snap = busy_snapshot()
    ticks = iter([0.0])  # the first read starts the call; every later read is 100 s on
    dispatcher = hcp3(search=SearchConfig(deadline=2.0), clock=lambda: next(ticks, 100.0))
    decision = decide(snap, dispatcher=dispatcher)
    easy = easy_decision(snap)
    assert decision.starts == easy.starts and decision.planned == easy.planned
    assert decision.diagnostics.fallback
    assert decision.diagnostics.dispatcher == "hcp3"
    assert decision.diagnostics.solver_status == "deadline"
    assert any("fallback" in n for n in decision.diagnostics.notes)


def test_a_tiny_deadline_returns_the_fallback_in_time():
    snap = busy_snapshot()
    decision = decide(snap, dispatcher=hcp3(search=SearchConfig(deadline=1e-9, margin=0)))
    assert decision.diagnostics.fallback
    assert decision.starts == easy_decision(snap).starts


def test_a_proven_infeasible_model_starts_nothing(monkeypatch):
    # A horizon of 0 cannot hold both jobs: the model is infeasible by construction.
    real = flow_module.prepare

    def cramped(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), horizon=0)

    monkeypatch.setattr(flow_module, "prepare", cramped)
    snap = busy_snapshot()
    assert started(easy_decision(snap)) == ["short"]  # the fallback would start one
    decision = decide(snap)
    assert decision.starts == ()
    assert decision.diagnostics.solver_status == "infeasible"
    assert not decision.diagnostics.fallback
    assert decision.diagnostics.restarts == 0


def test_deterministic_mode_repeats_decisions():
    queue = [job(f"q{i}", submit=i, units=1 + i % 3, limit=10 + 13 * i) for i in range(12)]
    r = job("r", units=5, limit=60)
    snap = snapshot(30, nodes(4, 4), [running(r, 0, [(0, 4), (1, 1)])], queue)
    first, second = decide(snap), decide(snap)
    assert without_timings(first) == without_timings(second)


def test_a_bulk_strategy_is_followed_as_add_decision_strategy_is():
    # add_strategy writes the proto's ``variables`` field; CP-SAT must still follow it
    # (an OR-Tools upgrade that drops the field would fail here).
    def first_solution(bulk: bool, presolve: bool) -> list[int]:
        model = cp_model.CpModel()
        xs = [model.new_int_var(0, 2, "") for _ in range(5)]
        model.add(sum(xs) <= 7)
        if bulk:
            add_strategy(model, indices_of(xs), cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
        else:
            model.add_decision_strategy(xs, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
        solver = cp_model.CpSolver()
        solver.parameters.search_branching = cp_model.FIXED_SEARCH
        solver.parameters.num_workers = 1
        solver.parameters.cp_model_presolve = presolve
        solver.parameters.stop_after_first_solution = True
        assert solver.solve(model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        return [solver.value(x) for x in xs]

    assert first_solution(True, False) == first_solution(False, False) == [2, 2, 2, 1, 0]
    # Presolve rewrites this tiny model (its first solution is then all 0s), the same
    # way for both.
    assert first_solution(True, True) == first_solution(False, True)


def test_hints_set_in_bulk_match_add_hint():
    model = cp_model.CpModel()
    xs = [model.new_int_var(0, 9, "") for _ in range(4)]
    reference = cp_model.CpModel()
    ys = [reference.new_int_var(0, 9, "") for _ in range(4)]
    for y, v in zip(ys, [3, 1, 4, 1], strict=True):
        reference.add_hint(y, v)
    model.add_hint(xs[0], 9)  # replaced, not kept
    search._set_hint(model, [x.index for x in xs], [3, 1, 4, 1])
    assert list(model.proto.solution_hint.vars) == list(reference.proto.solution_hint.vars)
    assert list(model.proto.solution_hint.values) == [3, 1, 4, 1]
    with pytest.raises(ValueError, match="hint values"):
        search._set_hint(model, [x.index for x in xs], [1])
    # A negated literal is hinted through its variable, as add_hint does.
    b, c = model.new_bool_var(""), reference.new_bool_var("")
    search._set_hint(model, [(~b).index], [1])
    reference.clear_hints()
    reference.add_hint(~c, 1)
    assert list(model.proto.solution_hint.vars) == list(reference.proto.solution_hint.vars)
    assert list(model.proto.solution_hint.values) == list(reference.proto.solution_hint.values)


def test_values_read_in_bulk_match_solver_value():
    model = cp_model.CpModel()
    xs = [model.new_int_var(0, 9, "") for _ in range(3)]
    b = model.new_bool_var("")
    for x, v in zip(xs, [7, 0, 4], strict=True):
        model.add(x == v)
    model.add(b == 1)
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    variables = [*xs, b, ~b]
    expected = tuple(solver.value(v) for v in variables)
    assert search._values(solver, [v.index for v in variables]) == expected == (7, 0, 4, 1, 0)
