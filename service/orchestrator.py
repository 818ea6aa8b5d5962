"""Dispatch orchestration: per-cluster serialisation, the deadline, fallback, audit.

Endpoints call these methods from FastAPI's thread pool, never on the event loop. The
dispatcher's ``decide`` runs in a worker thread; when it has not answered by the
cluster's deadline, the fallback heuristic answers instead and the late result is
dropped (``decide`` changes nothing outside the dispatcher, so an abandoned solve harms
nothing but a core's time; a CP dispatcher keeps learned timings and, with reuse, the
last plan as a hint, which a late call may overwrite harmlessly).
A decision is returned only after its audit row is committed.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Row
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from cpsched.core import Decision, Job, Snapshot, decision_violations
from cpsched.errors import CpschedError
from cpsched.runtime.codec import to_decision_out, to_snapshot
from cpsched.runtime.gc_pause import collector_paused
from cpsched.service.cluster import ClusterRuntime
from cpsched.service.lease import WriterConflict
from cpsched.service.metrics import ERROR_BUCKETS, ServiceMetrics
from cpsched.service.pending import pending
from cpsched.service.settings import ServiceSettings
from cpsched.service.store import history, retention
from cpsched.service.store.database import lock_wait
from cpsched.service.store.models import DecisionRow
from cpsched.wire.deltas import HeldSnapshot, apply_delta
from cpsched.wire.schemas import (
    AuditEntryOut,
    AuditPageOut,
    DecisionOut,
    DispatchRequest,
    ExtensionOut,
    FinishedAck,
    FinishedBatchIn,
    FinishedJobIn,
    JobInfoOut,
    Name,
    RefusedFinishedOut,
    SnapshotDeltaIn,
    StartOut,
    end_state,
    shown,
)

log = logging.getLogger(__name__)

FALLBACK_FLOOR = 0.5
"""The least time the fallback gets, as a share of the deadline (see :meth:`_decide`)."""
RETIRE_BATCH = 5000
"""Rows per delete transaction when a cluster is retired."""


class UnknownCluster(CpschedError):
    """The service has no such cluster (404)."""


AUDITED_REJECTIONS = 100
"""Rejected jobs an audit row lists (with their count): a row is kept for ever."""

DEADLINE_GRACE = 0.02
"""Seconds a dispatcher may overrun its share before the fallback answers instead."""

FINISHED_SLICE = 500
"""Finished jobs stored per transaction and learnt per hold of the cluster's lock."""


FUTURE_TOLERANCE_S = 86400
"""How far past the latest time it knows the service believes a finished job's end."""


def longest_wait(snapshot: Snapshot) -> int:
    """Seconds the longest-waiting queued job has waited, among those the workload
    manager does not hold back (a dependency, a user hold: not cpsched's to start)."""
    return max(
        (
            snapshot.time - job.submit
            for job in snapshot.queued
            if job.constraints is None or job.constraints.eligible
        ),
        default=0,
    )


