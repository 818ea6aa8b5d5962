"""An index on each user's finished jobs by end time: a restart rebuilds last-two from
each user's two newest jobs, read by index, instead of replaying the whole history (which
took 116 s at 1.9 million jobs).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 12:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_finished_jobs_cluster_user_end",
        "finished_jobs",
        ["cluster_id", "user_name", "end_time", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_finished_jobs_cluster_user_end", table_name="finished_jobs")
