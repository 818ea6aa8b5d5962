"""Request body size limit as an ASGI middleware: a declared length over the limit is
refused before reading, and a body sent in chunks (no declared length) is cut off with
the same 413 as soon as it passes the limit.

Only the API (``/v1``) takes large bodies (snapshots, finished jobs); everything else
(the dashboard's login form, which anyone may post to) is held to :data:`OTHER_MAX_BYTES`."""

from __future__ import annotations

from collections.abc import Callable

from starlette.exceptions import HTTPException

from cpsched.service.asgi import ASGIApp, Message, Receive, Scope, Send, send_error


def too_large_detail(max_bytes: int) -> str:
    return f"request body over {max_bytes} bytes: send smaller batches or raise max_body_bytes"


OTHER_MAX_BYTES = 64 * 1024
"""The body limit outside ``/v1``."""


class BodyTooLargeError(HTTPException):
    """Raised from ``receive`` once a chunked body passes the limit. An HTTP exception, so
    that FastAPI, which turns any other error met while reading a body into a 400, passes
    it on to the error handlers (413); a reader that does not is answered here."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, too_large_detail(max_bytes))


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, on_refused: Callable[[], None]) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        if not scope["path"].startswith("/v1/"):
            limit = min(limit, OTHER_MAX_BYTES)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            self.on_refused()
            await send_error(send, 413, "body_too_large", too_large_detail(limit))
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLargeError(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLargeError:
            if not started:
                self.on_refused()
                await send_error(send, 413, "body_too_large", too_large_detail(limit))
