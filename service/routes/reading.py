"""Request bodies read into their models off the event loop.

FastAPI reads a JSON body on the event loop: ``json.loads``, then pydantic on the
dicts. A 100,000-job snapshot (12 MB) took about a second there, during which no other
request (``/healthz`` included) was served. :class:`ReadInThread` routes keep FastAPI's
declaration of the body, and so the OpenAPI document, as it is; before FastAPI's handler
runs they receive the raw body (after :class:`~cpsched.service.auth.BearerAuth` has let
the request in) and validate it in a worker thread with pydantic's own JSON parser,
straight into the model (no intermediate dicts), with the garbage collector held off
meanwhile (the 100,000 jobs' objects triggered full collections that took a third of
the time). FastAPI's handler then gets the model as the request's JSON and accepts it
as it is.

A body pydantic refuses (not JSON to its parser, which takes UTF-8 only, or invalid) is
read again as FastAPI reads it (``json.loads``, then pydantic on the dicts, still in the
thread), so that every error answer stays the one FastAPI gives; only valid bodies take
the fast way.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.datastructures import DefaultPlaceholder
from fastapi.exceptions import RequestValidationError
from fastapi.params import Form
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError

from cpsched.runtime.gc_pause import collector_paused

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def is_json(content_type: str | None, *, strict: bool = True) -> bool:
    """Whether FastAPI reads a body of ``content_type`` as JSON (``application/json`` or
    ``application/*+json``; no content type only when not ``strict``)."""
    if not content_type:
        return not strict
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def read_json(adapter: TypeAdapter[Any], raw: bytes) -> Any:
    """``raw`` validated by ``adapter``. A body it refuses is read again as FastAPI reads
    it, so that the error is the one FastAPI gives: :class:`RequestValidationError`, or
    a 400 for a body that is not even text."""
    with collector_paused():
        try:
            return adapter.validate_json(raw)
        except ValidationError:
            pass  # the error path: read as FastAPI does, for FastAPI's answer
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise RequestValidationError(
                [
                    {
                        "type": "json_invalid",
                        "loc": ("body", exc.pos),
                        "msg": "JSON decode error",
                        "input": {},
                        "ctx": {"error": exc.msg},
                    }
                ],
                body=exc.doc,
            ) from None
        except Exception:  # not UTF-8/16/32, nested too deep: FastAPI's 400
            raise HTTPException(400, "There was an error parsing the body") from None
        try:
            # As FastAPI validates a body (which also reads objects' attributes).
            return adapter.validate_python(data, from_attributes=True)
        except ValidationError as exc:
            raise RequestValidationError(
                [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)],
                body=data,
            ) from None


class _ReadRequest(Request):
    """The request as FastAPI's handler then sees it: its body received, its JSON the
    validated model."""

    def __init__(self, request: Request, raw: bytes, parsed: Any) -> None:
        super().__init__(request.scope, request.receive)
        self._raw = raw
        self._parsed = parsed

    async def body(self) -> bytes:
        return self._raw

    async def json(self) -> Any:
        return self._parsed


class ReadInThread(APIRoute):
    """An :class:`~fastapi.routing.APIRoute` whose JSON body model is read in a worker
    thread (routes without a body, or with a form, are FastAPI's own)."""

    def get_route_handler(self) -> Handler:
        handle = super().get_route_handler()
        field = self.body_field
        if field is None or isinstance(field.field_info, Form):
            return handle
        model = field.field_info.annotation
        if model is None:
            return handle
        adapter: TypeAdapter[Any] = TypeAdapter(model)
        strict = self.strict_content_type
        if isinstance(strict, DefaultPlaceholder):
            strict = strict.value
        strict = bool(strict)

        async def read_then_handle(request: Request) -> Response:
            if is_json(request.headers.get("content-type"), strict=strict):
                raw = await request.body()
                if raw:
                    parsed = await run_in_threadpool(read_json, adapter, raw)
                    request = _ReadRequest(request, raw, parsed)
            return await handle(request)

        return read_then_handle
