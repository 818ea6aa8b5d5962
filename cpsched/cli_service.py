"""``cpsched serve`` and ``cpsched db``: run the service, manage its schema."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from service.settings import load_settings

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="TOML configuration file (CPSCHED_* variables override it)."),
]
DatabaseOpt = Annotated[
    str | None,
    typer.Option(
        "--database-url", help="Database URL; default from the config, else ./cpsched.db."
    ),
]

db_app = typer.Typer(
    help="Database schema: upgrade, downgrade, current revision.", no_args_is_help=True
)


def serve(
    config: ConfigOpt = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8480,
    database_url: DatabaseOpt = None,
    upgrade: Annotated[
        bool, typer.Option("--upgrade", help="Apply pending migrations before starting.")
    ] = False,
    access_log: Annotated[bool, typer.Option(help="Log every request.")] = False,
) -> None:
    """Run the scheduling service (FastAPI) until interrupted."""
    import uvicorn

    from service.app import create_app

    settings = load_settings(
        config, database_url=database_url, upgrade_on_start=True if upgrade else None
    )
    logging.getLogger().setLevel(settings.log_level.upper())
    app = create_app(settings)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=settings.log_level.lower(),
        access_log=access_log,
        # One process: dispatches of a cluster must be serialised in one place.
        workers=1,
    )


@db_app.command("upgrade")
def db_upgrade(
    config: ConfigOpt = None,
    database_url: DatabaseOpt = None,
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
) -> None:
    """Create or migrate the schema to the latest (or given) revision."""
    from service.store import migrate
    from service.store.database import make_engine

    engine = make_engine(load_settings(config, database_url=database_url).database_url)
    migrate.upgrade(engine, revision)
    typer.echo(f"schema at {migrate.current_revision(engine)}")


@db_app.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision ('base' drops every table).")],
    config: ConfigOpt = None,
    database_url: DatabaseOpt = None,
) -> None:
    """Migrate the schema back to ``revision``."""
    from service.store import migrate
    from service.store.database import make_engine

    engine = make_engine(load_settings(config, database_url=database_url).database_url)
    migrate.downgrade(engine, revision)
    typer.echo(f"schema at {migrate.current_revision(engine) or 'base'}")


@db_app.command("current")
def db_current(config: ConfigOpt = None, database_url: DatabaseOpt = None) -> None:
    """Print the schema's revision and whether it is the latest."""
    from service.store import migrate
    from service.store.database import make_engine

    engine = make_engine(load_settings(config, database_url=database_url).database_url)
    current = migrate.current_revision(engine)
    head = migrate.head_revision()
    typer.echo(f"{current or 'empty'} ({'current' if current == head else f'latest is {head}'})")


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.add_typer(db_app, name="db")
