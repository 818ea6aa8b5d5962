"""Discrete-event replay of a trace through the dispatch core.

At each event time the simulator first releases the jobs that finished, then enqueues
every job submitted at or before that time, then calls the dispatcher once (only when
jobs are waiting, or a running job is about to hit its limit and the dispatcher may
extend it: otherwise there is nothing to decide). Jobs run their trace run time. A job
is killed at its time limit only when a policy has set that limit below the trace's
request: the original request never kills, because the trace says the job ran to its
recorded end.

Site limit policies (``SimulatorOptions.limits``): ``requested`` keeps each job's own
request as its limit; ``predicted`` sets the limit to the job's prediction when it starts
(as the COARE study proposes), so only walltime correction keeps an underestimated job
alive. The dispatcher's extension directives are applied as they come, and an extended
job's duration becomes its new limit. Killed jobs are not shown to the predictor.

Durations and learning follow the rules of :mod:`cpsched.runtime.durations`, the same
book the service keeps: a queued job is predicted when it is submitted and again when it
starts, an extended job is expected to run to its new limit, and a killed job's run time
is censored.
"""

from __future__ import annotations

import heapq
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from operator import itemgetter, mul, sub
from typing import Literal

import numpy as np

from cpsched.core import (
    Allocation,
    Decision,
    Dispatcher,
    Job,
    RunningJob,
    Snapshot,
    check_decision,
    check_snapshot,
)
from cpsched.core.capacity import shift
from cpsched.core.state import DispatcherState
from cpsched.errors import CpschedError
from cpsched.predictor.base import Predictor
from cpsched.replay.fairshare import FairShare
from cpsched.replay.results import DispatchStats, JobRecords, ReplayResult, TimeSeries
from cpsched.replay.swf import TraceJob
from cpsched.replay.system import System
from cpsched.runtime.cluster import Cluster
from cpsched.runtime.overrun import OverrunRule


class ReplayStalledError(CpschedError):
    """The machine is idle, nothing more will happen, and the dispatcher starts nothing."""


@dataclass(frozen=True, slots=True)
class SimulatorOptions:
    validate: bool = False
    """Check every snapshot and decision with the independent validator (slow)."""
    charge_decision_time: bool = False
    """Start jobs when the decision is ready (``t`` + measured wall time, rounded to
    whole seconds) and call the dispatcher no earlier than that again."""
    limits: Literal["requested", "predicted"] = "requested"
    """Each job's time limit at start: its request, or its prediction."""
    extension_lead: int | None = None
    """Call the dispatcher this many seconds before a job would be killed, so that it
    can extend the limit (the correction policy's lead); None: never for that reason."""
    site_priority: bool = False
    """Give queued jobs a site's fair-share priority (:mod:`.fairshare`) at each call,
    for a policy that follows the site's priority."""
    requeue_delay: int = 0
    """Seconds a job a trial put back waits before it may start again, as the workload
    manager holds it back (Slurm: about 120, a requeued job's eligible time; PBS: 0)."""


END, WAKE, REQUEUE, RETURN = 0, 1, 2, 3
"""Event kinds: a job ends (done or killed); a job nears a limit that would kill it; a
trial run ends with its job still running (its nodes are freed; it goes back to the
queue then, or once the requeue delay has passed: RETURN)."""

TRIAL_COUNTS = ("runs", "ended", "requeued", "requeued_cpu_s")
"""What the replay counts of trial runs: made, ended within the trial, put back in the
queue, and the cpu-seconds of those."""

Progress = Callable[[int], None]
"""Called with the number of jobs finished so far: at most every ``PROGRESS_EVERY_S``
wall seconds while jobs finish, and once at the end."""
PROGRESS_EVERY_S = 0.25
PROGRESS_CHECK_JOBS = 16
"""Finished jobs between two looks at the clock for the progress report."""