class Orchestrator:
    def __init__(
        self,
        settings: ServiceSettings,
        sessions: sessionmaker[Session],
        metrics: ServiceMetrics,
        *,
        workers: int = 4,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.metrics = metrics
        self.workers = workers
        self._executor: ThreadPoolExecutor | None = None
        self._runtimes: dict[str, ClusterRuntime] = {}
        self._runtimes_lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}  # cluster → held while it is built
        self._stop_warm_up = threading.Event()
        self._warm_up: threading.Thread | None = None

    # -- clusters ---------------------------------------------------------------------

    def runtime(self, cluster: str) -> ClusterRuntime:
        """The cluster's runtime, its predictor rebuilt from the stored history on first use.

        One cluster's rebuild holds back only calls for that cluster: others (and the
        background warm-up of the rest) go on meanwhile."""
        with self._runtimes_lock:
            found = self._runtimes.get(cluster)
            if found is not None:
                return found
            loading = self._loading.setdefault(cluster, threading.Lock())
        with loading:
            with self._runtimes_lock:
                found = self._runtimes.get(cluster)
            if found is not None:
                return found
            runtime = self._load(cluster)
            with self._runtimes_lock:
                self._runtimes[cluster] = runtime
                self._loading.pop(cluster, None)
            return runtime

    def _load(self, cluster: str) -> ClusterRuntime:
        with self.sessions.begin() as session:
            cluster_id = history.cluster_id(session, cluster)
        runtime = ClusterRuntime(cluster, cluster_id, self.settings.policy(cluster))
        began = time.perf_counter()
        with self.sessions() as session:
            # Summed first: a fit the rebuild starts in the background would compete.
            errors = history.start_prediction_errors(session, cluster_id, ERROR_BUCKETS)
            # What the predictor remembers, not the whole history (bounded reads).
            rows = history.remembered(session, cluster_id, runtime.predictor.memory)
        names = runtime.resource_names
        runtime.relearn(
            (_stored_job(row, names), row.start_time, row.end_time, end_state(row.state))
            for row in rows
        )
        for predictor, counts in errors.items():  # the metric survives a restart
            self.metrics.restore_prediction_errors(
                cluster, predictor, counts.at_most, counts.count, counts.total
            )
        self.metrics.deadline.labels(cluster).set(runtime.policy.deadline)
        if runtime.observed:
            log.info(
                "cluster %s: predictor rebuilt from %d finished jobs in %.2f s",
                cluster,
                runtime.observed,
                time.perf_counter() - began,
            )
        return runtime

    def existing(self, cluster: str) -> ClusterRuntime | None:
        """The cluster's runtime if it was ever written to; reads never create a cluster."""
        with self._runtimes_lock:
            found = self._runtimes.get(cluster)
        if found is not None:
            return found
        with self.sessions() as session:
            if history.find_cluster(session, cluster) is None:
                return None
        return self.runtime(cluster)

    def warm_up(self, stop: threading.Event | None = None) -> None:
        """Rebuild every stored cluster's predictor now rather than on its first request
        (until ``stop`` is set)."""
        with self.sessions() as session:
            names = history.cluster_names(session)
        for name in names:
            if stop is not None and stop.is_set():
                return
            self.runtime(name)

    def warm_up_in_background(self) -> None:
        """:meth:`warm_up` in a thread of its own, so that the start-up (and ``/healthz``)
        does not wait for it however many clusters there are: a cluster asked for before
        its turn is built by that call."""

        def run() -> None:
            try:
                self.warm_up(self._stop_warm_up)
            except SQLAlchemyError as exc:  # each cluster is built on first use anyway
                log.warning("warm-up stopped: %s", exc)

        self._stop_warm_up.clear()
        self._warm_up = threading.Thread(target=run, name="warm-up", daemon=True)
        self._warm_up.start()

    def retire(self, cluster: str) -> dict[str, int]:
        """Forget ``cluster``: its finished jobs, predictions and audit trail, deleted in
        batches (a transaction each), then the cluster itself, its runtime and its
        metrics. Rows deleted per table; :class:`UnknownCluster` if it has none."""
        with self._runtimes_lock:
            runtime = self._runtimes.pop(cluster, None)
        with self.sessions() as session:
            cluster_id = history.find_cluster(session, cluster)
        if cluster_id is None:
            raise UnknownCluster(f"cluster {cluster} is unknown to this service")
        if runtime is not None:
            with runtime.lock:  # a dispatch in flight finishes first
                runtime.close()
        deleted = retention.delete_cluster(self.sessions, cluster_id, RETIRE_BATCH)
        self.metrics.forget(cluster)
        log.warning("cluster %s retired: %s rows deleted", cluster, deleted)
        return deleted

    @property
    def executor(self) -> ThreadPoolExecutor:
        # Created on demand: an app may be started and stopped more than once (tests,
        # ASGI servers re-running the lifespan), each stop shutting the pool down.
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="solve")
        return self._executor

    def close(self) -> None:
        self._stop_warm_up.set()
        if self._warm_up is not None:
            self._warm_up.join(timeout=30)
            self._warm_up = None
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        for runtime in self._runtimes.values():
            runtime.close()

    # -- dispatch ---------------------------------------------------------------------

    def dispatch(
        self,
        cluster: str,
        request: DispatchRequest,
        digest: str,
        arrived: float | None = None,
        writer: str | None = None,
    ) -> DecisionOut:
        """The answer to ``request``, due ``deadline`` seconds after it ``arrived``
        (``time.perf_counter()``; default: now): reading it, predicting, the dispatcher,
        the fallback if it must answer, and the audit row all count. The dispatcher gets
        what is left once the time to answer (and to fall back) is kept aside.

        The garbage collector is held off meanwhile: a snapshot of 100,000 queued jobs
        makes about a million objects, which triggered full collections (each scanning
        every object of the process) worth a quarter of the call; reference counting
        frees what the call drops, the collector runs at its next threshold after it."""
        with collector_paused():
            return self._dispatch(
                cluster, lambda _: HeldSnapshot.of(request, digest), arrived, writer
            )

    def dispatch_delta(
        self,
        cluster: str,
        delta: SnapshotDeltaIn,
        arrived: float | None = None,
        writer: str | None = None,
    ) -> DecisionOut:
        """As :meth:`dispatch`, on the snapshot ``delta`` makes of the cluster's latest
        (:mod:`cpsched.wire.deltas`; :class:`StaleBaseError` if that is not its base)."""
        with collector_paused():
            return self._dispatch(
                cluster, lambda runtime: apply_delta(runtime.held, delta), arrived, writer
            )

    def _dispatch(
        self,
        cluster: str,
        read: Callable[[ClusterRuntime], HeldSnapshot],
        arrived: float | None,
        writer: str | None,
    ) -> DecisionOut:
        began = time.perf_counter() if arrived is None else arrived
        before = time.perf_counter()
        runtime = self.runtime(cluster)
        # A cluster's one-time set-up (its predictor rebuilt from history, its dispatcher
        # built: OR-Tools imported) is not the answer's to pay: without this the first
        # call after a start always fell back at the 0.2 s default deadline.
        set_up = time.perf_counter() - before
        due = began + runtime.policy.deadline + set_up
        with runtime.lock:
            held = read(runtime)  # a delta needs the cluster's latest snapshot
            request, digest = held.request, held.digest
            if writer and not request.dry_run:
                self._claim_lease(cluster, runtime, writer)
            # SnapshotError → 422, before any state changes (the memo is only a cache).
            translated = to_snapshot(request, runtime.memo)
            snapshot = translated.snapshot
            notes = [*translated.notes, *self._out_of_order(cluster, runtime, snapshot)]
            runtime.catch_up()
            runtime.resource_names = snapshot.resource_names
            with self.sessions() as session:
                stored = history.start_predictions(
                    session,
                    runtime.cluster_id,
                    [
                        rj.job.id
                        for rj in snapshot.running
                        if not runtime.book.is_started(rj.job.id)
                    ],
                )
            made = runtime.book.sync(snapshot, stored)
            if made:
                # Stored now, so that the time they take (10,000 new jobs: a second on
                # PostgreSQL) is known before the dispatcher gets its share.
                with (
                    self.sessions.begin() as session,
                    lock_wait(session, due - time.perf_counter()),
                ):
                    name = runtime.predictor.name
                    history.record_predictions(
                        session,
                        runtime.cluster_id,
                        [history.Prediction(p.job_id, p.kind, name, p.value, p.time) for p in made],
                    )
            decided_on = runtime.input_of(snapshot, digest)
            if decided_on == runtime.last_input and runtime.last_decision is not None:
                decision, solve_s = _repeated(runtime.last_decision), 0.0
            else:
                decision, solve_s = self._decide(runtime, snapshot, due - runtime.answer_s)
            decided = time.perf_counter()
            predicted = runtime.predict_starts(snapshot, decision)
            runtime.applied(snapshot, decision, {} if request.dry_run else predicted)
            runtime.last_input = decided_on
            runtime.last_rejected = {r.job_id: r.reason for r in translated.rejected}
            answer = to_decision_out(
                cluster=cluster,
                snapshot=snapshot,
                decision=decision,
                predicted=predicted,
                rejected=translated.rejected,
                notes=notes,
                wall_ms=(decided - began) * 1000.0,
                solve_ms=solve_s * 1000.0,
                dry_run=request.dry_run,
                decision_id=None,
                snapshot_digest=digest,
            )
            with (
                self.sessions.begin() as session,
                lock_wait(session, due - time.perf_counter()),
            ):
                if not request.dry_run:
                    name = runtime.predictor.name
                    history.record_predictions(
                        session,
                        runtime.cluster_id,
                        [
                            history.Prediction(job_id, "start", name, d, snapshot.time)
                            for job_id, d in predicted.items()
                        ],
                    )
                row = _audit_row(runtime.cluster_id, request, answer, digest)
                if self.settings.audit_snapshots:
                    row.snapshot = request.model_dump(mode="json")
                decision_id = history.record_decision(session, row)
            runtime.held = held  # answered: the base of the cluster's next delta
            answered = time.perf_counter()
            runtime.learn_answer(answered - decided)
        self._count(cluster, snapshot, answer, solve_s, answered - began)
        return answer.model_copy(update={"decision_id": decision_id})

    def _claim_lease(self, cluster: str, runtime: ClusterRuntime, writer: str) -> None:
        """``writer``'s dispatch holds the cluster's lease, or :class:`WriterConflict`
        (counted; logged once per standby writer and holder)."""
        duration = self.settings.writer_lease_s
        if duration <= 0:
            return
        try:
            changed = runtime.lease.claim(cluster, writer, time.monotonic(), duration)
        except WriterConflict as conflict:
            self.metrics.writer_conflicts.labels(cluster).inc()
            said = (writer, conflict.holder)
            if runtime.conflict_said != said:
                runtime.conflict_said = said
                log.warning(
                    "a second bridge dispatches for a cluster: refused",
                    extra={"cluster": cluster, "writer": writer, "holder": conflict.holder},
                )
            raise
        if changed:
            runtime.conflict_said = None
            log.info("cluster %s: dispatches now come from bridge %s", cluster, writer)

    def _out_of_order(self, cluster: str, runtime: ClusterRuntime, snapshot: Snapshot) -> list[str]:
        """A note (and a count, and a warning) when ``snapshot`` is older than the last one
        answered for the cluster: two writers, or a bridge whose clock went back."""
        last = runtime.last_snapshot
        if last is None or snapshot.time >= last.time:
            return []
        self.metrics.out_of_order.labels(cluster).inc()
        log.warning(
            "snapshot older than the last one answered",
            extra={"cluster": cluster, "time": snapshot.time, "last_time": last.time},
        )
        return [
            f"snapshot time {snapshot.time} is older than the last one answered "
            f"({last.time}): is a second bridge posting for this cluster, or did its clock "
            "go back?"
        ]

    def _decide(
        self,
        runtime: ClusterRuntime,
        snapshot: Snapshot,
        decide_by: float,
    ) -> tuple[Decision, float]:
        """The dispatcher's decision if it is ready (and valid) by ``decide_by`` less the
        time the fallback takes, else the fallback's (EASY on at most ``fallback_depth``
        jobs), ready by ``decide_by``."""
        began = time.perf_counter()
        time_left = decide_by - runtime.fallback_s - began
        reason: str
        if time_left <= 0:
            # Reading the request took the deadline: no time for the dispatcher at all.
            reason = "deadline"
            log.warning(
                "cluster %s: no time left for %s after reading the request (%.2f s "
                "deadline); answering with the fallback",
                runtime.name,
                runtime.dispatcher.name,
                runtime.policy.deadline,
            )
        else:
            due = began + time_left
            future = self.executor.submit(
                runtime.decide, snapshot, time_left, lambda: time.perf_counter() >= due
            )
            try:
                # A CP dispatcher answers by ``time_left`` itself (its own fallback when
                # its search has no time); the grace covers a phase overrunning a little.
                decision = future.result(timeout=time_left + DEADLINE_GRACE)
                solve_s = time.perf_counter() - began
                runtime.learn_fallback()
                violations = decision_violations(snapshot, decision)
                if not violations:
                    return decision, solve_s
                reason = "invalid"
                log.error(
                    "cluster %s: %s gave an invalid decision, answering with the fallback: %s",
                    runtime.name,
                    runtime.dispatcher.name,
                    "; ".join(violations[:5]),
                )
            except FutureTimeout:
                reason = "deadline"
                log.warning(
                    "cluster %s: %s missed its %.2f s; answering with the fallback",
                    runtime.name,
                    runtime.dispatcher.name,
                    time_left,
                )
            except Exception:
                # A dispatcher bug must not leave a production queue without an answer.
                reason = "error"
                incident = uuid.uuid4().hex[:12]
                log.exception("cluster %s: dispatcher failed (incident %s)", runtime.name, incident)
        fell_back = time.perf_counter()
        # It returns what it has by the deadline (marked partial), never runs on; when
        # reading the request took (nearly) all of it, it still has half a deadline, so
        # that every call starts something however large the cluster.
        stop_at = max(decide_by, fell_back + runtime.policy.deadline * FALLBACK_FLOOR)
        fallback = runtime.decide_by_fallback(snapshot, lambda: time.perf_counter() >= stop_at)
        runtime.learn_fallback(time.perf_counter() - fell_back)
        solve_s = time.perf_counter() - began
        self.metrics.fallbacks.labels(runtime.name, reason).inc()
        diagnostics = replace(
            fallback.diagnostics,
            fallback=True,
            fallback_reason=reason,
            solver_status=reason,
            notes=(
                *fallback.diagnostics.notes,
                f"{runtime.dispatcher.name}: {reason}; answered by {runtime.fallback.name}",
            ),
        )
        return replace(fallback, diagnostics=diagnostics), solve_s

    def _count(
        self, cluster: str, snapshot: Snapshot, answer: DecisionOut, solve_s: float, total_s: float
    ) -> None:
        m = self.metrics
        d = answer.diagnostics
        m.dispatch_seconds.labels(cluster).observe(total_s)
        m.solve_seconds.labels(cluster, d.dispatcher).observe(solve_s)
        m.solver_status.labels(cluster, d.solver_status).inc()
        if d.fallback and d.solver_status not in {"deadline", "invalid", "error"}:
            # The CP dispatchers' own fallback (no solution in time), counted here too.
            m.fallbacks.labels(cluster, "solver").inc()
        m.queued.labels(cluster).set(len(snapshot.queued))
        m.running.labels(cluster).set(len(snapshot.running))
        m.longest_wait.labels(cluster).set(longest_wait(snapshot))
        m.rejected_jobs.labels(cluster).inc(len(answer.rejected))
        m.split_waiting.labels(cluster).set(d.split_waiting)
        m.split_dropped.labels(cluster).inc(d.split_dropped)
        if d.partial:
            m.partial.labels(cluster).inc()
        if not answer.dry_run:
            m.started.labels(cluster).inc(len(answer.starts))
            m.extensions.labels(cluster).inc(len(answer.extensions))

    # -- finished jobs ----------------------------------------------------------------

    def finished(self, cluster: str, batch: FinishedBatchIn) -> FinishedAck:
        """Store the batch's valid jobs; each invalid one is refused on its own, with why.

        The jobs go in slices of :data:`FINISHED_SLICE`, in the order they ended, each
        committed in a transaction of its own and then learnt under the cluster's lock,
        which is held for that alone: a dispatch waits for one slice at most, never for a
        whole 10,000-job batch. The answer comes after the last commit; a crash before it
        leaves the earlier slices stored, and the bridge's retry counts them as duplicates.
        """
        runtime = self.runtime(cluster)
        jobs, refused = _checked_finished(batch, _latest_believable(runtime))
        if refused:
            self.metrics.finished.labels(cluster, "refused").inc(len(refused))
            log.warning(
                "finished jobs refused",
                extra={"cluster": cluster, "refused": [r.job_id for r in refused][:20]},
            )
        jobs.sort(key=lambda j: (j.end, j.start))
        stored = duplicates = 0
        for at in range(0, len(jobs), FINISHED_SLICE):
            part = jobs[at : at + FINISHED_SLICE]
            with self.sessions.begin() as session:
                done = history.store_finished(session, runtime.cluster_id, part)
            # Committed: now (and only now) the predictor may learn from them.
            with runtime.lock:
                for job in done.new:
                    predicted = runtime.book.start_of(job.id)
                    if predicted is not None:
                        self.metrics.prediction_error.labels(
                            cluster, runtime.predictor.name
                        ).observe(abs(job.end - job.start - predicted))
                runtime.observe(done.new)
            stored += len(done.new)
            duplicates += done.duplicates
        self.metrics.finished.labels(cluster, "stored").inc(stored)
        self.metrics.finished.labels(cluster, "duplicate").inc(duplicates)
        return FinishedAck(stored=stored, duplicates=duplicates, refused=refused)

    # -- the audit trail ----------------------------------------------------------------

    def audit(self, cluster: str, after_id: int, limit: int) -> AuditPageOut:
        runtime = self.existing(cluster)
        if runtime is None:
            return AuditPageOut(entries=[], next_after_id=None)
        with self.sessions() as session:
            rows = history.decisions(session, runtime.cluster_id, after_id, limit)
        entries = [
            AuditEntryOut(
                id=row.id,
                time=row.snapshot_time,
                dry_run=row.dry_run,
                snapshot_digest=row.snapshot_digest,
                queued=row.queued,
                running=row.running,
                starts=[StartOut.model_validate(s) for s in row.starts],
                extensions=[ExtensionOut.model_validate(e) for e in row.extensions],
                diagnostics=row.diagnostics,
                recorded_at=row.created_at.isoformat() if row.created_at else "",
            )
            for row in rows
        ]
        return AuditPageOut(
            entries=entries, next_after_id=entries[-1].id if len(entries) == limit else None
        )

    # -- what the service knows of a job ----------------------------------------------

    def job_info(self, cluster: str, job_id: str) -> JobInfoOut:
        runtime = self.existing(cluster)
        if runtime is None:
            return JobInfoOut(cluster=cluster, job_id=job_id, state="unknown")
        with self.sessions() as session:
            done = history.finished_job(session, runtime.cluster_id, job_id)
            predictions = history.predictions_of(session, runtime.cluster_id, job_id)
        latest = predictions[-1] if predictions else None
        base: dict[str, Any] = {
            "cluster": cluster,
            "job_id": job_id,
            "predicted_run_time": latest.predicted if latest else None,
            "predictor": latest.predictor if latest else None,
        }
        if done is not None:
            return JobInfoOut(
                **base,
                state="finished",
                user=done.user_name,
                submit=done.submit_time,
                start=done.start_time,
                end=done.end_time,
            )
        with runtime.lock:
            snapshot, decision = runtime.last_snapshot, runtime.last_decision
            rejected = runtime.last_rejected.get(job_id)
            state = runtime.dispatcher_state
            split_wait = state.split_waits.get(job_id) if state is not None else None
        if rejected is not None:
            return JobInfoOut(**base, state="rejected", rejected_because=rejected)
        if snapshot is not None:
            for rj in snapshot.running:
                if rj.job.id == job_id:
                    return JobInfoOut(
                        **base,
                        state="running",
                        user=rj.job.user,
                        submit=rj.job.submit,
                        start=rj.start,
                    )
            for position, job in enumerate(snapshot.queued):
                if job.id == job_id:
                    return JobInfoOut(
                        **base,
                        state="queued",
                        user=job.user,
                        submit=job.submit,
                        pending=pending(snapshot, decision, position, split_wait),
                    )
        return JobInfoOut(**base, state="unknown")


