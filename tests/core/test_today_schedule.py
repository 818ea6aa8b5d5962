"""Today's scheduler run beside the real one knows what today would have done, and no more.

When the real cluster runs today's scheduler itself, the schedule starts every job exactly
when the real cluster does; it learns a run time only when the real job has ended; and
the wait bound starts first, or guarantees, the jobs today would have served.
"""

from __future__ import annotations

from hypothesis import given, settings

from cpsched.core import Job, RunningJob
from cpsched.core.registry import make_dispatcher, make_today
from cpsched.core.state import DispatcherState
from cpsched.core.today_schedule import TodaySchedule
from tests.core.random_jobs import jobs_strategy, trace_of
from tests.factories import job, nodes, snapshot

MACHINE = nodes(4, 4)


@settings(max_examples=200, deadline=None)
@given(spec=jobs_strategy)
def test_run_beside_today_the_schedule_starts_every_job_when_today_does(spec):
    """The real cluster runs today's scheduler, event by event; the schedule, told each real
    end as it happens, starts each job at the same time."""
    pending, runtime = trace_of(spec)
    today, schedule = make_today(), TodaySchedule(make_today())
    run: list[RunningJob] = []
    queue: list[Job] = []
    real: dict[str, int] = {}
    scheduled: dict[str, int] = {}
    now = 0
    while pending or queue or run:
        times = [j.submit for j in pending[:1]] + [rj.start + runtime[rj.job.id] for rj in run]
        now = max(now, min(times))
        for rj in run:
            if rj.start + runtime[rj.job.id] <= now:
                schedule.ended(rj.job.id, rj.start, now)  # as the cluster runtime does
        run = [rj for rj in run if rj.start + runtime[rj.job.id] > now]
        while pending and pending[0].submit <= now:
            queue.append(pending.pop(0))
        snap = snapshot(now, MACHINE, run, queue)
        schedule.advance(snap)
        scheduled.update((job_id, rj.start) for job_id, rj in schedule.running.items())
        limits = {j.id: j.time_limit for j in queue} | {rj.job.id: rj.time_limit for rj in run}
        chosen = {s.job_id: s.allocation for s in today.decide(snap, limits).starts}
        for j in queue:
            if j.id in chosen:
                run.append(RunningJob(j, now, j.time_limit, chosen[j.id]))
                real[j.id] = now
        queue = [j for j in queue if j.id not in chosen]
    assert scheduled == real


def test_todays_schedule_reads_no_run_time_before_the_real_job_ends():
    # j0 (8 cores, limit 100) runs in the schedule from 0; j1 waits for it. The real j0
    # started later, at 35, ran 10 s and ended at 45: the schedule learns its run time only
    # then, so j1 starts at the next event after 45, not at 10 as a schedule reading ahead
    # would.
    schedule = TodaySchedule(make_today())
    queue = [job("j0", units=8), job("j1", units=8)]
    schedule.advance(snapshot(0, MACHINE, (), queue))
    assert set(schedule.running) == {"j0"}
    assert schedule.reserved_at == {"j1": 0}
    schedule.advance(snapshot(30, MACHINE, (), queue[1:]))
    assert set(schedule.running) == {"j0"}
    schedule.ended("j0", 35, 45)
    schedule.advance(snapshot(50, MACHINE, (), queue[1:]))
    assert {job_id: rj.start for job_id, rj in schedule.running.items()} == {"j1": 45}
    assert schedule.started_at == {"j1": 45}
    # Once j1 has left the real queue, nothing about it is kept.
    schedule.advance(snapshot(60, MACHINE, (), ()))
    assert schedule.started_at == {} and schedule.reserved_at == {}


def test_a_job_running_a_trial_keeps_what_today_owes_it():
    # Today's schedule reserves for j1 behind j0. The real j1 leaves the queue for a trial
    # at 30 and comes back at 90: today's reservation for it, from 0, still stands.
    schedule = TodaySchedule(make_today())
    queue = [job("j0", units=8), job("j1", units=8)]
    schedule.advance(snapshot(0, MACHINE, (), queue))
    assert schedule.reserved_at == {"j1": 0}
    trial = RunningJob(queue[1], 30, 60, ((0, 4), (1, 4)), trial=True)
    schedule.advance(snapshot(30, MACHINE, [trial], ()))
    assert schedule.reserved_at == {"j1": 0}
    schedule.advance(snapshot(90, MACHINE, (), queue[1:]))
    assert schedule.reserved_at == {"j1": 0}


