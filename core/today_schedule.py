"""Today's scheduler run beside the real one: when it would have served each queued job.

A site judges a new scheduler job by job against what it runs today (EASY backfilling on
the users' requested times). :class:`TodaySchedule` replays today's scheduler on-line, on
the same arrivals and the same machine, so that the wait bound can tell which jobs are
about to wait longer than today would have kept them (docs/wait-bound.md). For each job
still queued on the real cluster it knows when today's scheduler first **reserved** for
it (made it the first blocked job, the one EASY holds room for) and when it **started**
it.

It reads no future. A job's end in today's schedule is its start there plus its real run
time, known only once the real job has ended (:meth:`TodaySchedule.ended`, recorded by
the cluster runtime, with when it ended); until then the job runs on there, at most to
its limit. Where the real cluster started a job no later than today's scheduler would
have (what the wait bound is there to keep), the real end comes first and the schedule
is exact; where it started it later, the schedule learns the end only then and falls a
little behind what today's scheduler would have done, which only makes it more lenient.
A job that leaves the real queue without running (cancelled while pending) leaves today's
queue too, at the next call; one running a trial keeps what today's scheduler owed it.
"""

from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass, field

from cpsched.core.capacity import shift
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.problem import Amounts, Job, Node, RunningJob, Snapshot


