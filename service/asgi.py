"""What the service's pure ASGI middlewares share: the ASGI types and an error answer
sent without reading the request body (the same :class:`ErrorOut` the routes give)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from cpsched.wire.schemas import ErrorOut

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def send_error(
    send: Send, status: int, kind: str, detail: str, headers: dict[str, str] | None = None
) -> None:
    """Answer ``status`` with an :class:`ErrorOut` body."""
    body = ErrorOut(error=kind, detail=detail).model_dump_json().encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


ARRIVED_SCOPE_KEY = "cpsched.arrived"
"""Where :class:`StampArrival` leaves the request's arrival (``time.perf_counter()``)."""


class StampArrival:
    """The outermost middleware: notes when a request arrived, before its body is read, so
    that a dispatch's deadline covers reading and parsing it too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[ARRIVED_SCOPE_KEY] = time.perf_counter()
        await self.app(scope, receive, send)
