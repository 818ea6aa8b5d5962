"""Discrete-event replay of a trace through the dispatch core.

At each event time the simulator first releases the jobs that finished, then enqueues
every job submitted at or before that time, then calls the dispatcher once (only when
jobs are waiting: with an empty queue there is nothing to decide). Jobs run their trace
run time. A job is killed at its time limit only when a policy has set that limit below
the trace's request: the original request never kills, because the trace says the job
ran to its recorded end.

Predictions: a queued job's duration is predicted when it is submitted, and predicted
again when it starts (the predictor may have learnt since); a running job keeps the
prediction it started with.
"""

from __future__ import annotations

import heapq
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cpsched.errors import CpschedError
from predictor.base import FinishedJob, Predictor
from replay.results import DispatchStats, JobRecords, ReplayResult, TimeSeries
from replay.swf import TraceJob
from replay.system import System
from service.dispatch import (
    Decision,
    Dispatcher,
    Job,
    RunningJob,
    Snapshot,
    check_decision,
    check_snapshot,
)
from service.dispatch.capacity import shift


class ReplayStalledError(CpschedError):
    """The machine is idle, nothing more will happen, and the dispatcher starts nothing."""


@dataclass(frozen=True, slots=True)
class SimulatorOptions:
    validate: bool = False
    """Check every snapshot and decision with the independent validator (slow)."""
    charge_decision_time: bool = False
    """Start jobs when the decision is ready (``t`` + measured wall time, rounded to
    whole seconds) and call the dispatcher no earlier than that again."""


Progress = Callable[[int], None]
"""Called with the number of jobs finished so far, every few thousand finishes."""


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
    ) -> None:
        self.system = system
        self.trace = trace
        self.dispatcher = dispatcher
        self.predictor = predictor
        self.options = options
        self.clock = clock
        self.progress = progress

        count = len(trace)
        self._index = {tj.job.id: i for i, tj in enumerate(trace)}
        self._start = np.full(count, -1, dtype=np.int64)
        self._end = np.full(count, -1, dtype=np.int64)
        self._killed = np.zeros(count, dtype=bool)
        self._predicted = np.zeros(count, dtype=np.int64)

        self._rows: list[tuple[int, ...]] = [node.capacity for node in system.nodes]
        self._capacity_total = tuple(sum(col) for col in zip(*self._rows, strict=True)) or tuple(
            0 for _ in system.resource_names
        )
        self._free_total = list(self._capacity_total)
        self._running: dict[str, RunningJob] = {}
        self._queue: list[Job] = []
        self._durations: dict[str, int] = {}
        self._finishes: list[tuple[int, int]] = []  # (end, trace index), a heap

        self._times = array("q")
        self._queue_lengths = array("i")
        self._used = array("q")
        self._call_times = array("q")
        self._wall_ms = array("d")
        self._fallbacks = 0
        self._statuses: dict[str, int] = {}

    def run(self) -> ReplayResult:
        trace, finishes = self.trace, self._finishes
        submitted = 0
        not_before = 0
        finished = 0
        never = 1 << 62
        while submitted < len(trace) or finishes:
            next_submit = trace[submitted].job.submit if submitted < len(trace) else never
            next_finish = finishes[0][0] if finishes else never
            t = max(min(next_submit, next_finish), not_before)
            while finishes and finishes[0][0] <= t:
                self._finish(heapq.heappop(finishes)[1])
                finished += 1
                if self.progress is not None and finished % 4096 == 0:
                    self.progress(finished)
            while submitted < len(trace) and trace[submitted].job.submit <= t:
                job = trace[submitted].job
                self._queue.append(job)
                self._durations[job.id] = self.predictor.predict(job, t)
                submitted += 1
            if self._queue:
                not_before = self._dispatch(t)
                if not finishes and submitted == len(trace) and self._queue:
                    raise ReplayStalledError(
                        f"at t={t} the machine is idle and {len(self._queue)} jobs wait, but "
                        f"dispatcher {self.dispatcher.name!r} starts none of them"
                    )
            self._sample(t)
        if self.progress is not None:
            self.progress(finished)
        return self._result()

    def _snapshot(self, t: int) -> Snapshot:
        return Snapshot(
            time=t,
            resource_names=self.system.resource_names,
            nodes=self.system.nodes,
            running=tuple(self._running.values()),
            queued=tuple(self._queue),
            free=tuple(self._rows),
            free_total=tuple(self._free_total),
            capacity_total=self._capacity_total,
        )

    def _dispatch(self, t: int) -> int:
        """Call the dispatcher at ``t``, apply its decision; the time it may next be called."""
        snapshot = self._snapshot(t)
        if self.options.validate:
            check_snapshot(snapshot)
        began = self.clock()
        decision = self.dispatcher.decide(snapshot, self._durations)
        wall_s = self.clock() - began
        self._wall_ms.append(wall_s * 1000.0)
        if self.options.validate:
            check_decision(snapshot, decision)
        self._count(decision)
        delay = round(wall_s) if self.options.charge_decision_time else 0
        if decision.starts:
            self._apply(decision, t + delay)
        self._call_times.append(t)
        return t + delay

    def _sample(self, t: int) -> None:
        """Queue length and capacity in use from ``t`` until the next event."""
        self._times.append(t)
        self._queue_lengths.append(len(self._queue))
        self._used.extend(
            c - f for c, f in zip(self._capacity_total, self._free_total, strict=True)
        )

    def _count(self, decision: Decision) -> None:
        diagnostics = decision.diagnostics
        self._fallbacks += diagnostics.fallback
        status = diagnostics.solver_status
        self._statuses[status] = self._statuses.get(status, 0) + 1

    def _apply(self, decision: Decision, start: int) -> None:
        started = {s.job_id for s in decision.starts}
        by_id = {job.id: job for job in self._queue if job.id in started}
        self._queue = [job for job in self._queue if job.id not in started]
        for s in decision.starts:
            job = by_id[s.job_id]
            shift(self._rows, self._free_total, s.allocation, job, -1)
            duration = self.predictor.predict(job, start)
            self._durations[job.id] = duration
            self._running[job.id] = RunningJob(job, start, job.time_limit, s.allocation)
            index = self._index[job.id]
            self._start[index] = start
            self._predicted[index] = duration
            heapq.heappush(self._finishes, (start + self.trace[index].run_time, index))

    def _finish(self, index: int) -> None:
        tj = self.trace[index]
        rj = self._running.pop(tj.job.id)
        del self._durations[tj.job.id]
        shift(self._rows, self._free_total, rj.allocation, tj.job, 1)
        end = rj.start + tj.run_time
        self._end[index] = end
        self.predictor.observe(FinishedJob(tj.job, rj.start, end))

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
            solver_status=dict(sorted(self._statuses.items())),
        )
        return ReplayResult(jobs=jobs, series=series, dispatch=dispatch, settings={})
