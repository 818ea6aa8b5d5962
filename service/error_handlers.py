"""How the service answers errors: a 4xx that says what to fix for bad input, a 503 with
``Retry-After`` when the database is down, and a 500 with an incident id for anything
else (the traceback goes to the log, never to the client)."""

from __future__ import annotations

import logging
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from cpsched.errors import InputError
from cpsched.service.clusters import UnknownCluster
from cpsched.service.lease import WriterConflict
from cpsched.service.metrics import ServiceMetrics
from cpsched.wire.deltas import StaleBaseError
from cpsched.wire.schemas import ErrorOut, shown

log = logging.getLogger("cpsched.service.app")

_KINDS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
}


def install_error_handlers(app: FastAPI, metrics: ServiceMetrics) -> None:
    """Answer every error of ``app`` with an :class:`ErrorOut` body, counted in ``metrics``."""

    def error(status_code: int, kind: str, detail: str) -> JSONResponse:
        metrics.bad_requests.labels(str(status_code)).inc()
        return JSONResponse(
            ErrorOut(error=kind, detail=detail).model_dump(), status_code=status_code
        )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:20]
        )
        # The locations quote the client's keys: escaped, so that any of them can be shown.
        return error(422, "invalid_request", shown(problems, 4000))

    @app.exception_handler(StaleBaseError)
    async def stale_base(_request: Request, exc: StaleBaseError) -> JSONResponse:
        return error(409, "stale_base", shown(str(exc), 4000))

    @app.exception_handler(UnknownCluster)
    async def unknown_cluster(_request: Request, exc: UnknownCluster) -> JSONResponse:
        return error(404, "not_found", shown(str(exc), 4000))

    @app.exception_handler(WriterConflict)
    async def writer_conflict(_request: Request, exc: WriterConflict) -> JSONResponse:
        return error(423, "writer_conflict", shown(str(exc), 4000))

    @app.exception_handler(InputError)
    async def bad_input(_request: Request, exc: InputError) -> JSONResponse:
        return error(422, "invalid_snapshot", shown(str(exc), 4000))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        response = error(
            exc.status_code, _KINDS.get(exc.status_code, "error"), shown(str(exc.detail), 4000)
        )
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
