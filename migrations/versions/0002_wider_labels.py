"""Finished jobs' group, job and partition names take 1,024 characters, as the wire
schema allows (they were 256: PostgreSQL refused a longer name with a 500). User names
stay at 256, the schema's bound for them (they are indexed: see 0003).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

COLUMNS = ("group_name", "job_name", "partition")


def upgrade() -> None:
    with op.batch_alter_table("finished_jobs") as batch:
        for column in COLUMNS:
            batch.alter_column(
                column, type_=sa.String(length=1024), existing_type=sa.String(length=256)
            )


def downgrade() -> None:
    # Longer names are cut to 256 characters (PostgreSQL would refuse them otherwise).
    postgres = op.get_bind().dialect.name == "postgresql"
    with op.batch_alter_table("finished_jobs") as batch:
        for column in COLUMNS:
            batch.alter_column(
                column,
                type_=sa.String(length=256),
                existing_type=sa.String(length=1024),
                postgresql_using=f'left("{column}", 256)' if postgres else None,
            )
