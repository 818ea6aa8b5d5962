"""Never late: a clock driven by the test jumps past the deadline in a chosen phase, and
the call returns the fallback's decision, marked with the phase that had no time."""

import pytest
from ortools.sat.python import cp_model

import cpsched.core.cp.flow as flow_module
import cpsched.core.cp.search as search
from cpsched.core import make_dispatcher
from cpsched.core.allocators import BestFit
from cpsched.core.cp import HCP3Dispatcher, PCP3Dispatcher, PCP20Dispatcher, SearchConfig
from cpsched.core.cp.budget import Budget, OutOfTime
from cpsched.core.cp.flow import _KEEP_FACTOR
from tests.core.cp._util import decide
from tests.core.cp.test_pcp3 import NO_GUARD, fragmented
from tests.factories import limits_as_durations

KINDS = {"hcp3": HCP3Dispatcher, "pcp3": PCP3Dispatcher, "pcp20": PCP20Dispatcher}
DEADLINE = 2.0


class JumpClock:
    """Stands still until ``jump()``; then it is far past any deadline."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def jump(self):
        self.now += 100 * DEADLINE


def dispatcher_with(kind, clock, **search):
    config = SearchConfig(
        deterministic=True, initial_limit=0.1, max_limit=1.6, patience=2, **search
    )
    config = SearchConfig(**{**_fields(config), "deadline": DEADLINE, "clock": clock})
    return KINDS[kind](BestFit(), config, NO_GUARD)


def _fields(config):
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def easy(snap):
    return make_dispatcher("easy", "best-fit").decide(snap, limits_as_durations(snap))


def assert_fallback(decision, snap, kind, phases):
    expected = easy(snap)
    assert decision.starts == expected.starts and decision.planned == expected.planned
    d = decision.diagnostics
    assert d.fallback and d.dispatcher == kind and d.solver_status == "deadline"
    reasons = [n for n in d.notes if n.startswith("fallback: ")]
    assert reasons in ([f"fallback: no time left for {p}; decision of easy"] for p in phases)
    assert d.fallback_reason in (f"no time left for {p}" for p in phases)


@pytest.mark.parametrize("kind", KINDS)
def test_a_clock_that_stands_still_lets_the_solver_answer(kind):
    snap = fragmented()
    decision = decide(snap, dispatcher=dispatcher_with(kind, JumpClock()))
    assert not decision.diagnostics.fallback
    assert decision.diagnostics.solver_status in ("optimal", "feasible")
    assert any(n.startswith("phases ms: fallback") for n in decision.diagnostics.notes)


@pytest.mark.parametrize("kind", KINDS)
def test_time_running_out_in_preparation_skips_the_model(kind, monkeypatch):
    snap, clock = fragmented(), JumpClock()
    real = flow_module.prepare

    def slow_prepare(*args, **kwargs):
        clock.jump()
        return real(*args, **kwargs)

    monkeypatch.setattr(flow_module, "prepare", slow_prepare)
    decision = decide(snap, dispatcher=dispatcher_with(kind, clock))
    assert_fallback(decision, snap, kind, ["formulate"])
    assert decision.diagnostics.model_variables == 0


@pytest.mark.parametrize("kind", KINDS)
def test_time_running_out_in_formulation_never_reaches_the_solver(kind, monkeypatch):
    snap, clock = fragmented(), JumpClock()
    dispatcher = dispatcher_with(kind, clock)
    real = dispatcher._formulate

    def slow_formulate(*args, **kwargs):
        clock.jump()  # as if the first greedy plan took the whole budget
        return real(*args, **kwargs)

    monkeypatch.setattr(dispatcher, "_formulate", slow_formulate)
    monkeypatch.setattr(search, "_solver", _must_not_solve)
    decision = decide(snap, dispatcher=dispatcher)
    # PCP3 and PCP'20 check between their greedy plans; HCP3's are cheap, it checks after.
    assert_fallback(decision, snap, kind, ["hint", "build"])


def _must_not_solve(*args):
    raise AssertionError("the solver was called with no time left")


@pytest.mark.parametrize("kind", KINDS)
def test_a_solution_that_comes_after_the_deadline_is_not_used(kind, monkeypatch):
    snap, clock = fragmented(), JumpClock()
    real = search._solver

    class OverrunningSolver:
        """CP-SAT, whose answer arrives past the deadline."""

        def __init__(self, *args):
            self.inner = real(*args)

        def solve(self, model):
            code = self.inner.solve(model)
            clock.jump()
            return code

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(search, "_solver", OverrunningSolver)
    decision = decide(snap, dispatcher=dispatcher_with(kind, clock))
    assert_fallback(decision, snap, kind, ["extract"])
    assert decision.diagnostics.model_variables > 0  # the model was built and solved


def test_the_search_config_clock_is_the_dispatchers_default():
    clock = JumpClock()
    dispatcher = HCP3Dispatcher(BestFit(), SearchConfig(clock=clock))
    assert dispatcher.clock is clock
    other = JumpClock()
    assert HCP3Dispatcher(BestFit(), SearchConfig(clock=clock), clock=other).clock is other


def test_the_budget_keeps_the_margin_and_records_phases():
    clock = JumpClock()
    budget = Budget(SearchConfig(deadline=1.0, margin=0.1, clock=clock), clock)
    clock.now = 0.85
    budget.check("solve")  # 0.15 s left: more than the margin
    budget.mark("prepare")
    clock.now = 0.95
    with pytest.raises(OutOfTime) as late:
        budget.check("solve")
    assert late.value.phase == "solve"
    assert budget.phases == [("prepare", 0.85)]
    assert budget.note() == "phases ms: prepare 850.0"


def test_presolve_effort_reaches_cp_sat():
    params = search._solver(SearchConfig(), 1.0, 1.0).parameters
    assert (params.max_presolve_iterations, params.cp_model_probing_level) == (1, 0)
    assert params.symmetry_level == 0
    full = SearchConfig(
        presolve_iterations=None,
        probing_level=None,
        symmetry_level=None,
        presolve_probing_dtime=None,
    )
    params = search._solver(full, 1.0, 1.0).parameters
    default = cp_model.CpSolver().parameters
    assert params.max_presolve_iterations == default.max_presolve_iterations
    assert params.cp_model_probing_level == default.cp_model_probing_level


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_that_took_longer_to_build_than_the_time_left_is_not_solved(kind, monkeypatch):
    snap, clock = fragmented(), JumpClock()
    dispatcher = dispatcher_with(kind, clock)
    real = dispatcher._formulate

    def slow_build(*args, **kwargs):
        formulation = real(*args, **kwargs)
        clock.now += 0.6 * DEADLINE  # the build took 1.2 s: 0.8 s left, less than that
        return formulation

    monkeypatch.setattr(dispatcher, "_formulate", slow_build)
    monkeypatch.setattr(search, "_solver", _must_not_solve)
    decision = decide(snap, dispatcher=dispatcher)
    assert_fallback(decision, snap, kind, ["solve"])


@pytest.mark.parametrize("kind", KINDS)
def test_a_quick_build_leaves_the_solver_its_time(kind, monkeypatch):
    snap, clock = fragmented(), JumpClock()
    dispatcher = dispatcher_with(kind, clock)
    real = dispatcher._formulate

    def build(*args, **kwargs):
        formulation = real(*args, **kwargs)
        clock.now += 0.3 * DEADLINE  # 0.6 s to build, 1.4 s left
        return formulation

    monkeypatch.setattr(dispatcher, "_formulate", build)
    decision = decide(snap, dispatcher=dispatcher)
    assert not decision.diagnostics.fallback


def test_a_pcp20_window_above_the_size_cap_falls_back_at_once(monkeypatch):
    snap = fragmented()
    dispatcher = dispatcher_with("pcp20", JumpClock())
    dispatcher.max_unit_hosts = 1  # any window with a job of 2 hosts is above it
    monkeypatch.setattr(search, "_solver", _must_not_solve)
    decision = decide(snap, dispatcher=dispatcher)
    expected = easy(snap)
    assert decision.starts == expected.starts and decision.diagnostics.fallback
    assert decision.diagnostics.solver_status == "too_large"
    assert "fallback: model too large; decision of easy" in decision.diagnostics.notes
    assert any("above max_unit_hosts 1" in n for n in decision.diagnostics.notes)


def test_a_pcp3_window_above_its_variable_cap_falls_back_at_once(monkeypatch):
    snap = fragmented()
    dispatcher = dispatcher_with("pcp3", JumpClock())
    dispatcher.max_unit_counts = 1
    monkeypatch.setattr(search, "_solver", _must_not_solve)
    decision = decide(snap, dispatcher=dispatcher)
    assert decision.starts == easy(snap).starts
    assert decision.diagnostics.solver_status == "too_large"
    assert "fallback: model too large; decision of easy" in decision.diagnostics.notes


def record_solver_time(monkeypatch) -> list[float]:
    """The time left given to each solver run, in order (the solvers run as before)."""
    real_solver, lefts = search._solver, []

    def recording_solver(config, limit, left):
        lefts.append(left)
        return real_solver(config, limit, left)

    monkeypatch.setattr(search, "_solver", recording_solver)
    return lefts


@pytest.mark.parametrize("kind", KINDS)
def test_time_for_the_work_after_the_search_is_kept_from_the_next_search(kind, monkeypatch):
    # The clock stands still except in the extract phase, which takes 0.3 s: the next
    # call's solver gets twice that (the safety factor) less than the first's.
    snap, clock = fragmented(), JumpClock()
    dispatcher = dispatcher_with(kind, clock)
    real_extract = dispatcher._extract

    def slow_extract(*args, **kwargs):
        clock.now += 0.3
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(dispatcher, "_extract", slow_extract)
    lefts = record_solver_time(monkeypatch)
    first = decide(snap, dispatcher=dispatcher)
    clock.now = 0.0  # a second call on a fresh clock
    lefts_first = list(lefts)
    second = decide(snap, dispatcher=dispatcher)
    assert not first.diagnostics.fallback and not second.diagnostics.fallback
    assert dispatcher.state.timings.after_solve_s == pytest.approx(0.3)
    assert lefts[len(lefts_first)] == pytest.approx(lefts_first[0] - _KEEP_FACTOR * 0.3)


@pytest.mark.parametrize("kind", KINDS)
def test_the_search_keeps_at_least_the_fallbacks_time_for_the_work_after_it(kind, monkeypatch):
    # A first call, with nothing seen after a search yet: the fallback heuristic takes
    # 0.2 s on this snapshot, so the solver gets twice that less than the time left.
    snap, clock = fragmented(), JumpClock()
    dispatcher = dispatcher_with(kind, clock)
    real_fallback = dispatcher.fallback.decide

    def slow_fallback(*args, **kwargs):
        decision = real_fallback(*args, **kwargs)
        clock.now += 0.2
        return decision

    monkeypatch.setattr(dispatcher.fallback, "decide", slow_fallback)
    lefts = record_solver_time(monkeypatch)
    decision = decide(snap, dispatcher=dispatcher)
    assert not decision.diagnostics.fallback
    config = dispatcher.search
    assert lefts[0] == pytest.approx(config.deadline - 0.2 - config.margin - _KEEP_FACTOR * 0.2)


@pytest.mark.parametrize("kind", KINDS)
def test_a_solution_whose_starts_would_take_too_long_to_place_is_not_extracted(kind, monkeypatch):
    # The clock stands still except in the extract phase, which takes 0.3 s: the dispatcher
    # learns that. A call whose time left is less than its expected extract time answers
    # with the fallback before extracting.
    snap, clock = fragmented(), JumpClock()
    dispatcher = dispatcher_with(kind, clock)
    real_extract, extracted = dispatcher._extract, []

    def slow_extract(*args, **kwargs):
        extracted.append(clock.now)
        clock.now += 0.3
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(dispatcher, "_extract", slow_extract)
    first = decide(snap, dispatcher=dispatcher)
    assert not first.diagnostics.fallback and len(extracted) == 1
    # Jobs the solution starts now (HCP3 may then postpone one that does not fit).
    starting = sum(1 for start in first.planned.values() if start == snap.time)
    assert dispatcher._extract_estimate(starting) == pytest.approx(0.3)
    # Had the extract's fixed part taken the whole deadline, the next call would not
    # extract.
    dispatcher.state.timings.extract_fixed_s = DEADLINE
    clock.now = 0.0
    second = decide(snap, dispatcher=dispatcher)
    assert len(extracted) == 1  # never extracted
    assert_fallback(second, snap, kind, ["extract"])


def test_the_extract_estimate_has_a_fixed_part_and_a_part_per_started_job():
    dispatcher = dispatcher_with("hcp3", JumpClock())
    dispatcher._learn_extract(0.010, 0)  # a call that started nothing: the fixed part
    dispatcher._learn_extract(0.060, 25)  # 50 ms for placing 25 jobs
    assert dispatcher._extract_estimate(0) == pytest.approx(0.010)
    assert dispatcher._extract_estimate(25) == pytest.approx(0.060)
    assert dispatcher._extract_estimate(50) == pytest.approx(0.110)
    dispatcher._learn_extract(0.001, 0)  # smaller: the longest seen decays
    assert dispatcher.state.timings.extract_fixed_s == pytest.approx(0.009)
