"""Read-only queries behind the operator's dashboard (``/ui/``).

Each one is bounded (a page, or the newest N rows by the primary-key index), so a page
costs the same on a day-old database and on a year-old one, and each reads only the
columns it shows: the fallback flag and reason are read out of the diagnostics JSON by
the database, not by loading every audit row's starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session, load_only

from cpsched.service.store.database import in_list
from cpsched.service.store.models import Cluster, DecisionRow, FinishedJobRow, PredictionRow

SERIES_ROWS = 20_000
"""The newest audit rows the latency and fallback charts are drawn from."""
SEEN_ROWS = 50_000
"""The newest queued jobs the shadow comparison looks at."""

_FALLBACK = DecisionRow.diagnostics["fallback"].as_boolean()
_REASON = DecisionRow.diagnostics["fallback_reason"].as_string()
_LONGEST_WAIT = DecisionRow.diagnostics["longest_wait_s"].as_integer()
_UTILISATION = DecisionRow.diagnostics["utilisation"]


def cluster_id_of(session: Session, name: str) -> int | None:
    """The id of a stored cluster (None if the service has never heard of it: the
    dashboard does not create clusters)."""
    return session.scalar(select(Cluster.id).where(Cluster.name == name))


def decision_page(
    session: Session,
    cluster: int,
    *,
    before_id: int | None = None,
    fallbacks_only: bool = False,
    limit: int = 100,
) -> list[DecisionRow]:
    """Audit rows of ``cluster``, newest first, older than ``before_id`` when given; only
    those the fallback answered for with ``fallbacks_only``. Whole snapshots are not read."""
    query = (
        select(DecisionRow)
        .options(load_only(*_LOG_COLUMNS))
        .where(DecisionRow.cluster_id == cluster)
        .order_by(DecisionRow.id.desc())
        .limit(limit)
    )
    if before_id is not None:
        query = query.where(DecisionRow.id < before_id)
    if fallbacks_only:
        query = query.where(_FALLBACK.is_(True))
    return list(session.scalars(query))


def decision_of(session: Session, cluster: int, decision_id: int) -> DecisionRow | None:
    """One audit row of ``cluster`` (its snapshot left unread), or None."""
    query = (
        select(DecisionRow)
        .options(load_only(*_LOG_COLUMNS))
        .where(DecisionRow.cluster_id == cluster, DecisionRow.id == decision_id)
    )
    return session.scalars(query).first()


_LOG_COLUMNS = (
    DecisionRow.id,
    DecisionRow.snapshot_time,
    DecisionRow.dry_run,
    DecisionRow.queued,
    DecisionRow.running,
    DecisionRow.starts,
    DecisionRow.extensions,
    DecisionRow.diagnostics,
    DecisionRow.wall_ms,
    DecisionRow.created_at,
)


@dataclass(frozen=True, slots=True)
class DecisionPoint:
    """One dispatch answer, as the latency and fallback charts need it."""

    time: int
    """The cluster's clock (the snapshot's time)."""
    wall_ms: float
    fallback: bool
    reason: str | None
    queued: int = 0
    """Queued jobs in its snapshot."""
    running: int = 0
    """Running jobs in its snapshot."""
    longest_wait_s: int | None = None
    """The longest current wait of a job cpsched may start (None: a row from before
    rows kept it)."""
    utilisation: dict[str, float] = field(default_factory=dict)
    """Share of each resource type's capacity in use (empty: a row from before)."""


def decision_series(
    session: Session, cluster: int, limit: int = SERIES_ROWS
) -> list[DecisionPoint]:
    """The newest ``limit`` answers of ``cluster`` (time, latency, fallback, queue and
    running jobs, utilisation and longest wait), oldest first."""
    rows = session.execute(
        select(
            DecisionRow.snapshot_time,
            DecisionRow.wall_ms,
            _FALLBACK,
            _REASON,
            DecisionRow.queued,
            DecisionRow.running,
            _LONGEST_WAIT,
            _UTILISATION,
        )
        .where(DecisionRow.cluster_id == cluster)
        .order_by(DecisionRow.id.desc())
        .limit(limit)
    )
    points = [
        DecisionPoint(
            int(t),
            float(ms),
            bool(fallback),
            reason,
            int(queued),
            int(running),
            None if waited is None else int(waited),
            used if isinstance(used, dict) else {},
        )
        for t, ms, fallback, reason, queued, running, waited, used in rows
    ]
    points.reverse()
    return points


@dataclass(frozen=True, slots=True)
class FinishedWait:
    start: int
    wait: int
    run: int


