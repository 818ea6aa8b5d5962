"""What each prediction rests on, in the predictor's words (the job page shows it).
Predictions stored before this revision have none.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29 21:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("predictions", sa.Column("basis", sa.String(length=512), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("predictions") as batch:  # SQLite drops a column by copying
        batch.drop_column("basis")