def _repeated(decision: Decision) -> Decision:
    """The previous decision, answered again for an identical input. The CP search is
    limited by wall time and every dispatcher by the deadline, so deciding again could
    answer differently (a retried request, a bridge that posts the same state twice)."""
    note = "same snapshot and durations as the previous call: its decision, repeated"
    diagnostics = decision.diagnostics
    if note not in diagnostics.notes:
        diagnostics = replace(diagnostics, notes=(*diagnostics.notes, note))
    # Nothing was taken out this time (the metric counted the first answer's take-outs).
    return replace(decision, diagnostics=replace(diagnostics, split_dropped=0))


def _audit_row(
    cluster_id: int, request: DispatchRequest, answer: DecisionOut, digest: str
) -> DecisionRow:
    return DecisionRow(
        cluster_id=cluster_id,
        snapshot_time=request.time,
        snapshot_digest=digest,
        dry_run=request.dry_run,
        queued=len(request.queued),
        running=len(request.running),
        starts=[s.model_dump() for s in answer.starts],
        extensions=[e.model_dump() for e in answer.extensions],
        # Bounded whatever the queue: the answer listed every rejected job already.
        diagnostics={
            **answer.diagnostics.model_dump(),
            "rejected": [r.model_dump() for r in answer.rejected[:AUDITED_REJECTIONS]],
            "rejected_count": len(answer.rejected),
        },
        wall_ms=answer.diagnostics.wall_ms,
    )


