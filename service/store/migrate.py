"""Schema migrations: upgrade, downgrade, and whether a database is current."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect

from cpsched import migrations
from cpsched.service.store.models import Base

SCRIPTS = Path(migrations.__file__).parent


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPTS))
    # '%' is ConfigParser's interpolation character; URLs may contain it (passwords).
    url = engine.url.render_as_string(hide_password=False).replace("%", "%%")
    config.set_main_option("sqlalchemy.url", url)
    return config


def head_revision() -> str | None:
    return ScriptDirectory(str(SCRIPTS)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def is_current(engine: Engine) -> bool:
    return current_revision(engine) == head_revision()


def is_empty(engine: Engine) -> bool:
    """No revision and none of cpsched's tables: creating the schema here loses nothing."""
    ours = set(Base.metadata.tables)
    return current_revision(engine) is None and not ours & set(inspect(engine).get_table_names())


def upgrade(engine: Engine, revision: str = "head") -> None:
    with engine.begin() as conn:
        config = alembic_config(engine)
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    with engine.begin() as conn:
        config = alembic_config(engine)
        config.attributes["connection"] = conn
        command.downgrade(config, revision)
