"""What a cluster's dispatcher plans with, and what its predictor learns.

The rules that make a replay's results hold for the service live here, once; the replay's
simulator and the service's cluster runtime both keep their durations in a
:class:`DurationBook`:

* a queued job is predicted when it is first seen and keeps that prediction while it waits;
* a job is predicted again when it starts (the predictor may have learnt since) and keeps
  that prediction while it runs;
* once its limit has been extended, it is expected to run to the new limit (EASY++): plans
  stop assuming that it ends any second;
* the predictor learns from every job that ended on its own; a job killed at its limit
  (or lost with its node) is censored: its run time is not its real one, and learning it
  would teach the predictor to kill the user's next job sooner.

The simulator reports events as they happen (:meth:`~DurationBook.queued`,
:meth:`~DurationBook.started`, :meth:`~DurationBook.extended`,
:meth:`~DurationBook.finished`); the service sees a workload manager's snapshots and
brings the book up to each one with :meth:`~DurationBook.sync`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cpsched.core import Job, Snapshot
from cpsched.predictor.base import FinishedJob, Predictor

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

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor
        self.durations: dict[str, int] = {}
        """``d_i`` of every queued and running job, by id: what the dispatcher plans with."""
        self._queued: dict[str, int] = {}
        """The prediction each waiting job got when it was first seen."""
        self._started: dict[str, int] = {}
        """The prediction each running job got when it started."""

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
        return duration

    def extended(self, job_id: str, new_limit: int) -> None:
        """A running job's limit was raised to ``new_limit``: it may now run that long."""
        self.durations[job_id] = max(self.durations[job_id], new_limit)

    def finished(self, job: Job, start: int, end: int, *, censored: bool) -> None:
        """``job`` ended at ``end``; the predictor learns it unless ``censored``."""
        self.durations.pop(job.id, None)
        self._queued.pop(job.id, None)
        self._started.pop(job.id, None)
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
        queued: dict[str, int] = {}
        for job in snapshot.queued:
            d = self._queued.get(job.id)
            if d is None:
                d = self.predictor.predict(job, t)
                made.append(Prediction(job.id, "queued", d, t))
            queued[job.id] = d
            durations[job.id] = d
        self._started, self._queued, self.durations = started, queued, durations
        return made
