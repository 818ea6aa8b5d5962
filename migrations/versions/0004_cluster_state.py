"""What a cluster's dispatches must keep across a restart: the wait bound's start
guarantees and the bridge holding the writer lease (they were held in memory only, so a
restart broke every guarantee and let a standby bridge take over at once).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28 18:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_state",
        sa.Column(
            "cluster_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("clusters.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("guarantees", sa.JSON(), nullable=False),
        sa.Column("writer", sa.String(length=1024), nullable=True),
        sa.Column("writer_seen", sa.Float(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("cluster_state")
