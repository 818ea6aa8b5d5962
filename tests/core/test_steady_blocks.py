"""Block jobs start where Slurm's own split cannot drift, or wait (a bounded time) for it."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core import check_decision, make_dispatcher
from cpsched.core.allocators import BestFit, FirstFit
from cpsched.core.capacity import FreeCapacity
from cpsched.core.problem import Decision, Start
from cpsched.core.reservation import reserve, running_releases
from cpsched.core.site import Constraints
from cpsched.core.state import DispatcherState
from cpsched.core.steady_blocks import (
    SteadyBlocks,
    SteadyStarts,
    held_by_running,
    steady_layout,
    steady_placement,
)
from tests.factories import job, limits_as_durations, nodes, running, snapshot


def block(j):
    return replace(j, layout="block")


def ending_soon(snap, within=5):
    """The limits as durations, but every running job expected to end ``within`` seconds
    after the snapshot: a block job's split may become steady soon, so it waits for it."""
    durations = limits_as_durations(snap)
    durations.update({rj.job.id: snap.time - rj.start + within for rj in snap.running})
    return durations


def test_a_block_job_leaves_a_busy_node_unless_it_is_its_last():
    # n0 runs a job (2 of 4 free), n1 and n2 are idle. Best-fit fills n0 first: if that
    # job ends before Slurm allocates, Slurm puts 4 tasks on n0, not 2 — so the block job
    # goes on n1 and n2 instead (n1 full, the rest on n2).
    busy = job("busy", units=2)
    snap = snapshot(0, nodes(4, 4, 4), [running(busy, 0, [(0, 2)])], [block(job("b", units=6))])
    placer = SteadyBlocks(BestFit())
    placer.observe(snap, limits_as_durations(snap))
    free = FreeCapacity.of(snap)
    assert BestFit().place(snap.queued[0], free) == ((0, 2), (1, 4))
    assert placer.place(snap.queued[0], free) == ((1, 4), (2, 2))
    decision = make_dispatcher("easy", "best-fit").decide(snap, limits_as_durations(snap))
    check_decision(snap, decision)
    assert decision.starts[0].allocation == ((1, 4), (2, 2))
    assert not decision.starts[0].may_drift  # steady: the bridge still checks it


def test_a_busy_node_may_be_the_last_and_other_jobs_are_left_alone():
    busy = job("busy", units=1)
    snap = snapshot(0, nodes(4, 4), [running(busy, 0, [(1, 1)])], [])
    free = FreeCapacity.of(snap)
    # idle n0 then busy n1 last: steady as it is
    assert steady_placement(block(job("b", units=5)), free, frozenset({0})) == ((0, 4), (1, 1))
    placer = SteadyBlocks(BestFit())
    placer.observe(snap, limits_as_durations(snap))
    plain = job("p", units=5)  # not a block job: best-fit's own choice
    assert placer.place(plain, free) == BestFit().place(plain, free)


def test_without_a_steady_placement_a_job_that_could_start_now_waits_for_one():
    # Every node runs a job, expected to end in 5 s; no placement of 5 tasks is steady.
    # EASY reserves the job for when a running job ends instead of starting it on a
    # drifting split.
    runs = [running(job(f"r{n}", units=2), 0, [(n, 2)]) for n in range(3)]
    snap = snapshot(0, nodes(4, 4, 4), runs, [block(job("b", units=5))])
    free = FreeCapacity.of(snap)
    assert steady_placement(snap.queued[0], free, frozenset()) is None  # nothing settled
    placer = SteadyBlocks(BestFit())
    placer.observe(snap, ending_soon(snap))
    assert placer.place(snap.queued[0], free) is None
    decision = make_dispatcher("easy", "best-fit").decide(snap, ending_soon(snap))
    assert decision.starts == ()
    assert decision.planned == {"b": 5}


