"""``cpsched serve`` and ``cpsched db``: run the service, manage its schema."""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from cpsched import logs
from cpsched.cli.policy_options import policy_options
from cpsched.errors import ConfigError
from cpsched.runtime.policy import Policy
from cpsched.service.settings import ServiceSettings, load_settings

if TYPE_CHECKING:
    from fastapi import FastAPI
    from sqlalchemy import Engine

HttpParser = Literal["httptools", "h11"]

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
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one).")] = 8480,
    database_url: DatabaseOpt = None,
    upgrade: Annotated[
        bool, typer.Option("--upgrade", help="Apply pending migrations before starting.")
    ] = False,
    access_log: Annotated[bool, typer.Option(help="Log every request.")] = False,
    http: Annotated[
        HttpParser,
        typer.Option(
            help="HTTP parser: httptools (C; the body of a refused request is skipped at "
            "C speed) or h11 (pure Python, slower under large bodies)."
        ),
    ] = "httptools",
) -> None:
    """Run the scheduling service (FastAPI) until interrupted."""
    import uvicorn

    from cpsched.runtime.gc_pause import freeze_what_lives_now
    from cpsched.service.app import create_app
    from cpsched.service.malloc import fix_mmap_threshold

    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a port: give one from 1 to 65535 (0: any free)")
    settings = load_settings(
        config, database_url=database_url, upgrade_on_start=True if upgrade else None
    )
    logs.configure(settings.log_level.upper())
    fix_mmap_threshold(settings.malloc_mmap_threshold_kib)
    listener = _listen(host, port)
    try:
        app = create_app(settings)
    except BaseException:
        listener.close()
        raise
    _say_started(app, settings, listener)
    import cpsched.core.cp  # noqa: F401  (OR-Tools and the models, frozen with the rest)

    freeze_what_lives_now()  # a full collection then stalls /healthz for far less
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level=settings.log_level.lower(),
            log_config=None,  # keep our JSON handler (cpsched.logs)
            access_log=access_log,
            http=http,
            # One process: dispatches of a cluster must be serialised in one place.
            workers=1,
        )
    )
    server.run(sockets=[listener])
    if not server.started:
        raise typer.Exit(3)  # the application's start-up failed (uvicorn's code); see the log


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening (connections wait in its backlog until
    the service is ready), or a one-line ConfigError saying why not."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        listener = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}: {exc.strerror or exc}; check --host") from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        hint = "check --host and --port"
        if exc.errno == errno.EADDRINUSE:
            hint = "another process listens there: stop it or choose another --port"
        elif exc.errno == errno.EACCES:
            hint = "ports below 1024 need root: choose another --port"
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; {hint}"
        ) from None
    return listener


def _say_started(app: FastAPI, settings: ServiceSettings, listener: socket.socket) -> None:
    """On stderr: where the service listens, on which database, with how many tokens; and a
    warning when it has none (every /v1 call would get 401)."""
    from cpsched.service.store.database import shown

    host, port = listener.getsockname()[:2]
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    tokens = len(settings.tokens)
    typer.echo(
        f"cpsched serve: listening on {url} (API docs at {url}/docs, dashboard at {url}/ui/); "
        f"database {shown(app.state.engine.url)}; {tokens} token{'' if tokens == 1 else 's'}",
        err=True,
    )
    if not tokens:
        typer.echo(
            "warning: no tokens configured, so every /v1 call gets 401: add a [[tokens]] table "
            'to the config, or set CPSCHED_TOKENS=\'[{"name": "me", "secret": "..."}]\'',
            err=True,
        )


def _engine(config: Path | None, database_url: str | None) -> Engine:
    """The configured database's engine, once it answered (else a one-line error)."""
    from cpsched.service.store.database import check_reachable, make_engine

    engine = make_engine(load_settings(config, database_url=database_url).database_url)
    check_reachable(engine)
    return engine


@db_app.command("upgrade")
def db_upgrade(
    config: ConfigOpt = None,
    database_url: DatabaseOpt = None,
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
) -> None:
    """Create or migrate the schema to the latest (or given) revision."""
    from cpsched.service.store import migrate

    engine = _engine(config, database_url)
    migrate.upgrade(engine, revision)
    typer.echo(f"schema at {migrate.current_revision(engine)}")


@db_app.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision ('base' drops every table).")],
    config: ConfigOpt = None,
    database_url: DatabaseOpt = None,
) -> None:
    """Migrate the schema back to ``revision``."""
    from cpsched.service.store import migrate

    engine = _engine(config, database_url)
    migrate.downgrade(engine, revision)
    typer.echo(f"schema at {migrate.current_revision(engine) or 'base'}")


@db_app.command("current")
def db_current(config: ConfigOpt = None, database_url: DatabaseOpt = None) -> None:
    """Print the schema's revision and whether it is the latest."""
    from cpsched.service.store import migrate

    engine = _engine(config, database_url)
    current = migrate.current_revision(engine)
    head = migrate.head_revision()
    typer.echo(f"{current or 'empty'} ({'current' if current == head else f'latest is {head}'})")


@policy_options
def http_check_command(
    trace: Annotated[Path, typer.Argument(help="SWF trace.", exists=True, dir_okay=False)],
    out: Annotated[Path, typer.Option(help="Directory for both replays and the service.")],
    policy: Policy,
    jobs: Annotated[int | None, typer.Option(help="Replay only the first N jobs.")] = 2000,
    system: Annotated[Path | None, typer.Option(help="TOML system description.")] = None,
) -> None:
    """Start a local service on SQLite, replay TRACE through it over HTTP and in process
    with the same policy, and check that both decide the same (every job's start and end;
    fallback and solver counters, which the wall clock decides, are only reported)."""
    from cpsched.cli.http_check import http_check
    from cpsched.replay.runner import ReplaySettings

    settings = ReplaySettings(
        trace=trace, out=out, policy=policy, system=system, jobs=jobs, plots=False
    )
    typer.echo(f"replaying {jobs or 'all'} jobs of {trace.name} in process and over HTTP...")
    result = http_check(settings)
    typer.echo(result.table)
    typer.echo(
        f"in process {result.in_process_seconds:.1f} s, over HTTP {result.http_seconds:.1f} s "
        f"(service on SQLite, log in {out / 'service'})"
    )
    agreement = result.agreement
    if agreement.counters:
        # A call past its deadline (a busy machine) is answered by the fallback: counted,
        # not a difference in what was decided.
        typer.echo(f"differed (wall clock, not compared): {agreement.counters_note()}")
    if not agreement.identical:
        typer.echo(f"DIFFERENT: {', '.join(agreement.differing)}", err=True)
        raise typer.Exit(1)
    typer.echo("identical: the service reproduces the in-process replay's decisions")


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.add_typer(db_app, name="db")
    app.command("http-check")(http_check_command)