def finished_waits(
    session: Session, cluster: int, since: int, limit: int = SERIES_ROWS
) -> list[FinishedWait]:
    """The newest ``limit`` jobs of ``cluster`` that ended at or after ``since`` (cluster
    time): when each started, how long it had waited and ran. Read by the (cluster, end
    time) index."""
    rows = session.execute(
        select(FinishedJobRow.submit_time, FinishedJobRow.start_time, FinishedJobRow.end_time)
        .where(FinishedJobRow.cluster_id == cluster, FinishedJobRow.end_time >= since)
        .order_by(FinishedJobRow.end_time.desc(), FinishedJobRow.id.desc())
        .limit(limit)
    )
    return [
        FinishedWait(int(start), max(0, int(start) - int(submit)), max(0, int(end) - int(start)))
        for submit, start, end in rows
    ]


@dataclass(frozen=True, slots=True)
class Outcome:
    """A start prediction and the run time it turned out to be."""

    job_id: str
    predictor: str
    predicted: int
    actual: int
    made_at: int
    """The cluster's clock when the job started (when the prediction was made)."""


def prediction_outcomes(session: Session, cluster: int, limit: int = 5000) -> list[Outcome]:
    """The newest ``limit`` finished jobs' start predictions with their real run times,
    in the order they started."""
    rows = session.execute(
        select(
            PredictionRow.job_id,
            PredictionRow.predictor,
            PredictionRow.predicted,
            PredictionRow.actual,
            PredictionRow.made_at,
        )
        .where(
            PredictionRow.cluster_id == cluster,
            PredictionRow.kind == "start",
            PredictionRow.actual.is_not(None),
        )
        .order_by(PredictionRow.id.desc())
        .limit(limit)
    )
    outcomes = [
        Outcome(job_id, predictor, predicted, actual, made_at)
        for job_id, predictor, predicted, actual, made_at in rows
        if actual is not None  # (the query's filter; for the type checker)
    ]
    outcomes.sort(key=lambda o: o.made_at)
    return outcomes


@dataclass(frozen=True, slots=True)
class ShadowRecord:
    """What shadow mode's dry runs and the finished jobs say about when jobs started."""

    would_start: dict[str, int]
    """Each job's first dry-run answer that would have started it: the snapshot's time."""
    seen_queued: dict[str, int]
    """Jobs seen waiting while dry runs were answered: when first seen."""
    slurm_start: dict[str, int]
    """When the workload manager really started each of those jobs that has finished."""
    first: int | None
    last: int | None
    """The span of the dry runs read (the cluster's clock)."""


def shadow_record(session: Session, cluster: int, limit: int = SERIES_ROWS) -> ShadowRecord:
    """The newest ``limit`` dry-run answers of ``cluster`` and the real starts of the jobs
    they saw (empty when the cluster has had no dry run)."""
    rows = session.execute(
        select(DecisionRow.snapshot_time, DecisionRow.starts)
        .where(DecisionRow.cluster_id == cluster, DecisionRow.dry_run.is_(True))
        .order_by(DecisionRow.id.desc())
        .limit(limit)
    ).all()
    if not rows:
        return ShadowRecord({}, {}, {}, None, None)
    would_start: dict[str, int] = {}
    for t, starts in reversed(rows):
        for start in starts:
            would_start.setdefault(start["job_id"], int(t))
    first, last = min(int(t) for t, _ in rows), max(int(t) for t, _ in rows)
    # (Results have keys(): dict() would take them for a mapping, hence the comprehensions.)
    seen = {
        job_id: made_at
        for job_id, made_at in session.execute(
            select(PredictionRow.job_id, PredictionRow.made_at)
            .where(
                PredictionRow.cluster_id == cluster,
                PredictionRow.kind == "queued",
                PredictionRow.made_at >= first,
                PredictionRow.made_at <= last,
            )
            .order_by(PredictionRow.id.desc())
            .limit(SEEN_ROWS)
        )
    }
    return ShadowRecord(
        would_start=would_start,
        seen_queued=seen,
        slurm_start=real_starts(session, cluster, sorted(set(seen) | set(would_start))),
        first=first,
        last=last,
    )


def real_starts(session: Session, cluster: int, job_ids: Sequence[str]) -> dict[str, int]:
    """When each of these jobs started, for those that have finished."""
    found: dict[str, int] = {}
    for i in range(0, len(job_ids), 1000):  # bounded IN lists
        chunk = list(job_ids[i : i + 1000])
        rows = session.execute(
            select(FinishedJobRow.job_id, FinishedJobRow.start_time).where(
                FinishedJobRow.cluster_id == cluster, FinishedJobRow.job_id.in_(in_list(chunk))
            )
        )
        found.update((job_id, start) for job_id, start in rows)
    return found
