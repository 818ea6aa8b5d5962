"""What a cluster's dispatcher plans with, and what its predictor learns.

The rules that make a replay's results hold for the service live here, once; the replay's
simulator and the service's cluster runtime both keep their durations in a
:class:`DurationBook`:

* a queued job is predicted when it is first seen and keeps that prediction while it waits;
* a job is predicted again when it starts (the predictor may have learnt since) and keeps
  that prediction while it runs;
* once its limit has been extended, it is expected to run to the new limit (EASY++): plans
  stop assuming that it ends any second;
* a running job that outlives its prediction gets a new one by the policy's overrun rule
  (:mod:`cpsched.runtime.overrun`), never past its limit, when the cluster next decides
  (:meth:`~DurationBook.correct`);
* the predictor learns from every job that ended on its own; a job killed at its limit
  (or lost with its node) is censored: its run time is not its real one, and learning it
  would teach the predictor to kill the user's next job sooner.

The simulator reports events as they happen (:meth:`~DurationBook.queued`,
:meth:`~DurationBook.started`, :meth:`~DurationBook.extended`,
:meth:`~DurationBook.finished`); the service sees a workload manager's snapshots and
brings the book up to each one with :meth:`~DurationBook.sync`.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cpsched.core import Job, Snapshot
from cpsched.predictor.base import FinishedJob, Predictor
from cpsched.runtime.overrun import OverrunRule, overrun_duration

CENSORED_STATES = frozenset({"timeout", "node_fail"})
"""End states whose run time is not the job's real one: the predictor must not learn them."""


@dataclass(frozen=True, slots=True)
class Prediction:
    """One prediction made, for the record (the service stores them)."""

    job_id: str
    kind: Literal["queued", "start"]
    value: int
    time: int


class DurationBook:
    """The durations of one cluster's queued and running jobs, and its predictor's lessons."""

    def __init__(self, predictor: Predictor, overrun: OverrunRule = "one-second") -> None:
        self.predictor = predictor
        self.overrun: OverrunRule = overrun
        self.durations: dict[str, int] = {}
        """``d_i`` of every queued and running job, by id: what the dispatcher plans with."""
        self._queued: dict[str, int] = {}
        """The prediction each waiting job got when it was first seen."""
        self._started: dict[str, int] = {}
        """The prediction each running job got when it started."""
        self._running: dict[str, tuple[int, int]] = {}
        """Each running job's start and current limit."""
        self._due: list[tuple[int, str]] = []
        """Running jobs' predicted ends, as a heap: who may have outlived a prediction."""

    # -- events, as a simulator sees them ------------------------------------------------

    def queued(self, job: Job, t: int) -> int:
        """``job`` is seen waiting for the first time, at ``t``: its prediction."""
        duration = self.predictor.predict(job, t)
        self._queued[job.id] = duration
        self.durations[job.id] = duration
        return duration

    def start_prediction(self, job: Job, t: int) -> int:
        """What ``job`` would be predicted to take if it started at ``t`` (no change)."""
        return self.predictor.predict(job, t)

    def started(self, job: Job, t: int, duration: int | None = None) -> int:
        """``job`` started at ``t``: predicted again, unless ``duration`` was just
        predicted with :meth:`start_prediction`."""
        if duration is None:
            duration = self.start_prediction(job, t)
        self._queued.pop(job.id, None)
        self._started[job.id] = duration
        self.durations[job.id] = duration
        self._running[job.id] = (t, job.time_limit)
        if self.overrun != "one-second":
            heapq.heappush(self._due, (t + duration, job.id))
        return duration

    def extended(self, job_id: str, new_limit: int) -> None:
        """A running job's limit was raised to ``new_limit``: it may now run that long."""
        duration = max(self.durations[job_id], new_limit)
        self.durations[job_id] = duration
        start, _ = self._running[job_id]
        self._running[job_id] = (start, new_limit)
        if self.overrun != "one-second":
            heapq.heappush(self._due, (start + duration, job_id))

    def correct(self, t: int) -> None:
        """Give every running job that has outlived its prediction by ``t`` a new one,
        by the overrun rule (a cluster calls this before each decision)."""
        due, running, durations = self._due, self._running, self.durations
        while due and due[0][0] <= t:
            end, job_id = heapq.heappop(due)
            run = running.get(job_id)
            if run is None or run[0] + durations[job_id] != end:
                continue  # ended, or predicted again since
            start, limit = run
            duration = overrun_duration(self.overrun, durations[job_id], t - start, limit)
            durations[job_id] = duration
            if start + duration > t:  # else past its limit: overdue for good
                heapq.heappush(due, (start + duration, job_id))

    def finished(self, job: Job, start: int, end: int, *, censored: bool) -> None:
        """``job`` ended at ``end``; the predictor learns it unless ``censored``."""
        self.durations.pop(job.id, None)
        self._queued.pop(job.id, None)
        self._started.pop(job.id, None)
        self._running.pop(job.id, None)
        self.learn(job, start, end, censored=censored)

    def learn(self, job: Job, start: int, end: int, *, censored: bool) -> None:
        """Teach the predictor a finished job (callers go in end order)."""
        if not censored:
            self.predictor.observe(FinishedJob(job, start, end))

    # -- snapshots, as the service sees them --------------------------------------------

    def is_started(self, job_id: str) -> bool:
        return job_id in self._started

    def start_of(self, job_id: str) -> int | None:
        """The prediction a running job got when it started, if this book saw it start."""
        return self._started.get(job_id)

    def sync(self, snapshot: Snapshot, stored_starts: Mapping[str, int]) -> list[Prediction]:
        """Bring the book up to ``snapshot``: predict the jobs seen for the first time,
        raise extended jobs to their limits, forget the jobs that are gone. Returns the
        predictions made.

        ``stored_starts`` are start predictions kept elsewhere (a database) for running
        jobs this book has not seen start: the process restarted, or the job started
        outside cpsched.
        """
        t = snapshot.time
        made: list[Prediction] = []
        durations: dict[str, int] = {}
        started: dict[str, int] = {}
        running: dict[str, tuple[int, int]] = {}
        for rj in snapshot.running:
            job_id = rj.job.id
            d = self._started.get(job_id)
            if d is None:
                d = stored_starts.get(job_id)
                if d is None:
                    d = self.predictor.predict(rj.job, rj.start)
                    made.append(Prediction(job_id, "start", d, t))
            started[job_id] = d
            durations[job_id] = max(d, rj.time_limit) if rj.extensions else d
            running[job_id] = (rj.start, rj.time_limit)
        queued: dict[str, int] = {}
        for job in snapshot.queued:
            d = self._queued.get(job.id)
            if d is None:
                d = self.predictor.predict(job, t)
                made.append(Prediction(job.id, "queued", d, t))
            queued[job.id] = d
            durations[job.id] = d
        self._started, self._queued, self.durations = started, queued, durations
        self._running = running
        self._due = []
        if self.overrun != "one-second":
            self._due = [
                (start + durations[job_id], job_id) for job_id, (start, _) in running.items()
            ]
            heapq.heapify(self._due)
        return made
