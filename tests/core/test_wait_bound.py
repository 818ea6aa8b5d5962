"""The wait bound keeps every start guarantee while jobs end by their limits.

Random traces on two 4-core nodes, real run times anywhere up to the limits, the
predictions as wrong as a user's request can be (the inner dispatcher plans with the real
run times, the guarantees hold against the limits): whatever the dispatcher inside, every
guaranteed job starts no later than its guarantee, no guarantee is broken, every decision
is valid, and every job starts.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core import Job, RunningJob, wait_bound
from cpsched.core.allocators import FirstFit
from cpsched.core.problem import Decision, Diagnostics, Node, Start
from cpsched.core.registry import make_dispatcher
from cpsched.core.state import (
    FEWEST_WAITS,
    REFRESH_EVERY,
    DispatcherState,
    Earlier,
    RecentWaits,
)
from cpsched.core.validate import check_decision
from tests.core.random_jobs import jobs_strategy, trace_of
from tests.factories import job, nodes, snapshot

MACHINE = nodes(4, 4)


def replay(
    spec: list[tuple[int, int, int, float]],
    inner: str,
    after: int,
    depth: int | None = None,
    overdue: float | None = None,
    today: int | None = None,
) -> tuple[dict[str, int], dict[str, int], DispatcherState]:
    """Each job's start and last guarantee, and the state, from an event-by-event run.
    With ``overdue``, the state starts with 100 waits of 0-99 s known (the quantile's
    floor is the caller's to lower)."""
    trace, runtime = trace_of(spec)
    state = DispatcherState()
    if overdue is not None:
        state.recent_waits = RecentWaits()
        for wait in range(FEWEST_WAITS):
            state.recent_waits.add(wait)
    dispatcher = make_dispatcher(
        inner,
        "first-fit",
        state=state,
        wait_bound=after,
        wait_bound_depth=depth,
        wait_overdue_quantile=overdue,
        wait_bound_today=today,
    )
    run: list[RunningJob] = []
    queue: list[Job] = []
    pending = list(trace)
    started: dict[str, int] = {}
    promised: dict[str, int] = {}
    now = 0
    while pending or queue or run:
        times = [j.submit for j in pending[:1]] + [rj.start + runtime[rj.job.id] for rj in run]
        now = max(now, min(times))
        for rj in run:
            if rj.start + runtime[rj.job.id] <= now and state.today_schedule is not None:
                state.today_schedule.ended(rj.job.id, rj.start, now)  # as the cluster runtime
        run = [rj for rj in run if rj.start + runtime[rj.job.id] > now]
        while pending and pending[0].submit <= now:
            queue.append(pending.pop(0))
        snap = snapshot(now, MACHINE, run, queue)
        durations = {j.id: runtime[j.id] for j in queue} | {
            rj.job.id: runtime[rj.job.id] for rj in run
        }
        decision = dispatcher.decide(snap, durations)
        check_decision(snap, decision)
        promised.update((job_id, g.start_by) for job_id, g in state.guarantees.items())
        chosen = {s.job_id: s.allocation for s in decision.starts}
        for j in queue:
            if j.id in chosen:
                run.append(RunningJob(j, now, j.time_limit, chosen[j.id]))
                started[j.id] = now
                if state.recent_waits is not None:  # as the cluster runtime records it
                    state.recent_waits.add(now - j.submit)
        queue = [j for j in queue if j.id not in chosen]
        if not chosen and not pending and not run and queue:
            raise AssertionError(f"jobs left waiting on an idle machine: {queue}")
    return started, promised, state


@settings(max_examples=400, deadline=None)
@given(
    spec=jobs_strategy,
    inner=st.sampled_from(["sjf", "ljf", "easy", "fcfs"]),
    after=st.sampled_from([1, 50, 200]),
    depth=st.sampled_from([None, 1, 3]),
    overdue=st.sampled_from([None, 0.3, 0.9]),
    today=st.sampled_from([None, 0, 60]),
)
def test_every_guarantee_is_kept_when_jobs_end_by_their_limits(
    spec, inner, after, depth, overdue, today
):
    """With or without overdue jobs started first (their floor lowered: the traces last
    minutes), and with or without the jobs today's scheduler would have served."""
    with mock.patch.object(wait_bound, "OVERDUE_FLOOR", 0):
        started, promised, state = replay(spec, inner, after, depth, overdue, today)
    assert len(started) == len(spec)
    assert state.guarantees_broken == 0
    late = {j: (started[j], by) for j, by in promised.items() if started[j] > by}
    assert not late


def test_an_overdue_job_starts_before_the_shorter_ones_the_dispatcher_prefers():
    # Four free cores at 100 s: SJF would start the four 1-core jobs submitted at 90 s,
    # predicted shorter; j0 (4 cores) has waited 100 s, longer than 90% of the 100 latest
    # starts (0-99 s), so it is overdue and starts first, where it fits at its limit.
    state = DispatcherState(recent_waits=RecentWaits())
    for wait in range(FEWEST_WAITS):
        state.recent_waits.add(wait)
    dispatcher = make_dispatcher(
        "sjf", "first-fit", state=state, wait_bound=10**6, wait_overdue_quantile=0.9
    )
    queue = [job("j0", submit=0, units=4, limit=300)]
    queue += [job(f"s{k}", submit=90, units=1, limit=60) for k in range(4)]
    run = [RunningJob(job("r", units=4, limit=10**4), 0, 10**4, ((1, 4),))]
    durations = {"j0": 300, "r": 10**4} | {f"s{k}": 10 for k in range(4)}
    with mock.patch.object(wait_bound, "OVERDUE_FLOOR", 0):
        decision = dispatcher.decide(snapshot(100, MACHINE, run, queue), durations)
    assert [s.job_id for s in decision.starts] == ["j0"]
    assert "1 overdue job(s) started first" in decision.diagnostics.notes[0]
    # Without it, SJF's choice stands.
    plain = make_dispatcher("sjf", "first-fit", wait_bound=10**6)
    starts = plain.decide(snapshot(100, MACHINE, run, queue), durations).starts
    assert sorted(s.job_id for s in starts) == ["s0", "s1", "s2", "s3"]


def test_recent_waits_give_a_quantile_once_enough_are_known_and_refresh_it():
    recent = RecentWaits()
    for wait in range(FEWEST_WAITS - 1):
        recent.add(wait)
    assert recent.quantile(0.5) is None  # a restart's first starts decide nothing
    recent.add(FEWEST_WAITS - 1)
    assert recent.quantile(0.9) == 89  # nearest rank below, of 0..99
    for _ in range(REFRESH_EVERY - 1):
        recent.add(10**6)
    assert recent.quantile(0.9) == 89  # kept between refreshes
    recent.add(10**6)
    assert recent.quantile(0.9) == 10**6  # 50 of the 150 waits are 10**6


def test_a_long_job_behind_a_stream_of_short_ones_starts_by_its_guarantee():
    # SJF alone starts the 8-core job only when the stream stops; its guarantee, given
    # once it has waited 100 s (at 105 s), is where the two long 1-core jobs end by
    # their limits, and the short jobs started after it all end before.
    spec = [(0, 1, 200, 1.0), (0, 1, 200, 1.0), (5, 8, 100, 1.0)]
    spec += [(20, 1, 60, 1.0) for _ in range(30)]
    started, promised, state = replay(spec, "sjf", after=100)
    assert promised["j2"] == 200
    assert started["j2"] == 200
    assert state.guarantees_broken == 0


def test_without_the_bound_the_same_job_waits_for_the_stream_to_end():
    spec = [(0, 1, 200, 1.0), (0, 1, 200, 1.0), (5, 8, 100, 1.0)]
    spec += [(20, 1, 60, 1.0) for _ in range(30)]
    started, _, _ = replay(spec, "sjf", after=10**9)
    assert started["j2"] >= 5 + 20 * 30


def test_at_most_depth_jobs_hold_a_guarantee_the_longest_waiting_first():
    # Three 8-core jobs behind a running 8-core job: with depth 1 only the oldest holds a
    # guarantee; the next gets one when it starts.
    state = DispatcherState()
    dispatcher = make_dispatcher("sjf", "first-fit", state=state, wait_bound=1, wait_bound_depth=1)
    run = [RunningJob(job("j0", units=8), 0, 100, ((0, 4), (1, 4)))]
    queue = [job(f"j{k}", submit=k, units=8) for k in (1, 2, 3)]
    dispatcher.decide(snapshot(10, MACHINE, run, queue), {f"j{k}": 100 for k in range(4)})
    assert {job_id: g.start_by for job_id, g in state.guarantees.items()} == {"j1": 100}


def test_the_witness_follows_its_nodes_by_name_when_the_node_list_changes():
    # j1 (4 cores) is guaranteed a start at 100 on the node the running job frees. A new
    # node listed first shifts every index: the witness stays on the same named node.
    # Then that node leaves the cluster: the guarantee is placed again (on the node left,
    # free from 200), and the change is counted as broken, never a crash.
    state = DispatcherState()
    dispatcher = make_dispatcher("sjf", "first-fit", state=state, wait_bound=1)
    two = (Node("a", (4,)), Node("b", (4,)))
    run = [
        RunningJob(job("j0", units=4), 0, 100, ((0, 4),)),
        RunningJob(job("jb", units=4, limit=200), 0, 200, ((1, 4),)),
    ]
    queue = [job("j1", submit=1, units=4)]
    durations = {"j0": 100, "jb": 200, "j1": 100}
    dispatcher.decide(snapshot(10, two, run, queue), durations)
    assert state.guarantees["j1"].placement == (("a", 4),)
    three = (Node("c", (1,)), *two)
    shifted = [
        RunningJob(job("j0", units=4), 0, 100, ((1, 4),)),
        RunningJob(job("jb", units=4, limit=200), 0, 200, ((2, 4),)),
    ]
    decision = dispatcher.decide(snapshot(20, three, shifted, queue), durations)
    check_decision(snapshot(20, three, shifted, queue), decision)
    assert state.guarantees["j1"].placement == (("a", 4),)
    assert (state.guarantees["j1"].start_by, state.guarantees_broken) == (100, 0)
    only_b = (Node("b", (4,)),)
    left = [RunningJob(job("jb", units=4, limit=200), 0, 200, ((0, 4),))]
    decision = dispatcher.decide(snapshot(30, only_b, left, queue), durations)
    check_decision(snapshot(30, only_b, left, queue), decision)
    assert state.guarantees["j1"].placement == (("b", 4),)
    assert (state.guarantees["j1"].start_by, state.guarantees_broken) == (200, 1)


class Ticking:
    """A deadline whose clock moves ``tick`` seconds each time it is read."""

    def __init__(self, left: float, tick: float = 0.01) -> None:
        self.remaining = left
        self.tick = tick

    def left(self) -> float:
        self.remaining -= self.tick
        return self.remaining


class Deciding:
    """An inner dispatcher that starts ``long`` on node 1 (past the guaranteed job's
    witness start at its limit, so the bound leaves it out) and notes its deadline."""

    name = "fixed"

    def __init__(self, state: DispatcherState) -> None:
        self.state = state
        self.seen: list[object] = []

    def decide(self, snap, durations):
        self.seen.append(self.state.deadline)
        return Decision(starts=(Start("long", ((1, 1),)),), diagnostics=Diagnostics("fixed"))


def bounded_around(state: DispatcherState) -> tuple[wait_bound.WaitBound, Deciding, object]:
    """j0 holds node 0 until 100; j1 (both nodes) is guaranteed 100; node 1 is free now."""
    inner = Deciding(state)
    bound = wait_bound.WaitBound(
        inner, FirstFit(), state, wait_bound.BoundSettings(after=1, depth=1)
    )
    run = [RunningJob(job("j0", units=4), 0, 100, ((0, 4),))]
    queue = [
        job("j1", submit=1, units=8),
        job("long", submit=2, limit=1000),
        job("short", submit=3, limit=50),
    ]
    return bound, inner, snapshot(10, MACHINE, run, queue)


def test_the_wrapped_dispatcher_gets_a_deadline_that_keeps_time_for_the_work_after_it():
    state = DispatcherState()
    bound, inner, snap = bounded_around(state)
    durations = {"j0": 100, "j1": 100, "long": 1000, "short": 50}
    caller = Ticking(0.2)
    state.deadline = caller
    first = bound.decide(snap, durations)
    assert [s.job_id for s in first.starts] == ["short"]  # long left out, short filled in
    assert state.deadline is caller  # given back once the wrapped dispatcher returned
    kept = state.timings.wait_bound_after_s
    assert kept > 0  # the clock moved while the starts were checked and filled
    state.deadline = caller = Ticking(0.2)
    bound.decide(snap, durations)
    earlier = inner.seen[-1]
    assert isinstance(earlier, Earlier) and earlier.deadline is caller
    assert earlier.by == wait_bound.AFTER_KEEP * kept
    # One slow call (a second after the wrapped dispatcher) keeps back at most half of
    # what is left, not the whole deadline, from the next.
    state.timings.wait_bound_after_s = 1.0
    state.deadline = caller = Ticking(0.2, tick=0)
    bound.decide(snap, durations)
    assert inner.seen[-1].by == 0.1


def test_once_the_deadline_has_passed_the_bound_fills_nothing_more():
    state = DispatcherState()
    bound, _, snap = bounded_around(state)
    durations = {"j0": 100, "j1": 100, "long": 1000, "short": 50}
    state.deadline = Ticking(-1.0, tick=0)
    decision = bound.decide(snap, durations)
    check_decision(snap, decision)
    assert decision.starts == ()  # long broke the witness; short was not offered in time
    assert state.guarantees["j1"].start_by == 100  # the promise is made all the same
