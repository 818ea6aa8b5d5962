"""The jobs each audit row started (or would have, in a dry run) or extended, indexed by
job: the job page lists the decisions that concerned a job without reading the whole
audit trail. Audit rows written before this revision are not indexed (their ``starts``
and ``extensions`` stay in the audit trail, ``GET .../decisions``).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29 01:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "decision_jobs",
        sa.Column(
            "decision_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("decisions.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("job_id", sa.String(length=256), primary_key=True),
        sa.Column("action", sa.String(length=16), primary_key=True),
        sa.Column(
            "cluster_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("clusters.id", ondelete="CASCADE"),
            nullable=False,
        ),
    )
    op.create_index(
        "ix_decision_jobs_cluster_job", "decision_jobs", ["cluster_id", "job_id", "decision_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_decision_jobs_cluster_job", table_name="decision_jobs")
    op.drop_table("decision_jobs")
