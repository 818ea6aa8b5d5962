"""History kept for a set time per kind, pruned in small batches off the request path.

Each kind is kept for its own number of days of the *cluster's* clock (the latest
snapshot or finished job the service stored for it), not the service's: a replay over
HTTP, whose times are years old, keeps its history as a live cluster would. Rows go in
batches of ``batch_rows``, each its own short transaction, oldest first, so that a
prune never holds a lock a dispatch would wait on for long.

* ``decisions`` (the audit trail): by snapshot time.
* ``predictions``: by the time they were made.
* ``finished_jobs``: by end time, but never what the cluster's predictor learns from on a
  restart (each user's newest jobs and the newest overall: its
  :class:`~cpsched.predictor.base.Memory`); a predictor that remembers everything keeps
  every job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import ColumnElement, Table, delete, func, select, text, tuple_
from sqlalchemy.orm import Session

from cpsched.predictor.base import Memory
from cpsched.service.store.database import in_list
from cpsched.service.store.models import (
    Cluster,
    ClusterStateRow,
    DecisionRow,
    FinishedJobRow,
    FittedModelRow,
    PredictionRow,
)

DAY_S = 86_400
_DECISIONS = cast(Table, DecisionRow.__table__)
_PREDICTIONS = cast(Table, PredictionRow.__table__)
_FINISHED = cast(Table, FinishedJobRow.__table__)
_CLUSTERS = cast(Table, Cluster.__table__)
_KEPT = cast(Table, ClusterStateRow.__table__)
_MODELS = cast(Table, FittedModelRow.__table__)
KINDS = ("decisions", "predictions", "finished_jobs")


def cluster_clock(session: Session, cluster: int) -> int | None:
    """The cluster's latest time the database knows: its newest audit row's snapshot
    time or its latest finished job's end, whichever is later (index reads only)."""
    newest_decision = session.scalar(
        select(_DECISIONS.c.snapshot_time)
        .where(_DECISIONS.c.cluster_id == cluster)
        .order_by(_DECISIONS.c.id.desc())
        .limit(1)
    )
    latest_end = session.scalar(
        select(func.max(_FINISHED.c.end_time)).where(_FINISHED.c.cluster_id == cluster)
    )
    known = [t for t in (newest_decision, latest_end) if t is not None]
    return max(known) if known else None


def _delete_ids(session: Session, table: Table, ids: list[int]) -> int:
    if ids:
        session.execute(delete(table).where(table.c.id.in_(in_list(ids))))
    return len(ids)


def _delete_oldest(
    session: Session, table: Table, cluster: int, batch: int, *older: ColumnElement[bool]
) -> int:
    """Delete up to ``batch`` of the cluster's oldest rows of ``table`` (by id) that
    match ``older``; how many went."""
    ids = session.scalars(
        select(table.c.id)
        .where(table.c.cluster_id == cluster, *older)
        .order_by(table.c.id)
        .limit(batch)
    ).all()
    return _delete_ids(session, table, list(ids))


def prune_decisions(session: Session, cluster: int, before: int, batch: int) -> int:
    """Delete up to ``batch`` of the cluster's oldest audit rows older than ``before``."""
    return _delete_oldest(session, _DECISIONS, cluster, batch, _DECISIONS.c.snapshot_time < before)


def prune_predictions(session: Session, cluster: int, before: int, batch: int) -> int:
    """Delete up to ``batch`` of the cluster's predictions made before ``before``."""
    return _delete_oldest(session, _PREDICTIONS, cluster, batch, _PREDICTIONS.c.made_at < before)


