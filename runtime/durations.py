"""What a cluster's dispatcher plans with, and what its predictor learns.

The rules that make a replay's results hold for the service live here, once; the replay's
simulator and the service's cluster runtime both keep their durations in a
:class:`DurationBook`:

* a queued job is predicted when it is first seen and keeps that prediction while it waits
  (in the service, a job the time left for predicting did not reach, in a burst of new
  jobs, is planned with its request until a later call predicts it: :meth:`DurationBook.sync`);
* a job is predicted again when it starts (the predictor may have learnt since) and keeps
  that prediction while it runs; a predictor with an upper estimate beside its central one
  (:class:`~cpsched.predictor.base.Bounding`) gives its upper estimate there: the plan orders
  the queue by the central estimates and rests on the running jobs' upper ones;
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal, NamedTuple, TypeGuard

from cpsched.core import Job, RunningJob, Snapshot
from cpsched.predictor.base import Bounding, Explaining, FinishedJob, Predictor
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
    basis: str | None = None
    """What the prediction rests on, in words (the predictor's ``basis``), if it says."""


class RunningChanges(NamedTuple):
    """How a snapshot's running jobs differ from those of the snapshot ``since``: the
    jobs new or changed (in the snapshot's order) and the ids of those gone or changed
    (the service's codec knows both: :func:`~cpsched.runtime.codec.to_snapshot`)."""

    since: Snapshot
    added: Sequence[RunningJob]
    gone: AbstractSet[str]


class DurationBook:
    """The durations of one cluster's queued and running jobs, and its predictor's lessons."""

    def __init__(self, predictor: Predictor, overrun: OverrunRule = "one-second") -> None:
        self.predictor = predictor
        self._basis = predictor.basis if isinstance(predictor, Explaining) else None
        self._bounding = predictor if isinstance(predictor, Bounding) else None
        """The predictor, where it has an upper estimate: running jobs are planned with it."""
        self._start_basis = (
            self._bounding.upper_basis if self._bounding is not None else self._basis
        )
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
        """Running jobs' predicted ends, as a heap: who may have outlived a prediction
        (entries whose job ended or was predicted again since are skipped)."""
        self._synced: Snapshot | None = None
        """The snapshot of the last :meth:`sync` (None: the book follows events)."""
        self._running_jobs: dict[str, RunningJob] = {}
        """That snapshot's running jobs, by id (kept by :meth:`sync` only)."""
        self._touched: set[str] = set()
        """Jobs an event or :meth:`correct` changed since that snapshot's sync: the next
        sync works them out again (kept only between syncs)."""
        self._deferred: set[str] = set()
        """Queued jobs the last :meth:`sync` had no time to predict: planned with their
        requests, and predicted first by a later sync."""

    # -- events, as a simulator sees them ------------------------------------------------

    def queued(self, job: Job, t: int) -> int:
        """``job`` is seen waiting for the first time, at ``t``: its prediction."""
        duration = self.predictor.predict(job, t)
        self._queued[job.id] = duration
        self.durations[job.id] = duration
        self._touch(job.id)
        return duration

    def basis(self, job: Job, t: int) -> str | None:
        """What the predictor's answer for ``job`` at ``t`` rests on, if it can say."""
        return self._basis(job, t) if self._basis is not None else None

    def start_basis(self, job: Job, t: int) -> str | None:
        """What :meth:`start_prediction` of ``job`` at ``t`` rests on, if it can say."""
        return self._start_basis(job, t) if self._start_basis is not None else None

    def start_prediction(self, job: Job, t: int) -> int:
        """What ``job`` would be predicted to take if it started at ``t`` (no change):
        the predictor's upper estimate where it has one, else its prediction."""
        if self._bounding is not None:
            return self._bounding.upper(job, t)
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
        self._touch(job.id)
        return duration

    def trial_started(self, job: Job, seconds: int) -> None:
        """``job`` runs a trial of ``seconds`` (:mod:`cpsched.core.trial_runs`): planned to
        end with it; it keeps the prediction it had queued, for when it comes back."""
        self.durations[job.id] = seconds
        self._touch(job.id)

    def requeued(self, job: Job) -> None:
        """``job``'s trial ended with the job still running: it waits again, predicted as
        before (it is known to run longer than its trial, which that prediction was)."""
        self.durations[job.id] = self._queued[job.id]
        self._touch(job.id)

    def extended(self, job_id: str, new_limit: int) -> None:
        """A running job's limit was raised to ``new_limit``: it may now run that long."""
        duration = max(self.durations[job_id], new_limit)
        self.durations[job_id] = duration
        start, _ = self._running[job_id]
        self._running[job_id] = (start, new_limit)
        if self.overrun != "one-second":
            heapq.heappush(self._due, (start + duration, job_id))
        self._touch(job_id)

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
            if duration != durations[job_id]:
                self._touch(job_id)  # the next sync judges it again from its prediction
            durations[job_id] = duration
            if start + duration > t:  # else past its limit: overdue for good
                heapq.heappush(due, (start + duration, job_id))

    def finished(self, job: Job, start: int, end: int, *, censored: bool) -> None:
        """``job`` ended at ``end``; the predictor learns it unless ``censored``."""
        self.durations.pop(job.id, None)
        self._queued.pop(job.id, None)
        self._started.pop(job.id, None)
        self._running.pop(job.id, None)
        self._touch(job.id)
        self.learn(job, start, end, censored=censored)

    def learn(self, job: Job, start: int, end: int, *, censored: bool) -> None:
        """Teach the predictor a finished job (callers go in end order)."""
        if not censored:
            self.predictor.observe(FinishedJob(job, start, end))

    # -- snapshots, as the service sees them --------------------------------------------

    def start_of(self, job_id: str) -> int | None:
        """The prediction a running job got when it started, if this book saw it start."""
        return self._started.get(job_id)

    def sync(
        self,
        snapshot: Snapshot,
        stored_starts: Mapping[str, int],
        changes: RunningChanges | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> list[Prediction]:
        """Bring the book up to ``snapshot``: predict the jobs seen for the first time,
        raise extended jobs to their limits, forget the jobs that are gone. Returns the
        predictions made.

        ``stop``: when the time for predicting queued jobs is up (the service's share of
        its deadline; a replay gives none). The new queued jobs not predicted by then are
        planned with their requests (:attr:`deferred` counts them) and predicted, first,
        by the next sync: a burst of thousands of new jobs costs a learned predictor
        seconds, and a late answer is no answer. Running jobs are always predicted (few
        start per call).

        ``stored_starts`` are start predictions kept elsewhere (a database) for running
        jobs this book has not seen start: the process restarted, or the job started
        outside cpsched. ``changes``: how the running jobs differ from those of the
        snapshot the book was last brought up to, when the caller knows: then only those
        and the jobs changed since by events are worked out again (on a busy machine of
        tens of thousands of running jobs, a few change per call), to the same book.
        """
        # Taken at once: a dispatch abandoned at its deadline may still be correcting
        # (and touching) jobs in its thread; what it touches from now on goes to the next.
        touched, self._touched = self._touched, set()
        if self._follows(changes):
            made = self._sync_running_changes(snapshot, stored_starts, changes, touched)
        else:
            made = self._sync_running(snapshot, stored_starts)
        self._sync_queued(snapshot, made, stop)
        self._synced = snapshot
        return made

    @property
    def deferred(self) -> int:
        """Queued jobs the last :meth:`sync` planned with their requests, not predicted."""
        return len(self._deferred)

    def without_start_prediction(
        self, snapshot: Snapshot, changes: RunningChanges | None = None
    ) -> list[str]:
        """The running jobs :meth:`sync` would predict at their start, not having seen them
        start: the ids whose stored start predictions (if any) it should be given."""
        if self._follows(changes):
            added = [rj.job.id for rj in changes.added]
            touched = (self._touched & self._running_jobs.keys()) - set(added)
            return [job_id for job_id in (*added, *touched) if job_id not in self._started]
        return [rj.job.id for rj in snapshot.running if rj.job.id not in self._started]

    def _base_duration(self, rj: RunningJob, prediction: int) -> int:
        """What a running job is expected to take before :meth:`correct` judges it: its
        prediction at start, its limit once extended (EASY++), or a trial's end."""
        if rj.trial:
            return rj.time_limit
        return max(prediction, rj.time_limit) if rj.extensions else prediction

    def _sync_running(
        self, snapshot: Snapshot, stored_starts: Mapping[str, int]
    ) -> list[Prediction]:
        """The running part of :meth:`sync`, worked out from every running job."""
        durations: dict[str, int] = {}
        started: dict[str, int] = {}
        running: dict[str, tuple[int, int]] = {}
        made = self._enter_running(
            snapshot.running,
            snapshot.time,
            stored_starts,
            self._started,
            started,
            durations,
            running,
        )
        self._started, self.durations, self._running = started, durations, running
        self._running_jobs = {rj.job.id: rj for rj in snapshot.running}
        self._due = []
        if self.overrun != "one-second":
            self._due = [
                (start + durations[job_id], job_id) for job_id, (start, _) in running.items()
            ]
            heapq.heapify(self._due)
        return made

    def _sync_running_changes(
        self,
        snapshot: Snapshot,
        stored_starts: Mapping[str, int],
        changes: RunningChanges,
        touched: AbstractSet[str],
    ) -> list[Prediction]:
        """The running part of :meth:`sync` from ``changes`` and the jobs touched since the
        last sync: the book :meth:`_sync_running` would make. The maps are copied, not
        changed in place, so that a dispatch abandoned at its deadline and still reading
        the previous ones sees them unchanged."""
        jobs = dict(self._running_jobs)
        started, durations, running = dict(self._started), dict(self.durations), dict(self._running)
        due = list(self._due) if self.overrun != "one-second" else []
        for job_id in changes.gone:
            del jobs[job_id]
        added = {rj.job.id for rj in changes.added}
        for job_id in (changes.gone | touched) - added:
            if job_id not in jobs:  # gone, or an event's job that never ran here
                started.pop(job_id, None)
                durations.pop(job_id, None)
                running.pop(job_id, None)
        again = [jobs[job_id] for job_id in touched if job_id in jobs and job_id not in added]
        entered = (*changes.added, *again)
        made = self._enter_running(
            entered, snapshot.time, stored_starts, started, started, durations, running
        )
        for rj in entered:
            jobs[rj.job.id] = rj
            if self.overrun != "one-second":
                heapq.heappush(due, (rj.start + durations[rj.job.id], rj.job.id))
        if len(due) > 2 * len(running) + 1024:
            # Entries of jobs gone or predicted again wait until their time passes: drop them.
            due = [(start + durations[job_id], job_id) for job_id, (start, _) in running.items()]
            heapq.heapify(due)
        self._running_jobs, self._started, self.durations, self._running = (
            jobs,
            started,
            durations,
            running,
        )
        self._due = due
        return made

    def _enter_running(
        self,
        jobs: Iterable[RunningJob],
        t: int,
        stored_starts: Mapping[str, int],
        known: Mapping[str, int],
        started: dict[str, int],
        durations: dict[str, int],
        running: dict[str, tuple[int, int]],
    ) -> list[Prediction]:
        """Put running ``jobs`` into the maps: each with the prediction ``known`` holds
        for its start, else the stored one, else one made now (returned, to store)."""
        made: list[Prediction] = []
        for rj in jobs:
            job_id = rj.job.id
            d = known.get(job_id)
            if d is None:
                d = stored_starts.get(job_id)
                if d is None:
                    d = self.start_prediction(rj.job, rj.start)
                    basis = self.start_basis(rj.job, rj.start)
                    made.append(Prediction(job_id, "start", d, t, basis))
            started[job_id] = d
            durations[job_id] = self._base_duration(rj, d)
            running[job_id] = (rj.start, rj.time_limit)
        return made

    def _sync_queued(
        self, snapshot: Snapshot, made: list[Prediction], stop: Callable[[], bool] | None
    ) -> None:
        """The queued part of :meth:`sync`: each queued job keeps the prediction it got when
        first seen (those deferred before are predicted first); the jobs no longer queued
        (started, gone) leave the book's durations unless they run."""
        t = snapshot.time
        durations = self.durations
        queued: dict[str, int] = {}
        deferred: set[str] = set()
        jobs: Iterable[Job] = snapshot.queued
        if self._deferred:
            late = [job for job in snapshot.queued if job.id in self._deferred]
            jobs = (*late, *(job for job in snapshot.queued if job.id not in self._deferred))
        for job in jobs:
            d = self._queued.get(job.id)
            if d is None:
                if stop is not None and stop():
                    deferred.add(job.id)
                    durations[job.id] = job.time_limit
                    continue
                d = self.predictor.predict(job, t)
                made.append(Prediction(job.id, "queued", d, t, self.basis(job, t)))
            queued[job.id] = d
            durations[job.id] = d
        for job_id in (self._queued.keys() | self._deferred) - queued.keys() - deferred:
            if job_id not in self._running:
                durations.pop(job_id, None)
            elif (trial := self._running_jobs.get(job_id)) is not None and trial.trial:
                # Running a trial: it may come back, with the prediction it had queued.
                queued[job_id] = self._queued[job_id]
        self._queued = queued
        self._deferred = deferred

    def _follows(self, changes: RunningChanges | None) -> TypeGuard[RunningChanges]:
        """Whether ``changes`` start from the snapshot this book was last synced to."""
        return changes is not None and self._synced is not None and changes.since is self._synced

    def _touch(self, job_id: str) -> None:
        if self._synced is not None:
            self._touched.add(job_id)
