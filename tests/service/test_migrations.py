"""Alembic migrations: up, down and up again on both databases; refusal to start on an
out-of-date schema."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from cpsched.errors import ConfigError
from cpsched.service.app import create_app
from cpsched.service.store import migrate
from cpsched.service.store.database import make_engine
from cpsched.service.store.models import Base
from tests.service.conftest import settings_for

TABLES = {
    "clusters",
    "finished_jobs",
    "predictions",
    "fitted_models",
    "decisions",
    "decision_jobs",
    "cluster_state",
}


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


def test_service_creates_an_empty_database_but_migrates_data_only_when_asked(database_url):
    engine = make_engine(database_url)
    create_app(settings_for(database_url, upgrade_on_start=False))  # empty: created
    assert migrate.is_current(engine)
    migrate.downgrade(engine, "0001")
    with pytest.raises(ConfigError, match="cpsched db upgrade"):
        create_app(settings_for(database_url, upgrade_on_start=False))
    migrate.upgrade(engine)
    create_app(settings_for(database_url, upgrade_on_start=False))
    # cpsched's tables without a revision (made by hand?) are data too: refused.
    migrate.downgrade(engine, "base")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE clusters (id INTEGER PRIMARY KEY)"))
    with pytest.raises(ConfigError, match="cpsched db upgrade"):
        create_app(settings_for(database_url, upgrade_on_start=False))


def test_an_unreachable_database_is_a_config_error():
    url = "postgresql+psycopg://cpsched:pw@127.0.0.1:1/cpsched"
    with pytest.raises(ConfigError, match=r"cannot reach the database .*127\.0\.0\.1:1"):
        create_app(settings_for(url))


def test_long_names_survive_the_wider_columns_and_a_downgrade(database_url):
    """0002 widens the finished jobs' labels to the schema's 1,024 characters; going back
    to 0001 cuts them to 256 instead of failing."""
    engine = make_engine(database_url)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO clusters (name) VALUES ('c')"))
        conn.execute(
            text(
                "INSERT INTO finished_jobs (cluster_id, job_id, user_name, group_name, job_name,"
                " partition, submit_time, start_time, end_time, time_limit, units, per_unit,"
                " state) VALUES (1, 'j', 'u', '', :long, '', 0, 0, 1, 1, 1, '{}', 'completed')"
            ),
            {"long": "n" * 1024},
        )
    migrate.downgrade(engine, "0001")
    with engine.connect() as conn:
        name = conn.scalar(text("SELECT job_name FROM finished_jobs"))
    assert len(name) == (256 if engine.dialect.name == "postgresql" else 1024)
    migrate.upgrade(engine)
    assert migrate.is_current(engine)