@pytest.mark.parametrize("dispatcher", ["easy", "hcp3"])
def test_a_job_starts_at_once_when_no_job_on_its_nodes_is_expected_to_end_within_the_wait(
    dispatcher,
):
    # The same machine, its jobs (limits 100 s) expected to end in 90 s, or in 50 s but
    # for the job on the last node (n2), which ends in 10: waiting 30 s would leave the
    # room idle and the split no safer, so the job starts at once, marked may_drift.
    runs = [running(job(f"r{n}", units=2), 0, [(n, 2)]) for n in range(3)]
    snap = snapshot(0, nodes(4, 4, 4), runs, [block(job("b", units=5))])
    far = {**limits_as_durations(snap), "r0": 90, "r1": 90, "r2": 90}
    last_ends_soon = {**limits_as_durations(snap), "r0": 50, "r1": 50, "r2": 10}
    for durations in (far, last_ends_soon):
        state = DispatcherState()
        policy = make_dispatcher(dispatcher, "best-fit", state=state, split_wait=30)
        decision = policy.decide(snap, durations)
        check_decision(snap, decision)
        assert [(s.job_id, s.may_drift) for s in decision.starts] == [("b", True)]
        assert dict(decision.starts[0].allocation) == {0: 2, 1: 2, 2: 1}
        assert state.split_waits == {}
    # Planned to their limits (no prediction, or one outlived), they may end any moment:
    # the job waits.
    state = DispatcherState()
    policy = make_dispatcher(dispatcher, "best-fit", state=state, split_wait=30)
    assert policy.decide(snap, limits_as_durations(snap)).starts == ()
    assert state.split_waits == {"b": 0}


def test_a_reservation_keeps_an_unsteady_placement():
    # Capacity that running jobs free later is not a start now: nothing to wait for.
    runs = [running(job(f"r{n}", units=2), 0, [(n, 2)]) for n in range(3)]
    snap = snapshot(0, nodes(4, 4, 4), runs, [block(job("b", units=9))])
    placer = SteadyBlocks(BestFit())
    placer.observe(snap, limits_as_durations(snap))
    later = FreeCapacity.of(snap).copy()
    later.later = True
    later.give(((0, 2),), runs[0].job)  # r0 has ended by then
    assert placer.place(snap.queued[0], later) == BestFit().place(snap.queued[0], later)


@pytest.mark.parametrize("dispatcher", ["easy", "fcfs"])
def test_only_an_end_that_changes_the_split_is_worth_waiting_for(dispatcher):
    # A -N 4 job of 7 tasks on four 4-core nodes splits (n0: 2, n1: 3, n2: 1, n3: 1).
    # r2's end on n2, due in 5 s, would not change that (n2 gets one task either way);
    # r0's on n0 would, but it is due in 1,000 s: the job starts at once, marked.
    runs = [
        running(job("r0", units=2, limit=1000), 0, [(0, 2)]),
        running(job("r2", units=2, limit=5), 0, [(2, 2)]),
    ]
    four = Constraints(min_nodes=4, max_nodes=4)
    snap = snapshot(
        0, nodes(4, 4, 4, 4), runs, [replace(block(job("b", units=7)), constraints=four)]
    )
    state = DispatcherState()
    decision = make_dispatcher(dispatcher, "best-fit", state=state).decide(
        snap, {**limits_as_durations(snap), "r0": 900}
    )
    check_decision(snap, decision)
    assert [(s.job_id, dict(s.allocation), s.may_drift) for s in decision.starts] == [
        ("b", {0: 2, 1: 3, 2: 1, 3: 1}, True)
    ]
    assert state.split_waits == {}


def test_a_job_stops_waiting_when_the_end_it_waits_for_comes_after_its_wait():
    # b has waited since t = 0; at t = 20 the job on its nodes is due in 15 s, after
    # what is left of its 30 s: it starts now rather than wait 10 s for nothing.
    runs = [running(job(f"r{n}", units=2), 0, [(n, 2)]) for n in range(3)]
    snap = snapshot(20, nodes(4, 4, 4), runs, [block(job("b", units=5))])
    state = DispatcherState(split_waits={"b": 0})
    policy = make_dispatcher("easy", "best-fit", state=state, split_wait=30)
    decision = policy.decide(snap, {**limits_as_durations(snap), "r0": 35, "r1": 35, "r2": 35})
    assert [(s.job_id, s.may_drift) for s in decision.starts] == [("b", True)]
    # Due in 9 s instead: it waits on.
    soon = {**limits_as_durations(snap), "r0": 29, "r1": 29, "r2": 29}
    assert policy.decide(snap, soon).starts == ()