@dataclass(slots=True)
class TodaySchedule:
    """EASY on the requests (``today``, built by the policy) over the real cluster's arrivals
    and real run times; :meth:`advance` brings it to each snapshot's time."""

    today: Dispatcher
    """Today's scheduler: EASY on best-fit, queue order; it plans with the jobs' limits."""
    time: int | None = None
    """Where today's schedule stands; None until the first snapshot seeds it."""
    nodes: tuple[Node, ...] = ()
    queue: dict[str, Job] = field(default_factory=dict)
    """Jobs today's schedule has not started, in submission order."""
    running: dict[str, RunningJob] = field(default_factory=dict)
    rows: list[Amounts] = field(default_factory=list)
    total: list[int] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)
    """Each queued and running job's limit: today's durations."""
    ends: list[tuple[int, str]] = field(default_factory=list)
    """Heap of today's schedule's ends: a job's start plus its real run time once known, else
    plus its limit (no job runs longer)."""
    run_times: dict[str, int] = field(default_factory=dict)
    """Real run times of jobs today's schedule has not started yet (the real cluster ran them
    earlier, as it should)."""
    real_queue: frozenset[str] = frozenset()
    """The real queue's job ids at the latest snapshot: new ids are arrivals."""
    reserved_at: dict[str, int] = field(default_factory=dict)
    """When today's scheduler first held room for each job still queued for real."""
    started_at: dict[str, int] = field(default_factory=dict)
    """When today's scheduler started each job still queued for real."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """A call the service gave up on may still be advancing today's schedule beside the
    fallback's call, and the cluster runtime records ends between calls."""

    def advance(self, snapshot: Snapshot) -> None:
        """Today's schedule up to ``snapshot.time``: its arrivals at their submission
        times, its ends as far as they are known, EASY deciding at each of these events."""
        with self.lock:
            self._advance(snapshot)

    def _advance(self, snapshot: Snapshot) -> None:
        now = snapshot.time
        if self.time is None or (
            snapshot.nodes is not self.nodes and _names(snapshot.nodes) != _names(self.nodes)
        ):
            self._seed(snapshot)
        elif now < self.time:
            return  # an older snapshot (a call answered late): today's schedule is past it
        self.nodes = snapshot.nodes
        known = self.real_queue
        arrivals = [
            job
            for job in snapshot.queued
            if job.id not in known and job.id not in self.queue and job.id not in self.running
        ]
        arrivals.sort(key=lambda job: job.submit)
        self.real_queue = frozenset(job.id for job in snapshot.queued)
        withdrawn = self._withdraw(known - self.real_queue, snapshot)
        self._run_until(now, arrivals, snapshot)
        self.time = now
        if withdrawn and self.queue:
            self._decide(now, snapshot)  # what today's would do once they are gone
        self._forget_left(snapshot)

    def _forget_left(self, snapshot: Snapshot) -> None:
        """Forget when today would have served the jobs no longer queued for real, except
        those running a trial (:mod:`cpsched.core.trial_runs`): one may come back, owed
        what today's scheduler owed it."""
        left = [
            job_id
            for pending in (self.reserved_at, self.started_at)
            for job_id in pending
            if job_id not in self.real_queue
        ]
        if not left:
            return
        trials = {rj.job.id for rj in snapshot.running if rj.trial}
        for pending in (self.reserved_at, self.started_at):
            for job_id in left:
                if job_id not in trials:
                    pending.pop(job_id, None)

    def _withdraw(self, left: frozenset[str], snapshot: Snapshot) -> bool:
        """The jobs that left the real queue without running (cancelled, or removed while
        pending: no end will ever come for them) leave today's queue too; otherwise
        today's scheduler would run them there, each to its limit. Whether any did."""
        gone = [job_id for job_id in left if job_id in self.queue and job_id not in self.run_times]
        if gone:  # the real cluster's running jobs are looked at only when some left
            running = {rj.job.id for rj in snapshot.running}
            gone = [job_id for job_id in gone if job_id not in running]
        for job_id in gone:
            del self.queue[job_id]
            del self.limits[job_id]
        return bool(gone)

    def ended(self, job_id: str, start: int, end: int) -> None:
        """The real cluster's ``job_id`` ran from ``start`` to ``end``: it ends in today's schedule
        as long after today's schedule started it, and not before ``end``, when that was known."""
        with self.lock:
            self._ended(job_id, end - start, end)

    def _ended(self, job_id: str, run_time: int, known_at: int) -> None:
        running = self.running.get(job_id)
        if running is not None:
            assert self.time is not None
            ran = running.start + min(run_time, running.time_limit)
            heapq.heappush(self.ends, (max(self.time, known_at, ran), job_id))
        elif job_id in self.queue:
            self.run_times[job_id] = run_time

    def _seed(self, snapshot: Snapshot) -> None:
        """Start from the real cluster as it is (the first call, or the nodes changed)."""
        self.time = snapshot.time
        self.nodes = snapshot.nodes
        self.rows, self.total = list(snapshot.free), list(snapshot.free_total)
        self.running = {rj.job.id: rj for rj in snapshot.running}
        self.queue = {}
        self.limits = {rj.job.id: rj.time_limit for rj in snapshot.running}
        self.ends = [(rj.start + rj.time_limit, rj.job.id) for rj in snapshot.running]
        heapq.heapify(self.ends)
        self.run_times.clear()
        self.real_queue = frozenset()

    def _run_until(self, now: int, arrivals: list[Job], snapshot: Snapshot) -> None:
        never = 1 << 62
        ends, queue = self.ends, self.queue
        assert self.time is not None
        i = 0
        while True:
            next_arrival = max(arrivals[i].submit, self.time) if i < len(arrivals) else never
            next_end = ends[0][0] if ends else never
            t = min(next_arrival, next_end)
            if t > now:
                return
            while ends and ends[0][0] <= t:
                self._end(heapq.heappop(ends)[1])
            while i < len(arrivals) and arrivals[i].submit <= t:
                job = arrivals[i]
                queue[job.id] = job
                self.limits[job.id] = job.time_limit
                i += 1
            self.time = t
            if queue:
                self._decide(t, snapshot)

    def _end(self, job_id: str) -> None:
        running = self.running.pop(job_id, None)
        if running is None:
            return  # ended already (its real end and its limit were both queued)
        shift(self.rows, self.total, running.allocation, running.job, 1, self.nodes)
        del self.limits[job_id]

    def _decide(self, t: int, snapshot: Snapshot) -> None:
        """Today's decision at ``t``: its starts run in today's schedule; its first job left
        waiting is the one it reserves for."""
        view = Snapshot(
            time=t,
            resource_names=snapshot.resource_names,
            nodes=self.nodes,
            running=tuple(self.running.values()),
            queued=tuple(self.queue.values()),
            free=tuple(self.rows),
            free_total=tuple(self.total),
            capacity_total=snapshot.capacity_total,
            site=snapshot.site,
        )
        decision = self.today.decide(view, self.limits)
        for start in decision.starts:
            job = self.queue.pop(start.job_id)
            shift(self.rows, self.total, start.allocation, job, -1, self.nodes)
            self.running[job.id] = RunningJob(job, t, job.time_limit, start.allocation)
            run = self.run_times.pop(job.id, job.time_limit)
            heapq.heappush(self.ends, (t + min(run, job.time_limit), job.id))
            if job.id in self.real_queue:
                self.started_at[job.id] = t
        for job_id in self.queue:
            if job_id in self.real_queue:
                self.reserved_at.setdefault(job_id, t)
            break


def _names(nodes: tuple[Node, ...]) -> list[str]:
    return [node.name for node in nodes]
