"""HCP3 decisions on hand instances with known optima of the pooled model."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ortools.sat.python import cp_model

import cpsched.core.cp as cp
from cpsched.core import make_dispatcher
from cpsched.core.capacity import after_starts
from cpsched.core.cp import (
    CPDispatcher,
    ModelConfig,
    SearchConfig,
    make_cp_dispatcher,
)
from cpsched.core.cp.greedy import candidate_plans, plan_objective, serial_plan
from cpsched.core.cp.hcp3 import build_pooled_model
from cpsched.core.problem import Start
from cpsched.errors import UnknownPolicyError
from tests.core.cp._util import DETERMINISTIC, decide, hcp3, objective, prepared_of, started
from tests.factories import job, limits_as_durations, nodes, running, snapshot

NO_GUARD = ModelConfig(reserve_above=None, reserve_after=None)


def test_public_api():
    assert set(cp.__all__) == {
        "CP_DISPATCHERS",
        "CPDispatcher",
        "HCP3Dispatcher",
        "ModelConfig",
        "PCP3Dispatcher",
        "PCP20Dispatcher",
        "SearchConfig",
        "make_cp_dispatcher",
    }


def test_factory_builds_hcp3_and_rejects_unknown_names():
    dispatcher = make_cp_dispatcher("hcp3", "first-fit", SearchConfig(deadline=1.0))
    assert isinstance(dispatcher, CPDispatcher)
    assert dispatcher.name == "hcp3"
    assert dispatcher.allocator.name == "first-fit"
    assert dispatcher.fallback.name == "easy"
    assert make_cp_dispatcher("pcp3", "best-fit").name == "pcp3"
    assert make_cp_dispatcher("pcp20", "best-fit").name == "pcp20"
    with pytest.raises(UnknownPolicyError, match="hcp3, pcp20, pcp3"):
        make_cp_dispatcher("pcp19", "best-fit")
    with pytest.raises(UnknownPolicyError):
        make_cp_dispatcher("hcp3", "worst-fit")


def test_known_optimum_beats_the_greedy_priority_order():
    # 4 idle cores. "long" (whole machine, 100 s) has the highest priority, but the
    # slowdown optimum runs the two 10 s jobs first: 100-weight x 10 s instead of
    # two 1000-weights x 100 s.
    queue = [
        job("long", submit=0, units=4, limit=100),
        job("b", submit=480, limit=10),
        job("c", submit=480, limit=10),
    ]
    snap = snapshot(500, nodes(4), queue=queue)
    prepared = prepared_of(snap)
    assert [j.weight for j in prepared.jobs] == [100, 1000, 1000]
    assert plan_objective(prepared, serial_plan(prepared)) == 2 * 1000 * 100
    decision = decide(snap, dispatcher=hcp3(NO_GUARD))
    assert decision.diagnostics.solver_status == "optimal"
    assert decision.planned == {"long": 510, "b": 500, "c": 500}
    assert objective(prepared, decision.planned) == 100 * 10
    assert sorted(started(decision)) == ["b", "c"]


def test_known_optimum_with_running_jobs_and_two_types():
    # cpu 8 / gpu 2 in total. r holds 3 cpu and 1 gpu until t=100. "a" (4 cpu + 1 gpu,
    # 50 s) and "b" (2 cpu + 1 gpu, 30 s) cannot both run before 100 (one gpu free).
    r = job("r", units=1, unit=(3, 1), limit=100)
    machine = nodes((4, 1), (4, 1))
    queue = [job("a", unit=(4, 1), limit=50), job("b", unit=(2, 1), limit=30)]
    snap = snapshot(0, machine, [running(r, 0, [(0, 1)])], queue, resources=("cpu", "gpu"))
    decision = decide(snap, dispatcher=hcp3(NO_GUARD))
    # b first (weight 1000), a after it: 600 x 30 = 18000 < a first: 1000 x 50.
    assert decision.planned == {"b": 0, "a": 30}
    assert started(decision) == ["b"]
    assert decision.diagnostics.solver_status == "optimal"
    assert not decision.diagnostics.fallback


def test_diagnostics_report_the_model_size():
    r = job("r", limit=100)
    # b fits the 3 free cores alone, not beside a: the heuristic cannot start both, so
    # the model is built and searched.
    queue = [job("a"), job("b", units=3)]
    snap = snapshot(0, nodes(4), [running(r, 0, [(0, 1)])], queue)
    d = decide(snap).diagnostics
    assert d.dispatcher == "hcp3"
    assert d.model_intervals == 3  # two jobs and one merged running load
    assert d.model_variables >= 2
    assert d.model_constraints >= 4  # three intervals and one cumulative
    assert d.restarts == 0  # proven optimal in the first run


def test_jobs_planned_now_are_allocated_best_fit_in_priority_order():
    # Equal priorities (same submit, same duration): the smaller d·Σreq goes first and
    # takes the fullest node; queue order would have put "three" first.
    busy = job("busy", units=3, limit=1000)
    queue = [job("three", units=3, limit=10), job("one", units=1, limit=10)]
    snap = snapshot(0, nodes(4, 4), [running(busy, 0, [(0, 3)])], queue)
    decision = decide(snap)
    assert dict((s.job_id, s.allocation) for s in decision.starts) == {
        "one": ((0, 1),),
        "three": ((1, 3),),
    }


def test_a_job_planned_now_that_does_not_fit_the_nodes_is_postponed():
    # 3 + 1 cores free: the pool holds two 2-core units at t, the nodes only one.
    busy = job("busy", units=4, limit=1000)
    queue = [job("x", unit=2, limit=10), job("y", unit=2, limit=10)]
    snap = snapshot(0, nodes(4, 4), [running(busy, 0, [(0, 1), (1, 3)])], queue)
    decision = decide(snap)
    assert decision.planned == {"x": 0, "y": 0}
    assert started(decision) == ["x"]
    assert any("did not fit on the nodes" in n for n in decision.diagnostics.notes)


def test_what_a_postponed_job_leaves_idle_is_filled_by_easy():
    # 3 + 1 cores free. The pool starts x and y (2 cores each) now and z (1 core, 100 s)
    # after them; on the nodes y does not fit beside x. EASY on what is left reserves
    # y's start at x's end and starts z now on the node y's reservation leaves spare.
    busy = job("busy", units=4, limit=1000)
    queue = [job("x", unit=2, limit=10), job("y", unit=2, limit=10), job("z", limit=100)]
    snap = snapshot(0, nodes(4, 4), [running(busy, 0, [(0, 1), (1, 3)])], queue)
    decision = decide(snap)
    assert dict((s.job_id, s.allocation) for s in decision.starts) == {
        "x": ((0, 1),),
        "z": ((0, 1),),
    }
    assert decision.planned == {"x": 0, "y": 0, "z": 0}
    notes = decision.diagnostics.notes
    assert any("1 job(s) planned now did not fit on the nodes" in n for n in notes)
    assert any("1 job(s) started by easy in what the plan left idle" in n for n in notes)
    assert not decision.diagnostics.fallback


def test_the_fill_leaves_the_guarded_reservation_intact():
    # g (8 cores, slowdown 51) is guarded: its reservation is at 50, when both running
    # jobs end. The pool starts x and y (2 cores each) now; on the nodes only x fits.
    # EASY on what is left reserves for the older h (5 cores) at 50 and would start the
    # 1-core, 500 s z in what h leaves spare; g's reservation leaves nothing spare.
    a = job("a", units=3, limit=50)
    b = job("b", units=1, limit=50)
    queue = [
        job("h", submit=-10_000, units=5, limit=100_000),
        job("g", submit=-5_000, units=8, limit=100),
        job("x", unit=2, limit=10),
        job("y", unit=2, limit=10),
        job("z", limit=500),
    ]
    snap = snapshot(0, nodes(4, 4), [running(a, 0, [(1, 3)]), running(b, 0, [(0, 1)])], queue)
    without = snapshot(0, snap.nodes, snap.running, [j for j in queue if j.id != "g"])
    easy = make_dispatcher("easy", "best-fit")
    rest = after_starts(without, [Start("x", ((0, 1),))])
    assert "z" in started(easy.decide(rest, limits_as_durations(snap)))
    decision = decide(snap, dispatcher=hcp3(ModelConfig(reserve_above=2.0)))
    assert any("job g is protected: start by 50" in n for n in decision.diagnostics.notes)
    assert started(decision) == ["x"]


def test_empty_queue_and_nothing_startable_give_an_empty_decision():
    r = job("r", units=4, limit=100)
    for queue in ([], [job("a")]):
        snap = snapshot(0, nodes(4), [running(r, 0, [(0, 4)])], queue)
        decision = decide(snap)
        assert decision.starts == ()
        assert decision.planned == {}
        assert decision.diagnostics.solver_status == "empty"
        assert not decision.diagnostics.fallback


def test_a_job_larger_than_the_machine_is_never_modelled():
    snap = snapshot(0, nodes(2, 2), queue=[job("huge", units=5), job("ok", units=2)])
    decision = decide(snap)
    assert started(decision) == ["ok"]
    assert "huge" not in decision.planned


def test_only_the_window_is_modelled():
    queue = [job(f"j{i}", submit=i, limit=10) for i in range(6)]
    snap = snapshot(100, nodes(2), queue=queue)
    decision = decide(
        snap, dispatcher=hcp3(ModelConfig(window=3, reserve_above=None, reserve_after=None))
    )
    assert set(decision.planned) == {"j0", "j1", "j2"}
    assert sorted(started(decision)) == ["j0", "j1"]
    assert decision.diagnostics.model_intervals == 3
    assert any("beyond the window" in n for n in decision.diagnostics.notes)


def test_time_unit_does_not_change_decisions_for_durations_that_are_multiples():
    r = job("r", units=3, limit=1200)
    queue = [
        job("a", submit=0, units=4, limit=1200),
        job("b", submit=60, units=2, limit=300),
        job("c", submit=120, units=1, limit=600),
    ]
    snap = snapshot(600, nodes(4, 4), [running(r, 0, [(0, 3)])], queue)
    by_second = decide(snap, dispatcher=hcp3(ModelConfig(reserve_above=None, reserve_after=None)))
    by_minute = decide(
        snap, dispatcher=hcp3(ModelConfig(time_unit=60, reserve_above=None, reserve_after=None))
    )
    assert by_second.starts == by_minute.starts
    assert by_second.planned == by_minute.planned


def test_the_greedy_hints_are_feasible_for_the_model():
    r = job("r", units=3, unit=(1, 2), limit=50)
    machine = nodes((4, 8), (4, 8))
    queue = [
        job(f"q{i}", submit=i, units=1 + i % 3, unit=(1, 1 + i % 4), limit=10 + 7 * i)
        for i in range(8)
    ]
    snap = snapshot(20, machine, [running(r, 0, [(0, 3)])], queue, resources=("cpu", "mem"))
    prepared = prepared_of(snap)
    easy = make_dispatcher("easy", "best-fit").decide(snap, limits_as_durations(snap))
    plans = candidate_plans(prepared, started(easy))
    assert len(plans) == 3
    for plan in plans.values():
        pooled = build_pooled_model(prepared)
        for var, j in zip(pooled.starts, prepared.jobs, strict=True):
            pooled.model.add(var == plan[j.job.id])
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        assert solver.solve(pooled.model) == cp_model.OPTIMAL


@pytest.mark.parametrize("name", ["hcp3", "pcp3", "pcp20"])
def test_no_model_when_the_heuristic_already_starts_every_job(name):
    # Both jobs fit beside the running one: starting them now is the model's only optimum.
    r = job("r", limit=100)
    snap = snapshot(0, nodes(4, 4), [running(r, 0, [(0, 1)])], [job("a", units=3), job("b")])
    decision = decide(snap, dispatcher=make_cp_dispatcher(name, "best-fit", search=DETERMINISTIC))
    d = decision.diagnostics
    assert (d.solver_status, d.fallback, d.model_variables) == ("trivial", False, 0)
    assert sorted(started(decision)) == ["a", "b"]
    assert decision.planned == {"a": 0, "b": 0}


def test_a_guarded_job_waiting_for_its_reservation_keeps_the_model():
    # "big" (priority above the threshold) cannot start before r ends; "small" fits now
    # and EASY starts it, but the model must still check it against big's reservation.
    r = job("r", units=3, limit=100)
    queue = [job("big", units=4, submit=-10_000), job("small", limit=10)]
    snap = snapshot(0, nodes(4), [running(r, 0, [(0, 3)])], queue)
    decision = decide(snap, dispatcher=hcp3(ModelConfig(reserve_above=2.0)))
    assert decision.diagnostics.solver_status != "trivial"


@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.tuples(st.integers(0, 5), st.integers(0, 5))),
        max_size=30,
    )
)
def test_the_running_jobs_profile_built_in_one_pass_is_the_one_built_load_by_load(loads):
    """PooledProfile sums the loads from the longest release down (adding them one by one
    took 2.9 s at 5,000 nodes): the same steps and usage as StepProfile.add gives."""
    from types import SimpleNamespace

    from cpsched.core.cp.greedy import PooledProfile, StepProfile
    from cpsched.core.cp.prepare import Load

    running = tuple(Load(length, demand) for length, demand in loads)
    one_by_one = StepProfile((50, 50))
    for load in running:
        one_by_one.add(0, load.length, load.demand)
    at_once = PooledProfile(SimpleNamespace(capacity=(50, 50), running=running))
    assert (at_once.cuts, at_once.used) == (one_by_one.cuts, one_by_one.used)
