"""``/healthz``, ``/readyz`` and ``/metrics``: for the supervisor and for Prometheus."""

from __future__ import annotations

import hmac

import anyio
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine, text

from cpsched.service.store import migrate

router = APIRouter()


# The health routes share nothing with the dispatches: /healthz and /metrics run on the
# event loop (no worker thread: all of them may be busy with dispatches waiting on a
# locked table), /readyz's database check on a worker thread of its own limiter, with an
# engine of its own (one connection: never waiting for the dispatches' pool).


@router.get("/healthz", summary="The process is up.")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def _database_ready(engine: Engine) -> JSONResponse | None:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        current = migrate.is_current(engine)
    except Exception as exc:
        return JSONResponse({"status": "database unreachable", "detail": type(exc).__name__}, 503)
    if not current:
        return JSONResponse({"status": "schema out of date: run 'cpsched db upgrade'"}, 503)
    return None


@router.get(
    "/readyz",
    summary="The database is reachable, its schema current, and it took the latest work.",
)
async def readyz(request: Request) -> JSONResponse:
    # No dependency functions here: FastAPI runs a plain one on a worker thread.
    failing = request.app.state.database_health.failing()
    if failing is not None:
        # The latest statement failed after the latest commit (a full disk, a lock
        # timeout): SELECT 1 could still answer, the work would not be stored.
        return JSONResponse({"status": "database failing", "detail": failing}, 503)
    state = request.app.state
    problem = await anyio.to_thread.run_sync(
        _database_ready, state.health_engine, limiter=state.health_limiter
    )
    return problem or JSONResponse({"status": "ready"})


@router.get(
    "/metrics",
    summary="Prometheus metrics.",
    response_class=PlainTextResponse,
    responses={200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {}}}},
)
async def prometheus(request: Request) -> Response:
    metrics = request.app.state.metrics
    required = request.app.state.settings.metrics_token
    if required is not None:
        presented = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(presented.encode(), required.get_secret_value().encode()):
            return JSONResponse(
                {"error": "unauthorized", "detail": "/metrics needs the metrics token"},
                401,
                headers={"WWW-Authenticate": "Bearer"},
            )
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
