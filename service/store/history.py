"""The queries the service makes: clusters, finished jobs, predictions, audit rows, and
what a cluster keeps across a restart.

Every function takes an open session and leaves committing to the caller, which decides
what one transaction holds (a dispatch's predictions and audit row; a slice of a batch of
finished jobs).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from sqlalchemy import Insert, Row, Table, bindparam, case, func, insert, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from cpsched.predictor.base import Memory
from cpsched.service.store.database import in_list
from cpsched.service.store.models import (
    BASIS_CHARS,
    Cluster,
    ClusterStateRow,
    DecisionJobRow,
    DecisionRow,
    FinishedJobRow,
    FittedModelRow,
    PredictionRow,
)
from cpsched.wire.schemas import FinishedJobIn


def _insert_ignoring_duplicates(session: Session, model: type[Any]) -> Insert:
    """INSERT ... ON CONFLICT DO NOTHING: a concurrent writer of the same key is not an
    error. Executed with a list of rows: executemany with one cached statement (a
    multi-row VALUES would be compiled anew for every batch size). Into the mapped class's
    table, not through the ORM: its bulk insert spent ~6 µs a row on bookkeeping no
    caller reads (thousands of predictions a call on a busy machine)."""
    dialect = session.get_bind().dialect.name
    module = postgresql if dialect == "postgresql" else sqlite
    return module.insert(cast(Table, model.__table__)).on_conflict_do_nothing()


def find_cluster(session: Session, name: str) -> int | None:
    """The id of cluster ``name``, None if it was never written to."""
    return session.scalar(select(Cluster.id).where(Cluster.name == name))


def cluster_id(session: Session, name: str) -> int:
    """The id of cluster ``name``, created on first use."""
    found = find_cluster(session, name)
    if found is not None:
        return found
    session.execute(_insert_ignoring_duplicates(session, Cluster), [{"name": name}])
    return session.scalar(select(Cluster.id).where(Cluster.name == name))  # type: ignore[return-value]


def cluster_names(session: Session) -> list[str]:
    return list(session.scalars(select(Cluster.name).order_by(Cluster.id)))


@dataclass(frozen=True, slots=True)
class Stored:
    new: list[FinishedJobIn]
    """The jobs this call stored, in the order given (duplicates left out)."""
    duplicates: int


def store_finished(session: Session, cluster: int, jobs: Sequence[FinishedJobIn]) -> Stored:
    """Store the jobs not already known; a job seen before (or twice in ``jobs``) is
    counted as a duplicate and not stored again.

    One INSERT ... ON CONFLICT DO NOTHING RETURNING for the batch: what it returns is what
    this call stored, so a concurrent writer of the same job is no error and no retry."""
    unique: dict[str, FinishedJobIn] = {}
    for job in jobs:
        unique.setdefault(job.id, job)
    new: list[FinishedJobIn] = []
    if unique:
        statement = _insert_ignoring_duplicates(session, FinishedJobRow).returning(
            FinishedJobRow.job_id
        )
        stored = set(session.scalars(statement, [_row(cluster, job) for job in unique.values()]))
        new = [job for job_id, job in unique.items() if job_id in stored]
    if new:
        # One executemany for the batch: ingestion rate is what a busy cluster needs.
        # (Core statement: the ORM would insist on an UPDATE by primary key.)
        predictions = cast(Table, PredictionRow.__table__)
        session.execute(
            update(predictions)
            .where(predictions.c.cluster_id == cluster, predictions.c.job_id == bindparam("jid"))
            .values(actual=bindparam("run")),
            [{"jid": job.id, "run": job.end - job.start} for job in new],
        )
    return Stored(new=new, duplicates=len(jobs) - len(new))


def _row(cluster: int, job: FinishedJobIn) -> dict[str, Any]:
    return {
        "cluster_id": cluster,
        "job_id": job.id,
        "user_name": job.user,
        "group_name": job.group,
        "job_name": job.name,
        "partition": job.partition,
        "submit_time": job.submit,
        "start_time": job.start,
        "end_time": job.end,
        "time_limit": job.time_limit,
        "units": job.units,
        "per_unit": dict(job.per_unit),
        "state": job.state,
    }


_FINISHED = cast(Table, FinishedJobRow.__table__)
_LEARNT = select(*(c for c in _FINISHED.c if c.name not in {"cluster_id", "received_at"}))
"""What a predictor learns a finished job from: the columns of ``finished_jobs`` but its
cluster and when it was received."""


def history(session: Session, cluster: int, batch: int = 5000) -> Iterator[Row[Any]]:
    """Every finished job of ``cluster`` in the order they ended (rows with the columns
    of :data:`_LEARNT`)."""
    query = (
        _LEARNT.where(_FINISHED.c.cluster_id == cluster)
        .order_by(_FINISHED.c.end_time, _FINISHED.c.id)
        .execution_options(yield_per=batch)
    )
    yield from session.execute(query)


_USERS = text(
    # A skip scan: one index seek per user, however many jobs each has.
    "WITH RECURSIVE u(name) AS ("
    " SELECT MIN(user_name) FROM finished_jobs WHERE cluster_id = :cluster"
    " UNION ALL"
    " SELECT (SELECT MIN(f.user_name) FROM finished_jobs f"
    "  WHERE f.cluster_id = :cluster AND f.user_name > u.name)"
    " FROM u WHERE u.name IS NOT NULL"
    ") SELECT name FROM u WHERE name IS NOT NULL"
)


def users(session: Session, cluster: int) -> list[str]:
    """Every user with a finished job in ``cluster``, read from the user index."""
    return list(session.scalars(_USERS, {"cluster": cluster}))


def remembered(session: Session, cluster: int, memory: Memory) -> list[Row[Any]]:
    """The finished jobs a predictor with ``memory`` learns from, in the order they ended:
    each user's ``per_user`` newest and the ``recent`` newest overall, each read by index,
    so that a restart costs what the predictor remembers, not the whole history.

    Plain rows (the columns of :data:`_LEARNT`), not ORM objects: a restart reads
    100,000 of them (AdaBoost's window and each user's newest), which the ORM's identity
    map and instrumentation made twice as slow."""
    if memory.per_user is None or memory.recent is None:
        return list(history(session, cluster))
    jobs = _FINISHED.c
    newest_first = (jobs.end_time.desc(), jobs.id.desc())
    of_cluster = _LEARNT.where(jobs.cluster_id == cluster)
    found: dict[int, Row[Any]] = {}
    if memory.recent:
        query = of_cluster.order_by(*newest_first).limit(memory.recent)
        found.update((row.id, row) for row in session.execute(query))
    if memory.per_user:
        per_user = (
            of_cluster.where(jobs.user_name == bindparam("user"))
            .order_by(*newest_first)
            .limit(memory.per_user)
        )
        for user in users(session, cluster):
            found.update((row.id, row) for row in session.execute(per_user, {"user": user}))
    return sorted(found.values(), key=lambda row: (row.end_time, row.id))


def finished_job(session: Session, cluster: int, job_id: str) -> FinishedJobRow | None:
    return session.scalar(
        select(FinishedJobRow).where(
            FinishedJobRow.cluster_id == cluster, FinishedJobRow.job_id == job_id
        )
    )


@dataclass(frozen=True, slots=True)
class Prediction:
    job_id: str
    kind: str
    predictor: str
    predicted: int
    made_at: int
    basis: str | None = None


def record_predictions(session: Session, cluster: int, predictions: Iterable[Prediction]) -> None:
    rows = [
        {
            "cluster_id": cluster,
            "job_id": p.job_id,
            "kind": p.kind,
            "predictor": p.predictor,
            "predicted": p.predicted,
            "made_at": p.made_at,
            "basis": None if p.basis is None else p.basis[:BASIS_CHARS],
        }
        for p in predictions
    ]
    if rows:
        session.execute(_insert_ignoring_duplicates(session, PredictionRow), rows)


def predictions_of(session: Session, cluster: int, job_id: str) -> list[PredictionRow]:
    return list(
        session.scalars(
            select(PredictionRow)
            .where(PredictionRow.cluster_id == cluster, PredictionRow.job_id == job_id)
            .order_by(PredictionRow.id)
        )
    )


@dataclass(frozen=True, slots=True)
class ErrorCounts:
    """A histogram of |real - predicted at start|: counts at or below each bound
    (cumulative, as Prometheus reports them), how many there are, and their sum."""

    at_most: tuple[int, ...]
    count: int
    total: float


def start_prediction_errors(
    session: Session, cluster: int, bounds: Sequence[float]
) -> dict[str, ErrorCounts]:
    """The histogram of every finished job's start-prediction error, by predictor, summed
    by the database in one pass (what the error metric is rebuilt from after a restart:
    observing millions of values one by one took seconds)."""
    error = func.abs(PredictionRow.actual - PredictionRow.predicted)
    rows = session.execute(
        select(
            PredictionRow.predictor,
            func.count(),
            func.coalesce(func.sum(error), 0),
            *(func.sum(case((error <= bound, 1), else_=0)) for bound in bounds),
        )
        .where(
            PredictionRow.cluster_id == cluster,
            PredictionRow.kind == "start",
            PredictionRow.actual.is_not(None),
        )
        .group_by(PredictionRow.predictor)
    )
    return {
        predictor: ErrorCounts(tuple(int(n) for n in at_most), int(count), float(total))
        for predictor, count, total, *at_most in rows
    }


def start_predictions(session: Session, cluster: int, job_ids: Sequence[str]) -> dict[str, int]:
    """Predictions made when these jobs started (to rebuild durations after a restart)."""
    if not job_ids:
        return {}
    rows = session.execute(
        select(PredictionRow.job_id, PredictionRow.predicted).where(
            PredictionRow.cluster_id == cluster,
            PredictionRow.kind == "start",
            PredictionRow.job_id.in_(in_list(job_ids)),
        )
    )
    return {job_id: predicted for job_id, predicted in rows}


def record_decision(session: Session, row: DecisionRow) -> int:
    """Store an audit row and index the jobs it started or extended; its id."""
    session.add(row)
    session.flush()
    concerned = {(s["job_id"], "start") for s in row.starts}
    concerned |= {(e["job_id"], "extend") for e in row.extensions}
    if concerned:  # one executemany: an ORM object per start cost 50 µs each
        keys = {"decision_id": row.id, "cluster_id": row.cluster_id}
        session.execute(
            insert(cast(Table, DecisionJobRow.__table__)),
            [{**keys, "job_id": job, "action": action} for job, action in sorted(concerned)],
        )
    return row.id


Action = Literal["start", "extend"]


@dataclass(frozen=True, slots=True)
class JobDecision:
    decision_id: int
    time: int
    action: Action
    dry_run: bool


def job_decisions(
    session: Session, cluster: int, job_id: str, limit: int
) -> tuple[list[JobDecision], int]:
    """The newest ``limit`` decisions that started (or would have) or extended a job,
    newest first, and how many there are in all (index reads)."""
    rows = session.execute(
        select(
            DecisionRow.id, DecisionRow.snapshot_time, DecisionJobRow.action, DecisionRow.dry_run
        )
        .join(DecisionRow, DecisionRow.id == DecisionJobRow.decision_id)
        .where(DecisionJobRow.cluster_id == cluster, DecisionJobRow.job_id == job_id)
        .order_by(DecisionJobRow.decision_id.desc(), DecisionJobRow.action)
        .limit(limit)
    ).all()
    total = session.scalar(
        select(func.count())
        .select_from(DecisionJobRow)
        .where(DecisionJobRow.cluster_id == cluster, DecisionJobRow.job_id == job_id)
    )
    found = [JobDecision(int(i), int(t), cast(Action, a), bool(d)) for i, t, a, d in rows]
    return found, int(total or 0)


def first_dry_run_start(session: Session, cluster: int, job_id: str) -> int | None:
    """The snapshot time of the first dry run that would have started the job."""
    return session.scalar(
        select(func.min(DecisionRow.snapshot_time))
        .join(DecisionJobRow, DecisionRow.id == DecisionJobRow.decision_id)
        .where(
            DecisionJobRow.cluster_id == cluster,
            DecisionJobRow.job_id == job_id,
            DecisionJobRow.action == "start",
            DecisionRow.dry_run.is_(True),
        )
    )


def decisions(session: Session, cluster: int, after_id: int, limit: int) -> list[DecisionRow]:
    """Audit rows of ``cluster`` with id > ``after_id``, oldest first."""
    return list(
        session.scalars(
            select(DecisionRow)
            .where(DecisionRow.cluster_id == cluster, DecisionRow.id > after_id)
            .order_by(DecisionRow.id)
            .limit(limit)
        )
    )


def cluster_state(session: Session, cluster: int) -> ClusterStateRow | None:
    """What the cluster's dispatches must keep across a restart, if it was ever stored."""
    return session.get(ClusterStateRow, cluster)


def save_cluster_state(
    session: Session,
    cluster: int,
    guarantees: list[dict[str, Any]],
    writer: str | None,
    writer_seen: float | None,
) -> None:
    """Store (or replace) the cluster's row of what must survive a restart."""
    session.merge(
        ClusterStateRow(
            cluster_id=cluster, guarantees=guarantees, writer=writer, writer_seen=writer_seen
        )
    )


def fitted_model(session: Session, cluster: int, predictor: str) -> bytes | None:
    """The cluster's stored model of ``predictor``, if one was ever stored."""
    row = session.get(FittedModelRow, (cluster, predictor))
    return None if row is None else row.model


def save_fitted_model(
    session: Session, cluster: int, predictor: str, model: bytes, saved_at: float
) -> None:
    """Store (or replace) the cluster's model of ``predictor``."""
    session.merge(
        FittedModelRow(cluster_id=cluster, predictor=predictor, model=model, saved_at=saved_at)
    )