def test_a_task_job_over_its_per_node_limit_is_refused_not_an_error():
    # Best-fit puts 3 tasks on n0 or n1, over the job's tasks-per-node of 2: the site's
    # rule refuses that placement (it used to raise while laying the split out).
    runs = [running(job("r0", units=2), 0, [(0, 2)]), running(job("r1", units=3), 0, [(1, 3)])]
    two_per_node = Constraints(tasks_per_node=2)
    queue = [replace(block(job("b", units=5)), constraints=two_per_node)]
    snap = snapshot(0, nodes(4, 4, 4), runs, queue)
    for dispatcher in ("easy", "fcfs"):
        decision = make_dispatcher(dispatcher, "best-fit").decide(snap, ending_soon(snap))
        check_decision(snap, decision)
        for start in decision.starts:
            assert max(n for _, n in start.allocation) <= 2


@pytest.mark.parametrize("dispatcher", ["easy", "hcp3"])
def test_the_wait_for_a_steady_split_is_bounded(dispatcher):
    # The same machine at t = 0, 20, 30: the job waits while it is younger than
    # split_wait (30 s from the first call it waited on), then starts as it can.
    runs = [running(job(f"r{n}", units=2, limit=1000), 0, [(n, 2)]) for n in range(3)]
    queue = [block(job("b", units=5))]
    state = DispatcherState()
    policy = make_dispatcher(dispatcher, "best-fit", state=state, split_wait=30)
    started = {}
    for t in (0, 20, 30):
        snap = snapshot(t, nodes(4, 4, 4), runs, queue)
        decision = policy.decide(snap, ending_soon(snap))
        check_decision(snap, decision)
        started[t] = [(s.job_id, s.may_drift) for s in decision.starts]
        assert decision.diagnostics.split_waiting == (t < 30)
    # It starts knowingly on a split that may drift: marked so, the bridge starts it at once.
    assert started == {0: [], 20: [], 30: [("b", True)]}
    assert state.split_waits == {"b": 0}
    # A dispatcher that does not wait starts it at once, marked the same.
    snap = snapshot(0, nodes(4, 4, 4), runs, queue)
    at_once = make_dispatcher(dispatcher, "best-fit", split_wait=0)
    starts = at_once.decide(snap, ending_soon(snap)).starts
    assert [(s.job_id, s.may_drift) for s in starts] == [("b", True)]


class Fixed:
    """A dispatcher that always answers ``starts``."""

    name = "fixed"

    def __init__(self, *starts: Start) -> None:
        self.starts = starts

    def decide(self, snapshot, durations):
        return Decision(self.starts)


