"""One cluster's live state in the service: its predictor, dispatchers and predictions.

Durations follow the replay's rules exactly, so that a replay over HTTP gives the same
decisions as one in process: a queued job keeps the prediction made when it was first
seen; a started job is predicted again at its start and keeps that prediction while it
runs, raised to its limit once the limit has been extended.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from cpsched.core import Decision, Dispatcher, Job, Snapshot
from cpsched.predictor.base import FinishedJob, Predictor
from cpsched.runtime.policy import Policy
from cpsched.service.convert import core_job
from cpsched.service.store.history import Prediction
from cpsched.wire.schemas import FinishedJobIn

log = logging.getLogger(__name__)

CENSORED_STATES = frozenset({"timeout", "node_fail"})
"""End states whose run time is not the job's real one: predictors must not learn them."""

ANSWER_MARGIN = 1.25
"""The service answers within this many times the policy's deadline: the dispatcher gets
the deadline itself, as in a replay, and parsing, predicting and the audit row the rest."""


def build_predictor(policy: Policy) -> Predictor:
    # Retraining must never block a dispatch: AdaBoost fits in the background and predicts
    # with the previous model (or last-two) meanwhile.
    return policy.make_predictor(background=True)


def build_dispatchers(policy: Policy) -> tuple[Dispatcher, Dispatcher]:
    """The configured dispatcher and the heuristic answering when it cannot in time."""
    return policy.make_dispatcher(plan=True), policy.make_fallback()


def finished_core_job(wire: FinishedJobIn, names: tuple[str, ...]) -> Job:
    """The core job of a finished one; types the cluster's nodes lack are kept at the end
    (a finished job is history, never rejected)."""
    names = (*names, *(name for name in wire.per_unit if name not in names))
    return core_job(wire, tuple(wire.per_unit.get(name, 0) for name in names))


@dataclass(frozen=True, slots=True)
class PredictedDurations:
    durations: dict[str, int]
    new: list[Prediction]
    """Predictions made by this call (to be stored)."""


class ClusterRuntime:
    def __init__(self, name: str, cluster_id: int, policy: Policy) -> None:
        self.name = name
        self.cluster_id = cluster_id
        self.policy = policy
        self.predictor = build_predictor(policy)
        self.dispatcher, self.fallback = build_dispatchers(policy)
        self.lock = threading.Lock()
        """Serialises this cluster's dispatches and predictor updates."""
        self.resource_names: tuple[str, ...] = ("cpu", "mem")
        self.queued_predictions: dict[str, int] = {}
        self.start_predictions: dict[str, int] = {}
        self.last_snapshot: Snapshot | None = None
        self.last_decision: Decision | None = None
        self.last_rejected: dict[str, str] = {}
        self.observed = 0

    def catch_up(self) -> None:
        """Let a background-trained predictor start a retrain that came due meanwhile."""
        retrain = getattr(self.predictor, "retrain_if_owed", None)
        if retrain is not None:
            retrain()

    def durations(self, snapshot: Snapshot, stored_starts: dict[str, int]) -> PredictedDurations:
        """Durations of every queued and running job, predicting those seen first now.

        ``stored_starts`` are start predictions kept in the database, for running jobs
        this process has not seen start (it restarted, or the job started elsewhere).
        """
        t = snapshot.time
        name = self.predictor.name
        durations: dict[str, int] = {}
        new: list[Prediction] = []
        starts = self.start_predictions
        for rj in snapshot.running:
            job_id = rj.job.id
            d = starts.get(job_id)
            if d is None:
                d = stored_starts.get(job_id)
                if d is None:
                    d = self.predictor.predict(rj.job, rj.start)
                    new.append(Prediction(job_id, "start", name, d, t))
                starts[job_id] = d
            durations[job_id] = max(d, rj.time_limit) if rj.extensions else d
        queued = self.queued_predictions
        for job in snapshot.queued:
            d = queued.get(job.id)
            if d is None:
                d = self.predictor.predict(job, t)
                queued[job.id] = d
                new.append(Prediction(job.id, "queued", name, d, t))
            durations[job.id] = d
        return PredictedDurations(durations, new)

    def predict_starts(self, snapshot: Snapshot, decision: Decision) -> dict[str, int]:
        by_id = {job.id: job for job in snapshot.queued}
        return {
            s.job_id: self.predictor.predict(by_id[s.job_id], snapshot.time)
            for s in decision.starts
        }

    def applied(self, snapshot: Snapshot, decision: Decision, predicted: dict[str, int]) -> None:
        """Remember what this decision started; forget jobs no longer in the snapshot."""
        self.start_predictions.update(predicted)
        alive = {rj.job.id for rj in snapshot.running} | predicted.keys()
        self.start_predictions = {k: v for k, v in self.start_predictions.items() if k in alive}
        waiting = {job.id for job in snapshot.queued} - predicted.keys()
        self.queued_predictions = {k: v for k, v in self.queued_predictions.items() if k in waiting}
        self.last_snapshot = snapshot
        self.last_decision = decision

    def observe(self, jobs: Iterable[FinishedJobIn]) -> None:
        """Teach the predictor jobs that finished (in end order; censored ones skipped)."""
        for wire in sorted(jobs, key=lambda j: (j.end, j.start)):
            if wire.state in CENSORED_STATES:
                continue
            self.predictor.observe(
                FinishedJob(finished_core_job(wire, self.resource_names), wire.start, wire.end)
            )
            self.observed += 1

    def close(self) -> None:
        close = getattr(self.predictor, "close", None)
        if close is not None:
            close()
