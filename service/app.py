"""The FastAPI application factory: it only wires settings, store, orchestrator, routes,
error handlers and limits together; the routes live in :mod:`cpsched.service.routes`.

Every write endpoint needs a bearer token with rights to the cluster. Bad input gets a
4xx with a message saying what to fix; an unexpected error gets a 500 with an incident
id (the traceback goes to the log, never to the client).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI

from cpsched import __version__
from cpsched.errors import ConfigError
from cpsched.service.api_docs import install_api_docs
from cpsched.service.asgi import StampArrival
from cpsched.service.auth import BearerAuth
from cpsched.service.body_limit import BodyLimit
from cpsched.service.cluster import build_dispatchers, build_predictor
from cpsched.service.error_handlers import install_error_handlers
from cpsched.service.metrics import ServiceMetrics
from cpsched.service.orchestrator import Orchestrator
from cpsched.service.retention import RetentionTask
from cpsched.service.routes import clusters, decisions, dispatch, health, jobs
from cpsched.service.settings import ServiceSettings
from cpsched.service.store import migrate
from cpsched.service.store.database import check_reachable, make_engine, make_sessions
from cpsched.service.store.health import DatabaseHealth
from cpsched.service.ui.install import install_ui


def check_policies(settings: ServiceSettings) -> None:
    """Build every configured policy once, so that a misspelt name stops the start."""
    for name in ["[defaults]", *settings.clusters]:
        policy = settings.defaults if name == "[defaults]" else settings.policy(name)
        try:
            build_dispatchers(policy)
            build_predictor(policy)
        except ConfigError as exc:
            where = name if name == "[defaults]" else f"[clusters.{name}]"
            raise ConfigError(f"{where}: {exc}") from None


def create_app(settings: ServiceSettings) -> FastAPI:
    check_policies(settings)
    engine = make_engine(settings.database_url)
    check_reachable(engine)
    if not migrate.is_current(engine):
        # An empty database is created; existing data is migrated only when asked.
        if not settings.upgrade_on_start and not migrate.is_empty(engine):
            current = migrate.current_revision(engine) or "no revision"
            raise ConfigError(
                f"the database schema is out of date (at {current}, code needs "
                f"{migrate.head_revision()}): run 'cpsched db upgrade' first, or start with "
                "upgrade_on_start = true"
            )
        migrate.upgrade(engine)
    metrics = ServiceMetrics()
    sessions = make_sessions(engine)
    orchestrator = Orchestrator(settings, sessions, metrics)
    retention = RetentionTask(settings, sessions, metrics)

    health_engine = make_engine(settings.database_url, pool_size=1)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # /readyz's database check: threads of its own, never queued behind dispatches.
        app.state.health_limiter = anyio.CapacityLimiter(2)
        orchestrator.warm_up_in_background()
        retention.start()
        yield
        retention.stop()
        orchestrator.close()
        engine.dispose()
        health_engine.dispose()

    app = FastAPI(
        title="cpsched",
        version=__version__,
        summary="External constraint-programming scheduler for Slurm and PBS clusters.",
        lifespan=lifespan,
        docs_url=None,  # served by install_api_docs, without a CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.orchestrator = orchestrator
    app.state.retention = retention
    app.state.metrics = metrics
    app.state.engine = engine
    app.state.health_engine = health_engine
    app.state.database_health = DatabaseHealth(engine)
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_body_bytes,
        on_refused=metrics.bad_requests.labels("413").inc,
    )
    # Added last, so outer: a request without rights is refused before its body is read.
    app.add_middleware(
        BearerAuth,
        tokens=settings.tokens,
        on_refused=lambda status: metrics.bad_requests.labels(str(status)).inc(),
    )
    app.add_middleware(StampArrival)  # outermost: a dispatch's deadline counts from here
    install_error_handlers(app, metrics)
    for module in (dispatch, jobs, decisions, clusters, health):
        app.include_router(module.router)
    install_ui(app)
    install_api_docs(app)
    return app
