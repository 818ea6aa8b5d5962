"""What the service's pure ASGI middlewares share: the ASGI types and an error answer
sent without reading the request body (the same :class:`ErrorOut` the routes give)."""

from __future__ import annotations

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