class Simulator:
    def __init__(
        self,
        system: System,
        trace: Sequence[TraceJob],
        dispatcher: Dispatcher,
        predictor: Predictor,
        options: SimulatorOptions = SimulatorOptions(),
        *,
        clock: Callable[[], float] = time.perf_counter,
        progress: Progress | None = None,
        overrun: OverrunRule = "one-second",
        state: DispatcherState | None = None,
    ) -> None:
        self.system = system
        self.trace = trace
        self.dispatcher = dispatcher
        self.options = options
        self.clock = clock
        self.progress = progress

        count = len(trace)
        self._index = {tj.job.id: i for i, tj in enumerate(trace)}
        self._start = np.full(count, -1, dtype=np.int64)
        self._end = np.full(count, -1, dtype=np.int64)
        self._killed = np.zeros(count, dtype=bool)
        self._predicted = np.zeros(count, dtype=np.int64)
        self._efficiency = np.zeros(count, dtype=np.float64)

        self._rows: list[tuple[int, ...]] = [node.capacity for node in system.nodes]
        self._capacity_total = tuple(sum(col) for col in zip(*self._rows, strict=True)) or tuple(
            0 for _ in system.resource_names
        )
        self._free_total = list(self._capacity_total)
        # Efficiency counts each type in units of the largest node's capacity of it.
        largest = [max(col) for col in zip(*self._rows, strict=True)] if self._rows else []
        self._scale = [(r, 1.0 / c) for r, c in enumerate(largest) if c > 0]
        self._running: dict[str, RunningJob] = {}
        self._fairshare = FairShare() if options.site_priority else None
        self._queue: dict[str, Job] = {}
        """The waiting jobs by id, in submission order (a start takes one out in O(1))."""
        self._queued_seen: tuple[Job, ...] | None = None
        self._running_seen: tuple[RunningJob, ...] | None = None
        self._free_seen: tuple[tuple[tuple[int, ...], ...], tuple[int, ...]] | None = None
        """The snapshot's queue, running jobs and free capacity, until they change."""
        self.cluster = Cluster(dispatcher, predictor, overrun=overrun, state=state)
        self.book = self.cluster.book
        # (time, kind, trace index, version): a job's events are stale once its limit
        # changes and its version moves on.
        self._events: list[tuple[int, int, int, int]] = []
        self._version = [0] * count
        self._extensions = 0
        names = system.resource_names
        self._cpu = names.index("cpu") if "cpu" in names else 0
        """The type whose seconds the trials put back are counted in."""
        self._trials: dict[str, int] | None = None
        """Trial runs made, ended within their trial, cpu-seconds requeued (None: none)."""

        self._times = array("q")
        self._queue_lengths = array("i")
        self._used = array("q")
        self._call_times = array("q")
        self._wall_ms = array("d")
        self._fallbacks = 0
        self._fallback_reasons: dict[str, int] = {}
        self._statuses: dict[str, int] = {}

    def run(self) -> ReplayResult:
        began = self.clock()
        result = self._run()
        result.dispatch.run_s = self.clock() - began
        return result

    def _run(self) -> ReplayResult:
        trace, events, version = self.trace, self._events, self._version
        submitted = 0
        not_before = 0
        finished = 0
        reported = self.clock()
        never = 1 << 62
        # A reservation's end frees its nodes for everyone: jobs kept off them may start
        # then, though no job starts or ends (the machine may even be idle meanwhile).
        site_wakes = sorted({r.end for r in self.system.rules.site.reservations}, reverse=True)
        while submitted < len(trace) or events or (self._queue and site_wakes):
            next_submit = trace[submitted].job.submit if submitted < len(trace) else never
            next_event = events[0][0] if events else never
            next_wake = site_wakes[-1] if site_wakes else never
            t = max(min(next_submit, next_event, next_wake), not_before)
            wake = False
            while site_wakes and site_wakes[-1] <= t:
                site_wakes.pop()
                wake = True
            while events and events[0][0] <= t:
                when, kind, index, seen = heapq.heappop(events)
                if seen != version[index]:
                    continue  # the job's limit changed since this was planned
                if kind == WAKE:
                    wake = True
                    continue
                if kind == REQUEUE:
                    self._requeue(index, when)
                    wake = True
                    continue
                if kind == RETURN:
                    self._return(index)
                    wake = True
                    continue
                self._finish(index, when)
                finished += 1
                if self.progress is not None and finished % PROGRESS_CHECK_JOBS == 0:
                    now = self.clock()
                    if now - reported >= PROGRESS_EVERY_S:
                        self.progress(finished)
                        reported = now
            while submitted < len(trace) and trace[submitted].job.submit <= t:
                job = trace[submitted].job
                self._queue[job.id] = job
                self._queued_seen = None
                if self._fairshare is not None:
                    self._fairshare.seen(job)
                self.book.queued(job, t)
                submitted += 1
            if self._queue or wake:
                not_before = self._dispatch(t)
                stalled = not self._running and submitted == len(trace) and not site_wakes
                if stalled and self._queue:
                    raise ReplayStalledError(
                        f"at t={t} the machine is idle and {len(self._queue)} jobs wait, but "
                        f"dispatcher {self.dispatcher.name!r} starts none of them"
                    )
            self._sample(t)
        if self.progress is not None:
            self.progress(finished)
        return self._result()

    def _snapshot(self, t: int) -> Snapshot:
        # The tuples are made again only after what they show has changed: an event that
        # only submits leaves the running jobs and the free capacity as they were.
        queued = self._queued_seen
        if queued is None:
            queued = self._queued_seen = tuple(self._queue.values())
        running = self._running_seen
        if running is None:
            running = self._running_seen = tuple(self._running.values())
        free = self._free_seen
        if free is None:
            free = self._free_seen = (tuple(self._rows), tuple(self._free_total))
        if self._fairshare is not None:
            rank = self._fairshare.priority
            queued = tuple(replace(job, priority=rank(job, t)) for job in queued)
        return Snapshot(
            time=t,
            resource_names=self.system.resource_names,
            nodes=self.system.nodes,
            running=running,
            queued=queued,
            free=free[0],
            free_total=free[1],
            capacity_total=self._capacity_total,
            site=self.system.rules.site,
        )

    def _dispatch(self, t: int) -> int:
        """Call the dispatcher at ``t``, apply its decision; the time it may next be called."""
        snapshot = self._snapshot(t)
        if self.options.validate:
            check_snapshot(snapshot)
        began = self.clock()
        decision = self.cluster.decide(snapshot)
        wall_s = self.clock() - began
        self._wall_ms.append(wall_s * 1000.0)
        if self.options.validate:
            check_decision(snapshot, decision)
        self._count(decision)
        delay = round(wall_s) if self.options.charge_decision_time else 0
        if decision.extensions:
            self._extend(decision)
        if decision.starts:
            self._apply(decision, t + delay)
        self._call_times.append(t)
        return t + delay

    def _sample(self, t: int) -> None:
        """Queue length and capacity in use from ``t`` until the next event."""
        self._times.append(t)
        self._queue_lengths.append(len(self._queue))
        self._used.extend(map(sub, self._capacity_total, self._free_total))

    def _count(self, decision: Decision) -> None:
        diagnostics = decision.diagnostics
        self._fallbacks += diagnostics.fallback
        if diagnostics.fallback:
            reason = diagnostics.fallback_reason or "unknown"
            self._fallback_reasons[reason] = self._fallback_reasons.get(reason, 0) + 1
        status = diagnostics.solver_status
        self._statuses[status] = self._statuses.get(status, 0) + 1

    def _apply(self, decision: Decision, start: int) -> None:
        queue = self._queue
        self._queued_seen = self._running_seen = self._free_seen = None
        starts = decision.starts
        if any(s.trial is not None for s in starts):
            for s in starts:
                if s.trial is not None:
                    self._try(queue.pop(s.job_id), s.allocation, s.trial, start)
            starts = tuple(s for s in starts if s.trial is None)
        started = [queue.pop(s.job_id) for s in starts]
        self.cluster.started(start, started)
        for s, job in zip(starts, started, strict=True):
            index = self._index[job.id]
            self._efficiency[index] = self._allocation_efficiency(job, s.allocation)
            shift(self._rows, self._free_total, s.allocation, job, -1, self.system.nodes)
            duration = self.book.started(job, start)
            limit = job.time_limit if self.options.limits == "requested" else duration
            running = RunningJob(job, start, limit, s.allocation)
            self._running[job.id] = running
            self._start[index] = start
            self._predicted[index] = duration
            self._plan_end(index, running)

    def _try(self, job: Job, allocation: Allocation, seconds: int, start: int) -> None:
        """``job`` runs a trial of ``seconds`` from ``start``: it ends within it, or goes
        back to the queue then (:meth:`_requeue`)."""
        trials = self._trials = self._trials or dict.fromkeys(TRIAL_COUNTS, 0)
        trials["runs"] += 1
        index = self._index[job.id]
        run = self.trace[index].run_time
        if run <= seconds:  # it has simply run: a start like any other, seen at its end
            self._start[index] = start
            # Its prediction at this start, as any start's (over HTTP: the service's).
            self._predicted[index] = self.book.start_prediction(job, start)
            self._efficiency[index] = self._allocation_efficiency(job, allocation)
        shift(self._rows, self._free_total, allocation, job, -1, self.system.nodes)
        self._running[job.id] = RunningJob(job, start, seconds, allocation, trial=True)
        self.book.trial_started(job, seconds)
        if run <= seconds:
            heapq.heappush(self._events, (start + run, END, index, self._version[index]))
        else:
            heapq.heappush(self._events, (start + seconds, REQUEUE, index, self._version[index]))

    def _requeue(self, index: int, t: int) -> None:
        """A trial ended with its job still running: its nodes are free, and the job waits
        again at its place, now or once the requeue delay has passed."""
        job = self.trace[index].job
        rj = self._running.pop(job.id)
        self._running_seen = self._free_seen = None
        shift(self._rows, self._free_total, rj.allocation, job, 1, self.system.nodes)
        assert self._trials is not None
        self._trials["requeued"] += 1
        self._trials["requeued_cpu_s"] += rj.time_limit * job.request[self._cpu]
        delay = self.options.requeue_delay
        if delay:
            heapq.heappush(self._events, (t + delay, RETURN, index, self._version[index]))
        else:
            self._return(index)

    def _return(self, index: int) -> None:
        """The job a trial put back waits again, at its place in submission order, as one
        that went back once (never tried again: a workload manager counts its restart)."""
        job = replace(self.trace[index].job, rerunnable=False)
        self._queued_seen = None
        self.book.requeued(job)
        queue = self._queue
        last = next(reversed(queue), None)
        queue[job.id] = job
        if last is None or self._index[last] < index:
            return  # submitted after every job waiting: its place is the end
        order = self._index.__getitem__
        self._queue = {job_id: queue[job_id] for job_id in sorted(queue, key=order)}

    def _allocation_efficiency(self, job: Job, allocation: Allocation) -> float:
        """Thesis eq. 2.7: what ``job`` takes over what its nodes had free just before,
        summed over every type (accelerators a job leaves idle on its nodes count)."""
        taken = sum(job.request[r] * scale for r, scale in self._scale)
        rows = self._rows
        if len(self._scale) == 1:  # one type: the same sum, in the same order, in C
            r, scale = self._scale[0]
            free_rows = map(rows.__getitem__, map(itemgetter(0), allocation))
            free = sum(map(mul, map(itemgetter(r), free_rows), repeat(scale)))
        else:
            free = sum(rows[node][r] * scale for node, _ in allocation for r, scale in self._scale)
        return taken / free if free > 0 else 1.0

    def _extend(self, decision: Decision) -> None:
        for extension in decision.extensions:
            running = self._running[extension.job_id]
            if extension.new_limit <= running.time_limit:
                continue  # never shorten: the validator reports it when asked
            running = replace(
                running, time_limit=extension.new_limit, extensions=running.extensions + 1
            )
            self._running[extension.job_id] = running
            self._running_seen = None
            self.book.extended(extension.job_id, extension.new_limit)
            index = self._index[extension.job_id]
            self._version[index] += 1
            self._plan_end(index, running)
            self._extensions += 1

    def _plan_end(self, index: int, running: RunningJob) -> None:
        """Queue the job's end: its trace end, or its kill at a limit a policy set lower
        than the request (and, with correction on, a wake-up before that kill)."""
        run, start, limit = self.trace[index].run_time, running.start, running.time_limit
        version = self._version[index]
        if limit >= running.job.time_limit or run <= limit:
            heapq.heappush(self._events, (start + run, END, index, version))
            return
        heapq.heappush(self._events, (start + limit, END, index, version))
        lead = self.options.extension_lead
        if lead is not None:
            wake = max(start, start + limit - max(lead, 1))
            heapq.heappush(self._events, (wake, WAKE, index, version))

    def _finish(self, index: int, end: int) -> None:
        tj = self.trace[index]
        rj = self._running.pop(tj.job.id)
        self._running_seen = self._free_seen = None
        shift(self._rows, self._free_total, rj.allocation, tj.job, 1, self.system.nodes)
        self._end[index] = end
        killed = end < rj.start + tj.run_time
        self._killed[index] = killed
        if rj.trial:  # a trial that ended within its time: the job has run
            assert self._trials is not None
            self._trials["ended"] += 1
            self.cluster.started(rj.start, [tj.job])
        self.book.finished(tj.job, rj.start, end, censored=killed)
        self.cluster.finished(tj.job.id, rj.start, end)
        if self._fairshare is not None:
            self._fairshare.charge(tj.job, rj.start, end)

    def _trials_made(self) -> dict[str, int] | None:
        """The trial runs' counts, with the requeue delay when there is one."""
        delay = self.options.requeue_delay
        if self._trials is None or not delay:
            return self._trials
        return {**self._trials, "requeue_delay_s": delay}

    def _result(self) -> ReplayResult:
        trace = self.trace
        resources = len(self.system.resource_names)
        used = np.frombuffer(self._used, dtype=np.int64) if self._used else np.zeros(0, np.int64)
        cpu = self.system.resource_names.index("cpu")
        jobs = JobRecords(
            job_id=np.array([tj.job.id for tj in trace], dtype=object),
            submit=np.array([tj.job.submit for tj in trace], dtype=np.int64),
            start=self._start,
            end=self._end,
            trace_run=np.array([tj.run_time for tj in trace], dtype=np.int64),
            requested=np.array([tj.job.time_limit for tj in trace], dtype=np.int64),
            procs=np.array([tj.job.request[cpu] for tj in trace], dtype=np.int64),
            killed=self._killed,
            predicted=self._predicted,
            efficiency=self._efficiency,
        )
        series = TimeSeries(
            time=np.frombuffer(self._times, dtype=np.int64).copy(),
            queue_length=np.frombuffer(self._queue_lengths, dtype=np.int32).copy(),
            used=used.reshape(-1, resources).copy(),
            resource_names=self.system.resource_names,
            capacity=self._capacity_total,
        )
        dispatch = DispatchStats(
            time=np.frombuffer(self._call_times, dtype=np.int64).copy(),
            wall_ms=np.frombuffer(self._wall_ms, dtype=np.float64).copy(),
            fallbacks=self._fallbacks,
            fallback_reasons=dict(sorted(self._fallback_reasons.items())),
            extensions=self._extensions,
            trials=self._trials_made(),
            solver_status=dict(sorted(self._statuses.items())),
        )
        return ReplayResult(jobs=jobs, series=series, dispatch=dispatch, settings={})
