"""Finished jobs in: each checked on its own, stored in slices, then learnt."""

from __future__ import annotations

import logging
import time

from pydantic import TypeAdapter, ValidationError

from cpsched.runtime.length_class import length_class
from cpsched.service.cluster import ClusterRuntime
from cpsched.service.clusters import ClusterRegistry
from cpsched.service.store import history
from cpsched.wire.schemas import (
    FinishedAck,
    FinishedBatchIn,
    FinishedJobIn,
    Name,
    RefusedFinishedOut,
    shown,
)

log = logging.getLogger(__name__)

FINISHED_SLICE = 500
"""Finished jobs stored per transaction and learnt per hold of the cluster's lock."""

FUTURE_TOLERANCE_S = 86400
"""How far past the latest time it knows the service believes a finished job's end."""


def store_finished(clusters: ClusterRegistry, cluster: str, batch: FinishedBatchIn) -> FinishedAck:
    """Store the batch's valid jobs; each invalid one is refused on its own, with why.

    The jobs go in slices of :data:`FINISHED_SLICE`, in the order they ended, each
    committed in a transaction of its own and then learnt under the cluster's lock,
    which is held for that alone: a dispatch waits for one slice at most, never for a
    whole 10,000-job batch. The answer comes after the last commit; a crash before it
    leaves the earlier slices stored, and the bridge's retry counts them as duplicates.
    """
    runtime = clusters.runtime(cluster)
    jobs, refused = _checked_finished(batch, _latest_believable(runtime))
    if refused:
        clusters.metrics.finished.labels(cluster, "refused").inc(len(refused))
        log.warning(
            "finished jobs refused",
            extra={"cluster": cluster, "refused": [r.job_id for r in refused][:20]},
        )
    jobs.sort(key=lambda j: (j.end, j.start))
    stored = duplicates = 0
    for at in range(0, len(jobs), FINISHED_SLICE):
        part = jobs[at : at + FINISHED_SLICE]
        with clusters.sessions.begin() as session:
            done = history.store_finished(session, runtime.cluster_id, part)
        # Committed: now (and only now) the predictor may learn from them.
        with runtime.lock:
            for job in done.new:
                clusters.metrics.job_wait.labels(
                    cluster, length_class(job.end - job.start)
                ).observe(max(0, job.start - job.submit))
                predicted = runtime.book.start_of(job.id)
                if predicted is not None:
                    clusters.metrics.prediction_error.labels(
                        cluster, runtime.predictor.name
                    ).observe(abs(job.end - job.start - predicted))
            runtime.observe(done.new)
        clusters.store_model(runtime)  # a background fit ended since the last slice
        stored += len(done.new)
        duplicates += done.duplicates
    clusters.metrics.finished.labels(cluster, "stored").inc(stored)
    clusters.metrics.finished.labels(cluster, "duplicate").inc(duplicates)
    return FinishedAck(stored=stored, duplicates=duplicates, refused=refused)


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
