"""What the service tells of a cluster: its audit trail and what it knows of a job."""

from __future__ import annotations

from typing import Any

from cpsched.core import Job
from cpsched.service.cluster import ClusterRuntime
from cpsched.service.clusters import ClusterRegistry
from cpsched.service.pending import pending
from cpsched.service.shadow import SHADOW_TOLERANCE_S, shadow_verdict
from cpsched.service.store import history
from cpsched.service.store.models import FinishedJobRow
from cpsched.wire.schemas import (
    AuditEntryOut,
    AuditPageOut,
    ExtensionOut,
    JobDecisionOut,
    JobIn,
    JobInfoOut,
    ShadowOutcomeOut,
    StartOut,
)


def audit_page(clusters: ClusterRegistry, cluster: str, after_id: int, limit: int) -> AuditPageOut:
    """The cluster's audit rows after ``after_id``, oldest first."""
    runtime = clusters.existing(cluster)
    if runtime is None:
        return AuditPageOut(entries=[], next_after_id=None)
    with clusters.sessions() as session:
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


JOB_DECISIONS = 50
"""The decisions a job's answer lists, newest first."""


def job_info(clusters: ClusterRegistry, cluster: str, job_id: str) -> JobInfoOut:
    """What the service knows of a job (finished, rejected, running or queued, and why),
    the decisions that concerned it and, in shadow mode, what the workload manager did."""
    runtime = clusters.existing(cluster)
    if runtime is None:
        return JobInfoOut(cluster=cluster, job_id=job_id, state="unknown")
    with clusters.sessions() as session:
        done = history.finished_job(session, runtime.cluster_id, job_id)
        predictions = history.predictions_of(session, runtime.cluster_id, job_id)
        concerned, total = history.job_decisions(session, runtime.cluster_id, job_id, JOB_DECISIONS)
        would_start = history.first_dry_run_start(session, runtime.cluster_id, job_id)
    info = _job_state(runtime, job_id, done)
    latest = predictions[-1] if predictions else None
    shadow = None
    if would_start is not None or (runtime.shadow and info.start is not None):
        shadow = ShadowOutcomeOut(
            would_start=would_start,
            started=info.start,
            verdict=shadow_verdict(would_start, info.start, SHADOW_TOLERANCE_S),
            difference_s=None
            if would_start is None or info.start is None
            else would_start - info.start,
            tolerance_s=SHADOW_TOLERANCE_S,
        )
    return info.model_copy(
        update={
            "predicted_run_time": latest.predicted if latest else None,
            "predictor": latest.predictor if latest else None,
            "prediction_basis": latest.basis if latest else None,
            "decisions": [
                JobDecisionOut(
                    decision_id=d.decision_id, time=d.time, action=d.action, dry_run=d.dry_run
                )
                for d in concerned
            ],
            "decisions_total": total,
            "shadow": shadow,
        }
    )


def _job_state(runtime: ClusterRuntime, job_id: str, done: FinishedJobRow | None) -> JobInfoOut:
    """The job's state and request: finished (stored), else as the last snapshot and
    decision left it."""
    base: dict[str, Any] = {"cluster": runtime.name, "job_id": job_id}
    if done is not None:
        return JobInfoOut(
            **base,
            state="finished",
            user=done.user_name,
            submit=done.submit_time,
            start=done.start_time,
            end=done.end_time,
            time_limit=done.time_limit,
            request={name: done.units * amount for name, amount in done.per_unit.items()},
            partition=done.partition or None,
        )
    with runtime.lock:
        snapshot, decision = runtime.last_snapshot, runtime.last_decision
        held = runtime.held
        rejected = runtime.last_rejected.get(job_id)
        state = runtime.dispatcher_state
        split_wait = state.split_waits.get(job_id) if state is not None else None
        promise = state.guarantees.get(job_id) if state is not None else None
        schedule = state.today_schedule if state is not None else None
        today_start = schedule.started_at.get(job_id) if schedule is not None else None
    if rejected is not None:
        return JobInfoOut(**base, state="rejected", rejected_because=rejected)
    if snapshot is not None:
        for rj in snapshot.running:
            if rj.job.id == job_id:
                return JobInfoOut(
                    **base,
                    **_described(rj.job, held.running.get(job_id) if held else None),
                    state="running",
                    start=rj.start,
                )
        for position, job in enumerate(snapshot.queued):
            if job.id == job_id:
                return JobInfoOut(
                    **base,
                    **_described(job, held.queued.get(job_id) if held else None),
                    state="queued",
                    pending=pending(
                        snapshot,
                        decision,
                        position,
                        split_wait,
                        None if promise is None else promise.start_by,
                        today_start,
                    ),
                )
    return JobInfoOut(**base, state="unknown")


def _described(job: Job, wire: JobIn | None) -> dict[str, Any]:
    """What a job asks for and where, as the last snapshot gave it."""
    return {
        "user": job.user,
        "submit": job.submit,
        "time_limit": job.time_limit,
        "request": {
            name: amount
            for name, amount in zip(job.resource_names, job.request, strict=False)
            if amount
        },
        "partition": job.queue or None,
        "qos": (wire.qos or None) if wire is not None else None,
        "priority": job.priority,
    }