def prune_finished(session: Session, cluster: int, before: int, batch: int, memory: Memory) -> int:
    """Delete up to ``batch`` of the cluster's finished jobs that ended before ``before``
    and that a predictor with ``memory`` does not learn from on a restart."""
    if memory.per_user is None or memory.recent is None:
        return 0  # it learns from every job: none may go
    jobs = _FINISHED.alias("f")
    newer = _FINISHED.alias("g")
    query = select(jobs.c.id).where(jobs.c.cluster_id == cluster, jobs.c.end_time < before)
    if memory.recent:
        floor = session.execute(
            select(_FINISHED.c.end_time, _FINISHED.c.id)
            .where(_FINISHED.c.cluster_id == cluster)
            .order_by(_FINISHED.c.end_time.desc(), _FINISHED.c.id.desc())
            .offset(memory.recent - 1)
            .limit(1)
        ).first()
        if floor is None:
            return 0  # fewer jobs than it remembers
        query = query.where(tuple_(jobs.c.end_time, jobs.c.id) < tuple_(*floor))
    if memory.per_user:
        users_newest = (
            select(newer.c.id)
            .where(newer.c.cluster_id == cluster, newer.c.user_name == jobs.c.user_name)
            .order_by(newer.c.end_time.desc(), newer.c.id.desc())
            .limit(memory.per_user)
        )
        query = query.where(jobs.c.id.not_in(users_newest))
    ids = session.scalars(query.order_by(jobs.c.end_time, jobs.c.id).limit(batch)).all()
    return _delete_ids(session, _FINISHED, list(ids))


def delete_cluster(sessions: Any, cluster: int, batch: int) -> dict[str, int]:
    """Every row of ``cluster``, deleted in batches (a transaction each), then the
    cluster itself: rows deleted per table."""
    deleted = dict.fromkeys(KINDS, 0)
    for kind, table in zip(KINDS, (_DECISIONS, _PREDICTIONS, _FINISHED), strict=True):
        while True:
            with sessions.begin() as session:
                gone = _delete_oldest(session, table, cluster, batch)
            deleted[kind] += gone
            if gone < batch:
                break
    with sessions.begin() as session:
        session.execute(delete(_KEPT).where(_KEPT.c.cluster_id == cluster))
        session.execute(delete(_MODELS).where(_MODELS.c.cluster_id == cluster))
        session.execute(delete(_CLUSTERS).where(_CLUSTERS.c.id == cluster))
    return deleted


def oldest(session: Session, cluster: int) -> dict[str, int | None]:
    """The cluster time of each kind's oldest row."""
    return {
        "decisions": session.scalar(
            select(_DECISIONS.c.snapshot_time)
            .where(_DECISIONS.c.cluster_id == cluster)
            .order_by(_DECISIONS.c.id)
            .limit(1)
        ),
        "predictions": session.scalar(
            select(func.min(_PREDICTIONS.c.made_at)).where(_PREDICTIONS.c.cluster_id == cluster)
        ),
        "finished_jobs": session.scalar(
            select(func.min(_FINISHED.c.end_time)).where(_FINISHED.c.cluster_id == cluster)
        ),
    }


def database_bytes(session: Session) -> int:
    """The database's size on disk: SQLite's pages in use (freed pages are reused, the
    file does not shrink), PostgreSQL's ``pg_database_size``."""
    if session.get_bind().dialect.name == "postgresql":
        return int(session.scalar(text("SELECT pg_database_size(current_database())")) or 0)
    pages = int(session.scalar(text("PRAGMA page_count")) or 0)
    free = int(session.scalar(text("PRAGMA freelist_count")) or 0)
    return (pages - free) * int(session.scalar(text("PRAGMA page_size")) or 0)


@dataclass
class PruneReport:
    """What one pass deleted, per kind, and what it found of each cluster."""

    deleted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    oldest: dict[str, dict[str, int | None]] = field(default_factory=dict)
    """cluster → kind → the cluster time of its oldest row."""


def prune_cluster(
    sessions: Callable[[], Any],
    cluster: int,
    keep_days: dict[str, float | None],
    batch: int,
    memory: Memory,
    report: PruneReport,
    name: str,
) -> None:
    """One cluster's pass: each kind in batches (a transaction each) until none is left."""
    with sessions() as session:
        now = cluster_clock(session, cluster)
    if now is None:
        return
    pruners: dict[str, Callable[[Session, int], int]] = {
        "decisions": lambda s, before: prune_decisions(s, cluster, before, batch),
        "predictions": lambda s, before: prune_predictions(s, cluster, before, batch),
        "finished_jobs": lambda s, before: prune_finished(s, cluster, before, batch, memory),
    }
    for kind, prune in pruners.items():
        days = keep_days.get(kind)
        if days is None:
            continue
        before = now - int(days * DAY_S)
        while True:
            with sessions.begin() as session:  # type: ignore[attr-defined]
                gone = prune(session, before)
            report.deleted[kind] += gone
            if gone < batch:
                break
    with sessions() as session:
        report.oldest[name] = oldest(session, cluster)
