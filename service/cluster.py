"""One cluster's live state in the service: its policy's dispatchers, its durations and
what it last decided.

Durations are kept in the same :class:`~cpsched.runtime.durations.DurationBook` a replay
keeps them in, so that a replay over HTTP gives the same decisions as one in process.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import nullcontext

from cpsched.core import Decision, Dispatcher, Job, Snapshot
from cpsched.core.state import DispatcherState
from cpsched.predictor.base import Persisting, Predictor
from cpsched.runtime.cluster import Cluster
from cpsched.runtime.codec import TranslationMemo
from cpsched.runtime.codec_jobs import core_job
from cpsched.runtime.durations import CENSORED_STATES
from cpsched.runtime.policy import Policy
from cpsched.service.kept_state import KeptState
from cpsched.service.lease import WriterLease
from cpsched.wire.deltas import HeldSnapshot
from cpsched.wire.schemas import FinishedJobIn

log = logging.getLogger(__name__)

RESERVE_FACTOR = 1.5
"""The time kept aside for a step is this many times the longest it took recently (a
loaded machine makes a step's wall time vary by about that much from call to call)."""
RESERVE_DECAY = 0.9
"""Per call, the share of the longest recent time kept without a new maximum."""
MIN_ANSWER_RESERVE = 0.005


def build_predictor(policy: Policy) -> Predictor:
    # Retraining must never block a dispatch: AdaBoost fits in the background and predicts
    # with the previous model (or last-two) meanwhile.
    return policy.make_predictor(background=True)


def build_dispatchers(
    policy: Policy, state: DispatcherState | None = None
) -> tuple[Dispatcher, Dispatcher]:
    """The configured dispatcher (learning into ``state``) and the heuristic answering
    when it cannot in time: the same object a CP dispatcher falls back on."""
    return policy.make_dispatchers(plan=True, state=state)


Finished = tuple[Job, int, int, str]
"""A finished job as a rebuild gives it: the core job, its start, end and end state."""


def finished_core_job(wire: FinishedJobIn, names: tuple[str, ...]) -> Job:
    """The core job of a finished one; types the cluster's nodes lack are kept at the end
    (a finished job is history, never rejected)."""
    names = (*names, *(name for name in wire.per_unit if name not in names))
    return core_job(wire, tuple(wire.per_unit.get(name, 0) for name in names), names)


class ClusterRuntime(Cluster):
    """A :class:`~cpsched.runtime.cluster.Cluster` as the service keeps it: serialised by
    a lock, fed finished jobs from the wire, remembering its last snapshot and decision."""

    fallback: Dispatcher

    def __init__(self, name: str, cluster_id: int, policy: Policy) -> None:
        state = DispatcherState()
        dispatcher, fallback = build_dispatchers(policy, state)
        super().__init__(
            dispatcher,
            build_predictor(policy),
            fallback=fallback,
            state=state,
            overrun=policy.overrun,
        )
        self.name = name
        self.cluster_id = cluster_id
        self.policy = policy
        self.lock = threading.Lock()
        """Serialises this cluster's dispatches and predictor updates."""
        self.lease = WriterLease()
        """Which bridge dispatches for the cluster (held under ``lock``)."""
        self.kept: KeptState | None = None
        """What was last stored of the guarantees and the lease
        (:mod:`~cpsched.service.kept_state`)."""
        self.conflict_said: tuple[str, str] | None = None
        """The (standby, holder) pair last logged, so that it is said once."""
        self.resource_names: tuple[str, ...] = ("cpu", "mem")
        self.last_snapshot: Snapshot | None = None
        self.last_decision: Decision | None = None
        self.shadow = False
        """The cluster's last dispatch was a dry run (shadow mode)."""
        self.last_input: tuple[str, dict[str, int]] | None = None
        """What :attr:`last_decision` was decided on: the snapshot's digest and the
        durations of its jobs (an identical input is answered with the same decision)."""
        self.last_rejected: dict[str, str] = {}
        self.held: HeldSnapshot | None = None
        """The snapshot of the latest answer: the base a delta must name."""
        self.memo = TranslationMemo()
        """The latest snapshot's translations, for the next snapshot to reuse."""
        self.observed = 0
        self.stored_model: object | None = None
        """The predictor's fitted model the database holds (stored, or loaded at start)."""
        self.model_lock = threading.Lock()
        """Held while the predictor's model is stored (not the dispatches' lock)."""
        self._answer_s = 0.0
        self._fallback_s = 0.0

    # -- the time kept aside within the deadline -----------------------------------------

    @property
    def answer_s(self) -> float:
        """Seconds kept for answering once the decision is made (start predictions, the
        audit row's commit, the answer)."""
        return MIN_ANSWER_RESERVE + RESERVE_FACTOR * self._answer_s

    def learn_answer(self, seconds: float) -> None:
        self._answer_s = max(seconds, RESERVE_DECAY * self._answer_s)

    @property
    def fallback_s(self) -> float:
        """Seconds kept for computing the fallback's decision, should it have to answer."""
        return RESERVE_FACTOR * self._fallback_s

    def learn_fallback(self, seconds: float | None = None) -> None:
        """Learn how long the fallback takes: ``seconds`` when the service ran it, else
        what a CP dispatcher's own fallback took on this call (it runs the same EASY)."""
        if seconds is None:
            seconds = self.dispatcher_state.timings.fallback_s if self.dispatcher_state else 0.0
        self._fallback_s = max(seconds, RESERVE_DECAY * self._fallback_s)

    def catch_up(self) -> None:
        """Let a background-trained predictor start a retrain that came due meanwhile."""
        retrain = getattr(self.predictor, "retrain_if_owed", None)
        if retrain is not None:
            retrain()

    @staticmethod
    def starting(snapshot: Snapshot, decision: Decision) -> list[Job]:
        """The queued jobs ``decision`` starts, in its order."""
        if not decision.starts:
            return []
        by_id = {job.id: job for job in snapshot.queued}
        return [by_id[s.job_id] for s in decision.starts]

    def predict_starts(self, jobs: Sequence[Job], t: int) -> dict[str, int]:
        """The start prediction at ``t`` of each of ``jobs`` (nothing is remembered)."""
        return {job.id: self.book.start_prediction(job, t) for job in jobs}

    def start_bases(self, jobs: Sequence[Job], t: int) -> dict[str, str]:
        """What :meth:`predict_starts`' predictions rest on, where the predictor says."""
        bases = {}
        for job in jobs:
            basis = self.book.start_basis(job, t)
            if basis is not None:
                bases[job.id] = basis
        return bases

    def input_of(self, digest: str) -> tuple[str, dict[str, int]]:
        """What a decision on the snapshot ``digest`` names depends on besides the policy:
        that snapshot and what the book says its jobs take (a copy: after a sync the book
        holds the snapshot's jobs only)."""
        return digest, dict(self.book.durations)

    def to_keep(self, wall: float, mono: float, lease_s: float) -> KeptState | None:
        """The guarantees and the lease as they are now, when they must be stored again;
        ``wall`` and ``mono`` are the same instant on the epoch and monotonic clocks."""
        state = self.dispatcher_state
        now = KeptState.of(state.guarantees if state else {}, self.lease, wall, mono)
        return now if now.differs(self.kept, lease_s) else None

    def restore(self, kept: KeptState, wall: float, mono: float) -> None:
        """Take back the guarantees and the lease a previous run of the service stored."""
        if self.dispatcher_state is not None:
            kept.restore(self.dispatcher_state.guarantees, self.lease, wall, mono)
        self.kept = kept

    def applied(
        self, snapshot: Snapshot, decision: Decision, predicted: dict[str, int], dry_run: bool
    ) -> None:
        """Remember what this decision started (``predicted``: empty for a dry run)."""
        by_id = {job.id: job for job in snapshot.queued}
        trials = {s.job_id: s.trial for s in decision.starts if s.trial is not None}
        for job_id, duration in predicted.items():
            if job_id in trials:  # keeps its queued prediction, for when it comes back
                self.book.trial_started(by_id[job_id], trials[job_id])
            else:
                self.book.started(by_id[job_id], snapshot.time, duration)
        # A trial is not a start for the wait bound's record: the job may come back.
        self.started(snapshot.time, (by_id[j] for j in predicted if j not in trials))
        self.last_snapshot = snapshot
        self.last_decision = decision
        self.shadow = dry_run

    def observe(self, jobs: Iterable[FinishedJobIn]) -> None:
        """Teach the predictor jobs that finished (in end order; censored ones skipped)."""
        for wire in sorted(jobs, key=lambda j: (j.end, j.start)):
            job = finished_core_job(wire, self.resource_names)
            self.learn(job, wire.start, wire.end, wire.state)
            self.finished(job.id, wire.start, wire.end)

    def learn(self, job: Job, start: int, end: int, state: str) -> None:
        """Teach the predictor one finished job (callers go in end order)."""
        censored = state in CENSORED_STATES
        self.book.learn(job, start, end, censored=censored)
        if not censored:
            self.observed += 1

    def relearn(self, history: Iterable[Finished], model: bytes | None = None) -> None:
        """Rebuild the predictor from stored ``history``, observed in end order. A
        predictor that fits models (AdaBoost) first takes back its stored ``model`` (its
        last fit before the restart) and is told how many jobs it will learn: it builds
        no training row its window would drop, and fits nothing on the way nor at the
        end; without a model that suits its settings it fits once, on the newest rows,
        when the history has been observed (in the background: meanwhile it predicts as
        before its first fit), rather than every ``retrain_every`` jobs on the way (each
        fit then outdated at once, and competing with the rebuild for the interpreter).
        The model is taken back first so that what the rebuild computes from predictions
        on the way (an upper estimate's ratios) rests on it, as it did before the
        restart, not on last-two's."""
        jobs = sorted(history, key=lambda h: (h[2], h[1]))
        users = Counter(job.user for job, *_, state in jobs if state not in CENSORED_STATES)
        learnt = sum(users.values())
        predictor = self.predictor
        if model is not None and isinstance(predictor, Persisting):
            if predictor.load_model(model):
                self.stored_model = predictor.fitted_model()
            else:
                log.warning(
                    "cluster %s: the stored %s model does not suit the predictor's "
                    "settings; fitting a new one",
                    self.name,
                    predictor.name,
                )
        rebuilding = getattr(predictor, "rebuilding", None)
        with rebuilding(learnt, users) if rebuilding is not None else nullcontext():
            for job, start, end, state in jobs:
                self.learn(job, start, end, state)

    @property
    def model_name(self) -> str:
        """The name the predictor's fitted models are stored under."""
        predictor = self.predictor
        return predictor.model_name if isinstance(predictor, Persisting) else predictor.name

    def model_to_store(self) -> tuple[object, bytes] | None:
        """The predictor's newest fitted model and its bytes, when the database does not
        hold it yet (:attr:`stored_model` once it does)."""
        predictor = self.predictor
        if not isinstance(predictor, Persisting):
            return None
        model = predictor.fitted_model()
        if model is None or model is self.stored_model:
            return None
        return model, predictor.dump_model(model)

    def close(self) -> None:
        close = getattr(self.predictor, "close", None)
        if close is not None:
            close()
