"""Initial schema: clusters, finished jobs, predictions and the decision audit.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-22 15:28:19.766929
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "decisions",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "cluster_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("snapshot_time", sa.BigInteger(), nullable=False),
        sa.Column("snapshot_digest", sa.String(length=64), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("queued", sa.Integer(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.Column("starts", sa.JSON(), nullable=False),
        sa.Column("extensions", sa.JSON(), nullable=False),
        sa.Column("diagnostics", sa.JSON(), nullable=False),
        sa.Column("wall_ms", sa.Float(), nullable=False),
        sa.Column("snapshot", sa.JSON(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.create_index("ix_decisions_cluster_id", ["cluster_id", "id"], unique=False)

    op.create_table(
        "finished_jobs",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "cluster_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("job_id", sa.String(length=256), nullable=False),
        sa.Column("user_name", sa.String(length=256), nullable=False),
        sa.Column("group_name", sa.String(length=256), nullable=False),
        sa.Column("job_name", sa.String(length=256), nullable=False),
        sa.Column("partition", sa.String(length=256), nullable=False),
        sa.Column("submit_time", sa.BigInteger(), nullable=False),
        sa.Column("start_time", sa.BigInteger(), nullable=False),
        sa.Column("end_time", sa.BigInteger(), nullable=False),
        sa.Column("time_limit", sa.BigInteger(), nullable=False),
        sa.Column("units", sa.Integer(), nullable=False),
        sa.Column("per_unit", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column(
            "received_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("cluster_id", "job_id", name="uq_finished_jobs_cluster_job"),
    )
    with op.batch_alter_table("finished_jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_finished_jobs_cluster_end", ["cluster_id", "end_time", "id"], unique=False
        )

    op.create_table(
        "predictions",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "cluster_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("job_id", sa.String(length=256), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("predictor", sa.String(length=64), nullable=False),
        sa.Column("predicted", sa.BigInteger(), nullable=False),
        sa.Column("made_at", sa.BigInteger(), nullable=False),
        sa.Column("actual", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("cluster_id", "job_id", "kind", name="uq_predictions_cluster_job_kind"),
    )


def downgrade() -> None:
    op.drop_table("predictions")
    with op.batch_alter_table("finished_jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_finished_jobs_cluster_end")

    op.drop_table("finished_jobs")
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.drop_index("ix_decisions_cluster_id")

    op.drop_table("decisions")
    op.drop_table("clusters")
