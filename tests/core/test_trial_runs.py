"""Trial runs: what a decision leaves idle, offered to jobs predicted long, each once,
never where or to whom a start guarantee needs it."""

from __future__ import annotations

from dataclasses import replace

from cpsched.core.registry import make_dispatcher
from cpsched.core.site import Constraints, Reservation, Site
from cpsched.core.state import DispatcherState, Guarantee
from tests.factories import job, nodes, running, snapshot

# One 4-core node: `r` holds 3 cores until 1,000; `a` needs all 4 and waits for them
# (FCFS), `b` (1 core) waits behind it: one core is idle and FCFS leaves it so.
MACHINE = nodes(4)
R = job("r", limit=1000, units=3)
A = job("a", submit=1, limit=100, units=4)
B = job("b", submit=2, limit=3000, units=1)


def decide(durations: dict[str, int], state: DispatcherState | None = None, **snap: object):
    state = state if state is not None else DispatcherState()
    dispatcher = make_dispatcher("fcfs", "first-fit", state=state, trial_runs=60)
    at = snapshot(
        10,
        snap.get("machine", MACHINE),
        snap.get("run", [running(R, 0, [(0, 3)])]),
        snap.get("queue", [A, B]),
    )
    return dispatcher.decide(at, {"a": 100, "r": 1000, **durations}), state


def trials(decision) -> dict[str, tuple[tuple[int, int], ...]]:
    return {s.job_id: s.allocation for s in decision.starts if s.trial == 60}


def test_a_job_predicted_long_is_tried_on_the_core_left_idle():
    decision, state = decide({"b": 2000})
    assert trials(decision) == {"b": ((0, 1),)}
    assert state.tried == {"b"}
    assert any("tried for 60 s" in note for note in decision.diagnostics.notes)


def test_no_job_is_tried_twice():
    state = DispatcherState(tried={"b"})
    decision, state = decide({"b": 2000}, state)
    assert trials(decision) == {}


def test_a_job_predicted_shorter_than_the_trial_is_not_tried():
    decision, _ = decide({"b": 59})
    assert trials(decision) == {}


def test_the_jobs_that_left_are_forgotten():
    state = DispatcherState(tried={"b", "gone"})
    decide({"b": 2000}, state)
    assert state.tried == {"b"}


def test_no_trial_goes_where_a_guarantee_is_due_before_it_would_end():
    two = nodes(4, 4)
    held = [running(R, 0, [(0, 3)]), running(job("s", limit=1000, units=3), 0, [(1, 3)])]
    soon = DispatcherState(guarantees={"a": Guarantee(50, 50, (("n0", 4),), 1)})
    decision, _ = decide({"b": 2000}, soon, machine=two, run=held)
    assert trials(decision) == {"b": ((1, 1),)}
    later = DispatcherState(guarantees={"a": Guarantee(70, 70, (("n0", 4),), 1)})
    decision, _ = decide({"b": 2000}, later, machine=two, run=held)
    assert trials(decision) == {"b": ((0, 1),)}


def test_a_job_holding_a_guarantee_is_not_tried():
    state = DispatcherState(guarantees={"b": Guarantee(1000, 1000, (("n0", 1),), 1)})
    decision, _ = decide({"b": 2000}, state)
    assert trials(decision) == {}


def test_a_job_the_workload_manager_may_not_requeue_is_not_tried():
    decision, _ = decide({"b": 2000}, queue=[A, replace(B, rerunnable=False)])
    assert trials(decision) == {}


def decide_with_site(site: Site, queue: list | None = None):
    dispatcher = make_dispatcher("fcfs", "first-fit", state=DispatcherState(), trial_runs=60)
    at = snapshot(10, MACHINE, [running(R, 0, [(0, 3)])], queue or [A, B])
    return dispatcher.decide(replace(at, site=site), {"a": 100, "r": 1000, "b": 2000})


def test_a_trial_keeps_the_site_rules_as_any_start():
    # b's limit (3,000 s) ends before a maintenance window at 5,000: it may be tried there
    later = Site(reservations=(Reservation("maint", frozenset({0}), 5000, 6000),))
    assert trials(decide_with_site(later)) == {"b": ((0, 1),)}
    # one starting within its limit keeps it off the node, though the trial is a minute
    sooner = Site(reservations=(Reservation("maint", frozenset({0}), 2000, 6000),))
    assert trials(decide_with_site(sooner)) == {}
    # a job the workload manager holds back (a dependency, a begin time) is not tried
    waiting = replace(B, constraints=Constraints(eligible=False, reason="BeginTime"))
    assert trials(decide_with_site(later, [A, waiting])) == {}