def test_the_final_check_counts_and_names_the_starts_it_takes_out():
    # A dispatcher (before the placer gave Slurm's split) put q0 on (n0: 4, n1: 2, n6: 1,
    # n8: 2), and q1 on n1's other 2 cores. With that room left, Slurm splits q0 the same
    # way, but more on n6 if the job there ended first: it could drift, so it waits.
    caps = [4] * 8 + [8] * 2
    used = {2: 4, 6: 3, 8: 6}
    runs = [running(job(f"r{n}", units=u, limit=100), 0, [(n, u)]) for n, u in used.items()]
    queue = [block(job("q0", units=9)), block(job("q1", units=9, submit=1))]
    snap = snapshot(0, nodes(*caps), runs, queue)
    q0 = Start("q0", ((0, 4), (1, 2), (6, 1), (8, 2)))
    q1 = Start("q1", ((1, 2), (3, 4), (4, 3)))
    waits: dict[str, int] = {}
    decision = SteadyStarts(Fixed(q0, q1), waits, 30).decide(snap, ending_soon(snap))
    assert [s.job_id for s in decision.starts] == ["q1"]
    d = decision.diagnostics
    assert (d.split_waiting, d.split_dropped) == (1, 1)
    assert "held back, their split could drift: q0" in d.notes
    assert waits == {"q0": 0}
    # With no job on its nodes due within the wait, q0 is not held back but marked.
    waits = {}
    far = {**limits_as_durations(snap), **{r.job.id: 90 for r in runs}}
    decision = SteadyStarts(Fixed(q0, q1), waits, 30).decide(snap, far)
    assert [(s.job_id, s.may_drift) for s in decision.starts] == [("q0", True), ("q1", False)]
    assert (decision.diagnostics.split_dropped, waits) == (0, {})


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 4), min_size=10, max_size=10),
    st.lists(st.tuples(st.sampled_from([1, 2, 4, 9, 10, 16]), st.integers(5, 300)), max_size=6),
    st.sampled_from(["easy", "hcp3"]),
)
def test_the_final_check_takes_out_no_start_the_placer_found_steady(used, queue, dispatcher):
    """The placer gives a task job Slurm's split of its nodes, so the decision's later
    starts leave it the room it was found steady with: on the live test bed's shape (8
    nodes of 4 cores, 2 of 8), nothing is taken out at the end (before, EASY had 136
    decisions in 4,000 random ones with a start taken out, the live runs 37-39 a run)."""
    caps = [4] * 8 + [8] * 2
    runs = [
        running(
            job(f"r{n}", units=min(u * c // 4, c), limit=50 + 10 * n), 0, [(n, min(u * c // 4, c))]
        )
        for n, (u, c) in enumerate(zip(used, caps, strict=True))
        if u > 0
    ]
    jobs = [
        replace(
            job(f"q{k}", units=units, limit=limit, submit=k), layout="block" if units > 8 else "any"
        )
        for k, (units, limit) in enumerate(queue)
    ]
    snap = snapshot(0, nodes(*caps), runs, jobs)
    decision = make_dispatcher(dispatcher, "best-fit").decide(snap, ending_soon(snap))
    check_decision(snap, decision)
    assert decision.diagnostics.split_dropped == 0


@pytest.mark.parametrize("dispatcher", ["easy", "hcp3"])
def test_a_job_placed_by_its_node_count_waits_for_a_steady_split_too(dispatcher):
    # A -N 2 task job (the site's node-count rule places it, not the allocator) on a
    # machine where every node runs a job: its split could drift, so it waits like any
    # other task job, and the dispatcher knows it (no start for the final check to take
    # out), until it has waited split_wait seconds.
    runs = [running(job(f"r{n}", units=2, limit=1000), 0, [(n, 2)]) for n in range(3)]
    two_nodes = Constraints(min_nodes=2, max_nodes=2)
    queue = [replace(block(job("b", units=4)), constraints=two_nodes)]
    state = DispatcherState()
    policy = make_dispatcher(dispatcher, "best-fit", state=state, split_wait=30)
    for t, expected in ((0, []), (30, [("b", True)])):
        snap = snapshot(t, nodes(4, 4, 4), runs, queue)
        decision = policy.decide(snap, ending_soon(snap))
        check_decision(snap, decision)
        assert [(s.job_id, s.may_drift) for s in decision.starts] == expected
        assert decision.diagnostics.split_dropped == 0
        assert len(dict(decision.starts[0].allocation)) == 2 if expected else True


def test_a_steady_placement_the_node_count_refuses_does_not_restart_the_wait():
    # The fewest steady nodes (n1, n2) break the job's min_nodes = 3; the placement on
    # all three nodes could drift (r on n0): the job waits split_wait from its first
    # wait, then starts marked may_drift (it used to wait again at every call).
    runs = [running(job("r", units=2, limit=100_000), 0, [(0, 2)])]
    queue = [replace(block(job("j", units=6)), constraints=Constraints(min_nodes=3))]
    state = DispatcherState()
    policy = make_dispatcher("fcfs", "first-fit", state=state, split_wait=30)
    started = {}
    for t in (1000, 1030):
        snap = snapshot(t, nodes(4, 4, 4), runs, queue)
        decision = policy.decide(snap, ending_soon(snap))
        check_decision(snap, decision)
        started[t] = [(s.job_id, len(s.allocation), s.may_drift) for s in decision.starts]
    assert started == {1000: [], 1030: [("j", 3, True)]}
    assert state.split_waits == {"j": 1000}


def test_a_node_the_job_cannot_gain_room_on_is_settled():
    # n0 runs a 2-core job; the block job takes at most 2 tasks per node, so n0's end
    # would not give it more room there: (n0: 2, n1: 2) is steady, though n0 is busy.
    busy = job("busy", units=2)
    b = replace(block(job("b", units=4)), constraints=Constraints(tasks_per_node=2))
    snap = snapshot(0, nodes(4, 4), [running(busy, 0, [(0, 2)])], [b])
    placer = SteadyBlocks(BestFit())
    placer.observe(snap, limits_as_durations(snap))
    free = FreeCapacity.of(snap)
    assert placer.steady(b, ((0, 2), (1, 2)), free)
    assert placer.settled(b, 0, free)
    assert not placer.settled(block(job("c", units=4)), 0, free)


def steady_in(snap, start):
    placer = SteadyBlocks(BestFit())
    placer.observe(snap, limits_as_durations(snap))
    job_ = next(j for j in snap.queued if j.id == start.job_id)
    return len(start.allocation) == 1 or placer.steady(
        job_, start.allocation, FreeCapacity.of(snap)
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 4), min_size=2, max_size=6),
    st.integers(1, 12),
    st.sampled_from(["easy", "fcfs"]),
)
def test_a_block_job_starts_now_only_on_a_steady_split(used, units, dispatcher):
    """Every decision stays valid, and a block job that has not waited starts only where
    no running job's end can change Slurm's split; EASY reserves it otherwise."""
    runs = [running(job(f"r{n}", units=u), 0, [(n, u)]) for n, u in enumerate(used) if u > 0]
    snap = snapshot(0, nodes(*[4] * len(used)), runs, [block(job("b", units=units))])
    decision = make_dispatcher(dispatcher, "best-fit").decide(snap, ending_soon(snap))
    check_decision(snap, decision)
    for start in decision.starts:
        assert steady_in(snap, start), start
    fits = sum(4 - u for u in used) >= units
    if dispatcher == "easy" and not decision.starts and units <= 4 * len(used):
        assert decision.planned is not None and "b" in decision.planned  # nothing lost
    if fits and not decision.starts:
        idle = frozenset(n for n, u in enumerate(used) if u == 0)
        assert steady_placement(snap.queued[0], FreeCapacity.of(snap), idle) is None


