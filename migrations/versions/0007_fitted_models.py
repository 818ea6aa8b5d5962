"""A learned predictor's latest fitted model, kept across a restart (the restart refitted
it from the rebuilt history: seconds of CPU, and predictions from last-two meanwhile).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 03:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fitted_models",
        sa.Column(
            "cluster_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("clusters.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("predictor", sa.String(length=64), primary_key=True),
        sa.Column("model", sa.LargeBinary(), nullable=False),
        sa.Column("saved_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("fitted_models")
