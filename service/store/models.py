"""Tables: job history (the predictors' memory), predictions, the decision audit (with the
jobs each decision concerned), what a cluster's dispatches must keep across a restart, and
its predictor's latest fitted model.

A job is identified by (cluster, job id) everywhere; the unique constraint on that pair
is what makes finished-job ingestion idempotent under retries and concurrent posts.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# SQLite only auto-increments INTEGER PRIMARY KEY columns; PostgreSQL gets a BIGINT.
Id = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    type_annotation_map = {dict: JSON, list: JSON}  # noqa: RUF012 (SQLAlchemy reads it once)


class Cluster(Base):
    __tablename__ = "clusters"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class FinishedJobRow(Base):
    """One finished job, as the workload manager reported it."""

    __tablename__ = "finished_jobs"
    __table_args__ = (
        UniqueConstraint("cluster_id", "job_id", name="uq_finished_jobs_cluster_job"),
        Index("ix_finished_jobs_cluster_end", "cluster_id", "end_time", "id"),
        # Each user's newest jobs, read without a scan: what last-two is rebuilt from.
        Index("ix_finished_jobs_cluster_user_end", "cluster_id", "user_name", "end_time", "id"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    job_id: Mapped[str] = mapped_column(String(256))
    # As wide as the wire schema's Label (1,024), job ids and user names as its Name and
    # UserName (256: a user name is indexed, and a PostgreSQL index row holds 2,704 bytes).
    user_name: Mapped[str] = mapped_column(String(256), default="")
    group_name: Mapped[str] = mapped_column(String(1024), default="")
    job_name: Mapped[str] = mapped_column(String(1024), default="")
    partition: Mapped[str] = mapped_column(String(1024), default="")
    submit_time: Mapped[int] = mapped_column(BigInteger)
    start_time: Mapped[int] = mapped_column(BigInteger)
    end_time: Mapped[int] = mapped_column(BigInteger)
    time_limit: Mapped[int] = mapped_column(BigInteger)
    units: Mapped[int] = mapped_column(Integer)
    per_unit: Mapped[dict] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(32))
    received_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


BASIS_CHARS = 512
"""The longest prediction basis stored (the predictors' own words: a line, far shorter)."""


class PredictionRow(Base):
    """A prediction made for a job, and (once it finished) how long it really ran."""

    __tablename__ = "predictions"
    __table_args__ = (
        UniqueConstraint("cluster_id", "job_id", "kind", name="uq_predictions_cluster_job_kind"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    job_id: Mapped[str] = mapped_column(String(256))
    kind: Mapped[str] = mapped_column(String(16))
    """``queued`` (first seen in the queue) or ``start`` (when started)."""
    predictor: Mapped[str] = mapped_column(String(64))
    predicted: Mapped[int] = mapped_column(BigInteger)
    made_at: Mapped[int] = mapped_column(BigInteger)
    """The cluster's clock (snapshot time) when the prediction was made."""
    actual: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    basis: Mapped[str | None] = mapped_column(String(BASIS_CHARS), nullable=True)
    """What the prediction rests on, in the predictor's words (None: it does not say)."""


class DecisionRow(Base):
    """The audit trail: one row per dispatch answer, applied or dry run."""

    __tablename__ = "decisions"
    __table_args__ = (Index("ix_decisions_cluster_id", "cluster_id", "id"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    snapshot_time: Mapped[int] = mapped_column(BigInteger)
    snapshot_digest: Mapped[str] = mapped_column(String(64))
    """SHA-256 of the snapshot as parsed (``dry_run`` aside): ties a decision to exactly
    what the bridge sent."""
    dry_run: Mapped[bool] = mapped_column(Boolean)
    queued: Mapped[int] = mapped_column(Integer)
    running: Mapped[int] = mapped_column(Integer)
    starts: Mapped[list] = mapped_column(JSON)
    extensions: Mapped[list] = mapped_column(JSON)
    diagnostics: Mapped[dict] = mapped_column(JSON)
    wall_ms: Mapped[float] = mapped_column(Float)
    snapshot: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class DecisionJobRow(Base):
    """Which jobs an audit row started (a dry run: would have started) or extended, so that
    a job's decisions are read by index rather than by reading every row's ``starts``.
    Deleted with their audit row."""

    __tablename__ = "decision_jobs"
    __table_args__ = (Index("ix_decision_jobs_cluster_job", "cluster_id", "job_id", "decision_id"),)

    decision_id: Mapped[int] = mapped_column(
        Id, ForeignKey("decisions.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    job_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    action: Mapped[str] = mapped_column(String(16), primary_key=True)
    """``start`` or ``extend``."""
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))


class ClusterStateRow(Base):
    """What a cluster's dispatches promised and must keep across a service restart: the
    wait bound's start guarantees with their witness, and the bridge holding the writer
    lease. One row per cluster, written when it changes."""

    __tablename__ = "cluster_state"

    cluster_id: Mapped[int] = mapped_column(
        Id, ForeignKey("clusters.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    guarantees: Mapped[list] = mapped_column(JSON)
    """``{"job", "start_by", "start", "placement": [[node, units], ...], "given"}`` each."""
    writer: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    """The bridge holding the writer lease, if any."""
    writer_seen: Mapped[float | None] = mapped_column(Float, nullable=True)
    """When that bridge last dispatched, in seconds since the epoch (the service's clock:
    a restart turns it back into the lease's time left)."""


class FittedModelRow(Base):
    """A cluster's learned predictor's latest fitted model, so that a restart predicts
    with it at once instead of fitting again. One row per cluster and predictor name,
    replaced by each new fit; the blob is NumPy arrays (``predictor/_windowed.py``)."""

    __tablename__ = "fitted_models"

    cluster_id: Mapped[int] = mapped_column(
        Id, ForeignKey("clusters.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    predictor: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[bytes] = mapped_column(LargeBinary)
    saved_at: Mapped[float] = mapped_column(Float)
    """When it was stored, in seconds since the epoch (the service's clock)."""