class Recording:
    """First-fit, remembering whether each capacity it was given was later capacity."""

    name = "recording"

    def __init__(self) -> None:
        self.later: list[bool] = []

    def place(self, job_, free):
        self.later.append(free.later)
        return FirstFit().place(job_, free)


def test_a_reservation_places_in_later_capacity_and_copies_keep_saying_so():
    runs = [running(job("r0", units=4, limit=50), 0, [(0, 4)])]
    snap = snapshot(0, nodes(4, 4), runs, [job("big", units=3, unit=(2,))])
    free = FreeCapacity.of(snap)
    recorder = Recording()
    found = reserve(
        snap.queued[0], free, running_releases(snap, limits_as_durations(snap), [], []), recorder
    )
    assert found is not None and found.time == 50
    assert recorder.later and all(recorder.later)
    assert not free.later and not free.copy().later and not free.clamp_to(found.spare()).later
    assert found.spare().later and found.spare().copy().later


def final_room_steady(snap, decision, start):
    """Whether ``start``'s split is the same with the room the whole decision leaves it as
    with every running job on its nodes ended (what the bridge checks)."""
    jobs = {j.id: j for j in snap.queued}
    free = FreeCapacity.of(snap)
    for s in decision.starts:
        free.take(s.allocation, jobs[s.job_id])
    free.give(start.allocation, jobs[start.job_id])
    nodes_ = [n for n, _ in start.allocation]
    room = [free.row(n) for n in nodes_]
    grown = [
        tuple(a + h for a, h in zip(free.row(n), held_by_running(snap, n), strict=True))
        for n in nodes_
    ]
    return steady_layout(jobs[start.job_id], nodes_, room, grown) is not None


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(0, 4), min_size=2, max_size=6),
    st.lists(st.tuples(st.integers(1, 12), st.booleans(), st.integers(5, 200)), max_size=6),
    st.sampled_from(["easy", "fcfs", "hcp3"]),
)
def test_every_block_start_is_steady_with_the_room_the_whole_decision_leaves(
    used, queue, dispatcher
):
    """A decision's later starts may take room on a block job's nodes; the start the
    dispatcher answers is still steady then, or marked may_drift (never at a job's first
    call, as here)."""
    runs = [
        running(job(f"r{n}", units=u, limit=50 + 10 * n), 0, [(n, u)])
        for n, u in enumerate(used)
        if u > 0
    ]
    jobs = [
        replace(
            job(f"q{k}", units=units, limit=limit, submit=k), layout="block" if tasks else "any"
        )
        for k, (units, tasks, limit) in enumerate(queue)
    ]
    snap = snapshot(0, nodes(*[4] * len(used)), runs, jobs)
    decision = make_dispatcher(dispatcher, "best-fit").decide(snap, ending_soon(snap))
    check_decision(snap, decision)
    for start in decision.starts:
        assert not start.may_drift
        if next(j for j in jobs if j.id == start.job_id).layout == "block":
            assert len(start.allocation) == 1 or final_room_steady(snap, decision, start), start