def _stored_job(row: Row[Any], names: tuple[str, ...]) -> Job:
    """The core job of a stored finished one (a row of ``history.remembered``), as
    :func:`~cpsched.service.cluster.finished_core_job` makes it of the wire job it was.
    Not validated again: the row was valid when stored, and a bound tightened since (user
    names were 1,024 characters once) must not stop a restart."""
    per_unit: dict[str, int] = row.per_unit
    names = (*names, *(name for name in per_unit if name not in names))
    return Job(
        id=row.job_id,
        submit=row.submit_time,
        time_limit=row.time_limit,
        units=row.units,
        unit_request=tuple(per_unit.get(name, 0) for name in names),
        user=row.user_name,
        group=row.group_name,
        name=row.job_name,
        queue=row.partition,
        resource_names=names,
    )


_NAME: TypeAdapter[str] = TypeAdapter(Name)


def _valid_name(value: object) -> str | None:
    try:
        return _NAME.validate_python(value, strict=True)
    except ValidationError:
        return None


def _latest_believable(runtime: ClusterRuntime) -> int:
    """The latest end time a finished job may have: the cluster's clock (its latest
    snapshot) or the service's, whichever is later, and :data:`FUTURE_TOLERANCE_S` more.
    A replay over HTTP reports a job's end before the snapshot of that time (its cluster
    clock lags), and its times are in the past; a clock glitch is not."""
    last = runtime.last_snapshot
    cluster_now = last.time if last is not None else 0
    return max(cluster_now, int(time.time())) + FUTURE_TOLERANCE_S


def _checked_finished(
    batch: FinishedBatchIn, latest_end: int
) -> tuple[list[FinishedJobIn], list[RefusedFinishedOut]]:
    """The batch's jobs that validate and end by ``latest_end``, and a refusal (id and
    why) for each other one."""
    jobs: list[FinishedJobIn] = []
    refused: list[RefusedFinishedOut] = []
    for index, raw in enumerate(batch.jobs):
        try:
            job = FinishedJobIn.model_validate(raw)
        except ValidationError as exc:
            job_id = _valid_name(raw.get("id"))
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'job'}: {e['msg']}" for e in exc.errors()
            )
            refused.append(
                RefusedFinishedOut(
                    # The id as sent when it is a valid one, else the job's place.
                    job_id=job_id if job_id is not None else f"#{index}",
                    reason=shown(problems),
                )
            )
            continue
        if job.end > latest_end:
            reason = (
                f"end {job.end} is more than {FUTURE_TOLERANCE_S} s after the cluster's "
                "latest time and the service's clock: a clock error? It would stand for the "
                "user's newest job in every prediction"
            )
            refused.append(RefusedFinishedOut(job_id=job.id, reason=reason))
            continue
        jobs.append(job)
    return jobs, refused
