"""Bearer-token authorisation: who may read or write which cluster, decided from the
request line and headers alone.

A token names the clusters it has rights to; a ``read_only`` token may read them (the
audit trail, what is known of a job, the dashboard) but not post snapshots or finished
jobs. The dashboard's session cookie (:mod:`cpsched.service.ui.session`) stands for a
token and is checked against the same list.

:class:`BearerAuth` is a pure ASGI middleware in front of everything under ``/v1``: a
request without a valid token, or with a token that has no rights to the cluster named
in its path (or only read rights, for a POST), is answered 401/403 before one byte of
its body is received. (FastAPI reads and parses a whole body, up to ``max_body_bytes``,
on the event loop before any dependency runs: an unauthenticated 60 MB POST would stall
every other request for seconds.) The :data:`~cpsched.service.deps.Authorised` and
:data:`~cpsched.service.deps.Reader` dependencies read the middleware's verdict, and
check the headers themselves when a route is mounted without it.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fastapi import Request

from cpsched.service.asgi import ASGIApp, Receive, Scope, Send, send_error
from cpsched.service.settings import TokenConfig
from cpsched.wire.schemas import shown

VERDICT_SCOPE_KEY = "cpsched.token"
"""Where :class:`BearerAuth` leaves its verdict in the ASGI scope: (token name, write)."""

_PREFIX = "/v1/"
_CLUSTERS = "/v1/clusters/"
_READS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True, slots=True)
class Refusal(Exception):
    """A request without rights: the HTTP status, and what to do about it."""

    status: int
    detail: str
    headers: dict[str, str] = field(default_factory=dict)


def find_token(tokens: Sequence[TokenConfig], presented: str) -> TokenConfig | None:
    """The configured token whose secret is ``presented``, or None."""
    match: TokenConfig | None = None
    for token in tokens:
        # Compare with every token, in constant time, so timing tells nothing.
        if hmac.compare_digest(token.secret.get_secret_value().encode(), presented.encode()):
            match = token
    return match


def presented_token(authorization: str | None) -> str | None:
    """The token an ``Authorization: Bearer <token>`` header presents, if any."""
    scheme, _, presented = (authorization or "").partition(" ")
    return presented if scheme.lower() == "bearer" and presented else None


def bearer(request: Request) -> str | None:
    """The token ``request`` presents as ``Authorization: Bearer <token>``, if any."""
    return presented_token(request.headers.get("authorization"))


def authorise(
    authorization: str | None, tokens: Sequence[TokenConfig], cluster: str, *, write: bool = True
) -> str:
    """The name of the token in the ``Authorization`` header if it may act on ``cluster``
    (``write``: post to it, not only read it); else :class:`Refusal` (401, or 403 for
    another cluster's token or a read-only one posting)."""
    presented = presented_token(authorization)
    if presented is None:
        raise Refusal(
            401,
            "missing bearer token: send 'Authorization: Bearer <token>'",
            {"WWW-Authenticate": "Bearer"},
        )
    match = find_token(tokens, presented)
    if match is None:
        raise Refusal(401, "unknown token", {"WWW-Authenticate": "Bearer"})
    where = shown(cluster, 128)
    if not match.allows(cluster):
        raise Refusal(403, f"token {match.name!r} has no rights to cluster {where!r}")
    if write and match.read_only:
        raise Refusal(
            403, f"token {match.name!r} is read-only: it may read cluster {where!r}, not post to it"
        )
    return match.name


def cluster_in(path: str) -> str:
    """The cluster a ``/v1/clusters/{cluster}/...`` path names ("" for other paths)."""
    if not path.startswith(_CLUSTERS):
        return ""
    return path[len(_CLUSTERS) :].partition("/")[0]


class BearerAuth:
    """Refuse, from the headers alone, every ``/v1`` request without rights (a GET needs
    read rights, anything else write rights)."""

    def __init__(
        self, app: ASGIApp, tokens: Sequence[TokenConfig], on_refused: Callable[[int], None]
    ) -> None:
        self.app = app
        self.tokens = tuple(tokens)
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(_PREFIX):
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                header = value.decode("latin-1")
        write = scope["method"] not in _READS
        try:
            token = authorise(header, self.tokens, cluster_in(scope["path"]), write=write)
        except Refusal as refusal:
            self.on_refused(refusal.status)
            kind = "unauthorized" if refusal.status == 401 else "forbidden"
            await send_error(send, refusal.status, kind, refusal.detail, refusal.headers)
            return
        scope[VERDICT_SCOPE_KEY] = (token, write)
        await self.app(scope, receive, send)
