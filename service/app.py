"""The FastAPI application: routes, authorisation, limits and error handling.

Every write endpoint needs a bearer token with rights to the cluster. Bad input gets a
4xx with a message saying what to fix; an unexpected error gets a 500 with an incident
id (the traceback goes to the log, never to the client).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from cpsched import __version__
from cpsched.errors import ConfigError, InputError
from cpsched.service.auth import authorise
from cpsched.service.body_limit import BodyLimit
from cpsched.service.cluster import build_dispatchers, build_predictor
from cpsched.service.metrics import ServiceMetrics
from cpsched.service.orchestrator import Orchestrator
from cpsched.service.settings import ServiceSettings
from cpsched.service.store import migrate
from cpsched.service.store.database import make_engine, make_sessions
from cpsched.wire.schemas import (
    AuditPageOut,
    DecisionOut,
    DispatchRequest,
    ErrorOut,
    FinishedAck,
    FinishedBatch,
    JobInfoOut,
)

log = logging.getLogger(__name__)

ClusterName = Annotated[
    str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
]
JobId = Annotated[str, Path(min_length=1, max_length=256)]


def token_for_cluster(cluster: ClusterName, request: Request) -> str:
    # A dependency, so that a request without rights is refused before its body is even
    # validated.
    return authorise(request, request.app.state.settings.tokens, cluster)


Authorised = Annotated[str, Depends(token_for_cluster)]
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut},
    503: {"model": ErrorOut},
    401: {"model": ErrorOut},
    403: {"model": ErrorOut},
    413: {"model": ErrorOut},
    422: {"model": ErrorOut},
}


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
    if not migrate.is_current(engine):
        if not settings.upgrade_on_start:
            current = migrate.current_revision(engine) or "empty"
            raise ConfigError(
                f"the database schema is out of date (at {current}, code needs "
                f"{migrate.head_revision()}): run 'cpsched db upgrade' first, or start with "
                "upgrade_on_start = true"
            )
        migrate.upgrade(engine)
    metrics = ServiceMetrics()
    orchestrator = Orchestrator(settings, make_sessions(engine), metrics)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        orchestrator.warm_up()
        yield
        orchestrator.close()
        engine.dispose()

    app = FastAPI(
        title="cpsched",
        version=__version__,
        summary="External constraint-programming scheduler for Slurm and PBS clusters.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.orchestrator = orchestrator
    app.state.metrics = metrics

    def error(status_code: int, kind: str, detail: str) -> JSONResponse:
        metrics.bad_requests.labels(str(status_code)).inc()
        return JSONResponse(
            ErrorOut(error=kind, detail=detail).model_dump(), status_code=status_code
        )

    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_body_bytes,
        on_refused=metrics.bad_requests.labels("413").inc,
    )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:20]
        )
        return error(422, "invalid_request", problems)

    @app.exception_handler(InputError)
    async def bad_input(_request: Request, exc: InputError) -> JSONResponse:
        return error(422, "invalid_snapshot", str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        response = error(exc.status_code, _KINDS.get(exc.status_code, "error"), str(exc.detail))
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    @app.exception_handler(OperationalError)
    async def database_down(_request: Request, exc: OperationalError) -> JSONResponse:
        # Nothing was acknowledged: the bridge retries (and meanwhile applies its fallback).
        log.error("database unavailable: %s", exc.orig)
        response = error(503, "database_unavailable", "the database is unreachable; retry later")
        response.headers["Retry-After"] = "5"
        return response

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        incident = uuid.uuid4().hex[:12]
        log.error("incident %s", incident, exc_info=exc)
        return error(500, "internal", f"internal error (incident {incident}); see the service log")

    @app.post(
        "/v1/clusters/{cluster}/dispatch",
        response_model=DecisionOut,
        responses=ERRORS,
        summary="Decide which queued jobs start now, where, and which limits to extend.",
    )
    def dispatch(cluster: ClusterName, body: DispatchRequest, _token: Authorised) -> DecisionOut:
        # Digest of the parsed snapshot: the audit row names exactly what was decided on.
        digest = hashlib.sha256(body.model_dump_json().encode()).hexdigest()
        return orchestrator.dispatch(cluster, body, digest)

    @app.post(
        "/v1/clusters/{cluster}/jobs/finished",
        response_model=FinishedAck,
        responses=ERRORS,
        summary="Record finished jobs (idempotent; acknowledged only once committed).",
    )
    def finished(cluster: ClusterName, body: FinishedBatch, _token: Authorised) -> FinishedAck:
        return orchestrator.finished(cluster, body)

    @app.get(
        "/v1/clusters/{cluster}/jobs/{job_id}",
        response_model=JobInfoOut,
        responses=ERRORS,
        summary="What the service knows of a job: history, prediction, why it waits.",
    )
    def job_info(cluster: ClusterName, job_id: JobId, _token: Authorised) -> JobInfoOut:
        return orchestrator.job_info(cluster, job_id)

    @app.get(
        "/v1/clusters/{cluster}/decisions",
        response_model=AuditPageOut,
        responses=ERRORS,
        summary="The audit trail: every dispatch answer, applied or dry run, oldest first.",
    )
    def audit(
        cluster: ClusterName,
        _token: Authorised,
        after_id: Annotated[int, Query(ge=0, le=2**62)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> AuditPageOut:
        return orchestrator.audit(cluster, after_id, limit)

    @app.get("/healthz", summary="The process is up.")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", summary="The database is reachable and its schema current.")
    def readyz() -> JSONResponse:
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            current = migrate.is_current(engine)
        except Exception as exc:
            return JSONResponse(
                {"status": "database unreachable", "detail": type(exc).__name__}, 503
            )
        if not current:
            return JSONResponse({"status": "schema out of date: run 'cpsched db upgrade'"}, 503)
        return JSONResponse({"status": "ready"})

    @app.get(
        "/metrics",
        summary="Prometheus metrics.",
        response_class=PlainTextResponse,
        responses={200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {}}}},
    )
    def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


_KINDS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
}