def test_a_job_cancelled_while_queued_leaves_todays_queue():
    # j0 waits behind r in today's schedule, which reserves room for it. The real j0 is
    # cancelled while pending (no end will ever come for it): today's schedule drops it,
    # so j1 is the job it reserves for and starts at r's limit (100), not after j0 would
    # have run there to its own limit.
    schedule = TodaySchedule(make_today())
    r = RunningJob(job("r", units=8), 0, 100, ((0, 4), (1, 4)))
    queue = [job("j0", units=8), job("j1", submit=5, units=8)]
    schedule.advance(snapshot(10, MACHINE, [r], queue))
    assert schedule.reserved_at == {"j0": 10}
    schedule.advance(snapshot(30, MACHINE, [r], queue[1:]))
    assert set(schedule.queue) == {"j1"} and schedule.reserved_at == {"j1": 30}
    schedule.advance(snapshot(120, MACHINE, (), queue[1:]))  # r's end never reported
    assert schedule.started_at == {"j1": 100}


def test_a_job_today_runs_no_longer_than_its_limit_in_todays_schedule():
    schedule = TodaySchedule(make_today())
    queue = [job("j0", units=8, limit=100), job("j1", units=8)]
    schedule.advance(snapshot(0, MACHINE, (), queue))
    schedule.advance(snapshot(150, MACHINE, (), queue[1:]))  # j0's end never reported
    assert {job_id: rj.start for job_id, rj in schedule.running.items()} == {"j1": 100}


def busy_half() -> list[RunningJob]:
    """A real job holding node n1 (4 cores) until its limit at 100."""
    return [RunningJob(job("r", units=4, limit=100), 0, 100, ((1, 4),))]


def test_a_job_today_would_have_started_starts_first():
    # Four free cores at 10: SJF prefers the four 1-core jobs predicted shorter; today's
    # EASY starts j0 (4 cores, first in the queue) at once. j0 has waited the 10 s after
    # which today's schedule is owed: it starts first, and the short jobs wait.
    queue = [job("j0", units=4, limit=300)]
    queue += [job(f"s{k}", submit=5, units=1, limit=60) for k in range(4)]
    durations = {"j0": 300, "r": 100} | {f"s{k}": 10 for k in range(4)}
    owed = make_dispatcher("sjf", "first-fit", state=DispatcherState(), wait_bound_today=10)
    decision = owed.decide(snapshot(10, MACHINE, busy_half(), queue), durations)
    assert [s.job_id for s in decision.starts] == ["j0"]
    assert "today's scheduler would have started them" in decision.diagnostics.notes[0]
    plain = make_dispatcher("sjf", "first-fit")
    starts = plain.decide(snapshot(10, MACHINE, busy_half(), queue), durations).starts
    assert sorted(s.job_id for s in starts) == ["s0", "s1", "s2", "s3"]


def test_a_job_today_reserves_room_for_gets_a_guarantee_once_it_has_waited():
    # w (8 cores) waits for r's node; today's EASY reserves room for it (from 100, r's
    # limit). No job has waited the plain bound's 1,000 s, but w is owed a start once it
    # has waited 5 s: from then on it holds a guarantee, at 100.
    queue = [job("w", units=8, limit=50), job("s", submit=2, units=1, limit=500)]
    durations = {"w": 50, "s": 10, "r": 100}
    for now, guaranteed in ((4, {}), (10, {"w": 100})):
        state = DispatcherState()
        owed = make_dispatcher("sjf", "first-fit", state=state, wait_bound=1000, wait_bound_today=5)
        decision = owed.decide(snapshot(now, MACHINE, busy_half(), queue), durations)
        assert {job_id: g.start_by for job_id, g in state.guarantees.items()} == guaranteed
        # s (500 s at its limit) would hold w's guarantee back: it is left out once w
        # holds one.
        assert [s.job_id for s in decision.starts] == ([] if guaranteed else ["s"])
