"""Dispatch orchestration: per-cluster serialisation, the deadline, fallback, audit; the
service's one entry point for its routes (clusters live in :mod:`.clusters`, finished
jobs go through :mod:`.ingest`, reads through :mod:`.reads`).

Endpoints call these methods from FastAPI's thread pool, never on the event loop. The
dispatcher's ``decide`` runs in a worker thread; when it has not answered by the
cluster's deadline, the fallback heuristic answers instead and the late result is
dropped (``decide`` changes nothing outside the dispatcher, so an abandoned solve harms
nothing but a core's time; a CP dispatcher keeps learned timings and, with reuse, the
last plan as a hint, which a late call may overwrite harmlessly).
A decision is returned only after its audit row is committed.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace

from sqlalchemy.orm import Session, sessionmaker

from cpsched.core import Decision, Snapshot, decision_violations
from cpsched.runtime.codec import to_snapshot
from cpsched.runtime.codec_decision import to_decision_out
from cpsched.runtime.deadline import ClockDeadline
from cpsched.runtime.gc_pause import collector_paused, freeze_after_calls
from cpsched.service import reads
from cpsched.service.cluster import ClusterRuntime
from cpsched.service.clusters import ClusterRegistry
from cpsched.service.ingest import store_finished
from cpsched.service.lease import WriterConflict
from cpsched.service.metrics import ServiceMetrics
from cpsched.service.occupancy import longest_wait, utilisation
from cpsched.service.settings import ServiceSettings
from cpsched.service.store import history
from cpsched.service.store.database import lock_wait
from cpsched.service.store.models import DecisionRow
from cpsched.wire.deltas import HeldSnapshot, apply_delta
from cpsched.wire.schemas import (
    AuditPageOut,
    DecisionOut,
    DispatchRequest,
    FinishedAck,
    FinishedBatchIn,
    JobInfoOut,
    SnapshotDeltaIn,
)

log = logging.getLogger(__name__)

FALLBACK_FLOOR = 0.5
"""The least time the fallback gets, as a share of the deadline (see :meth:`_decide`)."""


AUDITED_REJECTIONS = 100
"""Rejected jobs an audit row lists (with their count): a row is kept for ever."""

DEADLINE_GRACE = 0.02
"""Seconds a dispatcher may overrun its share before the fallback answers instead."""

PREDICTION_SHARE = 0.3
"""The time a call may spend predicting the new queued jobs it sees, as a share of the
deadline, never into the time kept for answering and for the fallback: past it, the
rest are planned with their requests this time and predicted first at the next calls. A
learned predictor takes about 0.1 ms a job, so a burst of 10,000 new jobs alone would
take five times a 0.2 s deadline."""

PREDICTED_AT_LEAST = 100
"""New queued jobs predicted per call whatever the time (about 10 ms with a learned
predictor): a call whose reading used up the share still makes progress."""

LARGE_MACHINE = 5000
"""Nodes from which a cluster's translated machine is frozen out of the collector's full
scans when it changes (:func:`~cpsched.runtime.gc_pause.freeze_after_calls`); below, a
scan of it costs little."""


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
        self.clusters = ClusterRegistry(settings, sessions, metrics)

    # -- clusters ---------------------------------------------------------------------

    def runtime(self, cluster: str) -> ClusterRuntime:
        """The cluster's runtime (:meth:`ClusterRegistry.runtime`)."""
        return self.clusters.runtime(cluster)

    def existing(self, cluster: str) -> ClusterRuntime | None:
        return self.clusters.existing(cluster)

    def warm_up_in_background(self) -> None:
        self.clusters.warm_up_in_background()

    def retire(self, cluster: str) -> dict[str, int]:
        return self.clusters.retire(cluster)

    @property
    def executor(self) -> ThreadPoolExecutor:
        # Created on demand: an app may be started and stopped more than once (tests,
        # ASGI servers re-running the lifespan), each stop shutting the pool down.
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="solve")
        return self._executor

    def close(self) -> None:
        self.clusters.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

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
            machine = runtime.memo.machine
            translated = to_snapshot(request, runtime.memo, held.changes)
            if runtime.memo.machine is not machine and len(request.nodes) >= LARGE_MACHINE:
                freeze_after_calls()  # it lives on: out of the collector's full scans
            snapshot = translated.snapshot
            notes = [*translated.notes, *self._out_of_order(cluster, runtime, snapshot)]
            runtime.catch_up()
            runtime.resource_names = snapshot.resource_names
            with self.sessions() as session:
                stored = history.start_predictions(
                    session,
                    runtime.cluster_id,
                    runtime.book.without_start_prediction(snapshot, translated.changes),
                )
            made = runtime.book.sync(
                snapshot, stored, translated.changes, _prediction_stop(runtime, due)
            )
            self.metrics.unpredicted.labels(cluster).set(runtime.book.deferred)
            if runtime.book.deferred:
                notes.append(
                    f"{runtime.book.deferred} new queued jobs planned with their requests: "
                    "not predicted within the deadline (they are predicted first at the "
                    "next calls)"
                )
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
                        [
                            history.Prediction(p.job_id, p.kind, name, p.value, p.time, p.basis)
                            for p in made
                        ],
                    )
            decided_on = runtime.input_of(digest)
            if decided_on == runtime.last_input and runtime.last_decision is not None:
                decision, solve_s = _repeated(runtime.last_decision), 0.0
            else:
                decision, solve_s = self._decide(runtime, snapshot, due - runtime.answer_s)
            decided = time.perf_counter()
            started = runtime.starting(snapshot, decision)
            predicted = runtime.predict_starts(started, snapshot.time)
            runtime.applied(
                snapshot, decision, {} if request.dry_run else predicted, request.dry_run
            )
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
                    bases = runtime.start_bases(started, snapshot.time)
                    history.record_predictions(
                        session,
                        runtime.cluster_id,
                        [
                            history.Prediction(
                                job_id, "start", name, d, snapshot.time, bases.get(job_id)
                            )
                            for job_id, d in predicted.items()
                        ],
                    )
                row = _audit_row(runtime.cluster_id, request, answer, digest, snapshot)
                if self.settings.audit_snapshots:
                    row.snapshot = request.model_dump(mode="json")
                decision_id = history.record_decision(session, row)
                keep = runtime.to_keep(time.time(), time.monotonic(), self.settings.writer_lease_s)
                if keep is not None:
                    history.save_cluster_state(
                        session,
                        runtime.cluster_id,
                        keep.guarantee_dicts(),
                        keep.writer,
                        keep.writer_seen,
                    )
            if keep is not None:
                runtime.kept = keep  # committed with the audit row
            runtime.held = held  # answered: the base of the cluster's next delta
            answered = time.perf_counter()
            runtime.learn_answer(answered - decided)
        self._count(cluster, snapshot, answer, solve_s, answered - began)
        schedule = runtime.dispatcher_state.today_schedule if runtime.dispatcher_state else None
        if schedule is not None:  # the jobs still waiting that today's would have started
            starting = set() if answer.dry_run else {s.job_id for s in answer.starts}
            late = sum(job_id not in starting for job_id in list(schedule.started_at))
            self.metrics.later_than_today.labels(cluster).set(late)
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
            future = self.executor.submit(
                runtime.decide, snapshot, ClockDeadline(began + time_left)
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
        fallback = runtime.decide_by_fallback(snapshot, ClockDeadline(stop_at))
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
        for resource, share in utilisation(snapshot).items():
            m.utilisation.labels(cluster, resource).set(share)
        m.rejected_jobs.labels(cluster).inc(len(answer.rejected))
        m.split_waiting.labels(cluster).set(d.split_waiting)
        m.split_dropped.labels(cluster).inc(d.split_dropped)
        m.guaranteed.labels(cluster).set(d.guaranteed)
        m.guarantees_broken.labels(cluster).inc(d.guarantees_broken)
        if d.partial:
            m.partial.labels(cluster).inc()
        if not answer.dry_run:
            m.started.labels(cluster).inc(len(answer.starts))
            m.trials.labels(cluster).inc(sum(s.trial_s is not None for s in answer.starts))
            m.extensions.labels(cluster).inc(len(answer.extensions))

    # -- finished jobs ----------------------------------------------------------------

    def finished(self, cluster: str, batch: FinishedBatchIn) -> FinishedAck:
        return store_finished(self.clusters, cluster, batch)

    # -- the audit trail ----------------------------------------------------------------

    def audit(self, cluster: str, after_id: int, limit: int) -> AuditPageOut:
        return reads.audit_page(self.clusters, cluster, after_id, limit)

    # -- what the service knows of a job ----------------------------------------------

    def job_info(self, cluster: str, job_id: str) -> JobInfoOut:
        return reads.job_info(self.clusters, cluster, job_id)


def _prediction_stop(runtime: ClusterRuntime, due: float) -> Callable[[], bool]:
    """When a call due at ``due`` stops predicting new queued jobs (asked once per new
    job): its share of the deadline from now, or the time it keeps for answering and for
    the fallback, whichever comes first, and :data:`PREDICTED_AT_LEAST` jobs in."""
    share = time.perf_counter() + PREDICTION_SHARE * runtime.policy.deadline
    until = min(share, due - runtime.answer_s - runtime.fallback_s)
    asked = itertools.count()
    return lambda: next(asked) >= PREDICTED_AT_LEAST and time.perf_counter() >= until


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
    cluster_id: int, request: DispatchRequest, answer: DecisionOut, digest: str, snapshot: Snapshot
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
            # The load the dashboard draws over time (no column of its own: no migration).
            "longest_wait_s": longest_wait(snapshot),
            "utilisation": utilisation(snapshot),
        },
        wall_ms=answer.diagnostics.wall_ms,
    )
