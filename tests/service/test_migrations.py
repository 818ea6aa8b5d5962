"""Alembic migrations: up, down and up again on both databases; refusal to start on an
out-of-date schema."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from cpsched.errors import ConfigError
from cpsched.service.app import create_app
from cpsched.service.store import migrate
from cpsched.service.store.database import make_engine
from cpsched.service.store.models import Base
from tests.service.conftest import settings_for

TABLES = {"clusters", "finished_jobs", "predictions", "decisions"}


def tables(engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_round_trip(database_url):
    engine = make_engine(database_url)
    assert migrate.current_revision(engine) is None
    migrate.upgrade(engine)
    assert migrate.is_current(engine)
    assert tables(engine) == TABLES
    migrate.downgrade(engine, "base")
    assert tables(engine) == set()
    assert migrate.current_revision(engine) is None
    migrate.upgrade(engine)
    assert tables(engine) == TABLES


def test_migrations_match_the_models(database_url):
    """What the migrations create is what the models declare (no forgotten migration)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(database_url)
    migrate.upgrade(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_service_refuses_an_out_of_date_schema(database_url):
    with pytest.raises(ConfigError, match="cpsched db upgrade"):
        create_app(settings_for(database_url, upgrade_on_start=False))
    migrate.upgrade(make_engine(database_url))
    create_app(settings_for(database_url, upgrade_on_start=False))
