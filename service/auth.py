"""Bearer-token authorisation: who may read or write which cluster.

A token names the clusters it has rights to; a ``read_only`` token may read them (the
audit trail, what is known of a job, the dashboard) but not post snapshots or finished
jobs. The dashboard's session cookie (:mod:`cpsched.service.ui.session`) stands for a
token and is checked against the same list.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status

from cpsched.service.settings import TokenConfig


def find_token(tokens: list[TokenConfig], presented: str) -> TokenConfig | None:
    """The configured token whose secret is ``presented``, or None."""
    match: TokenConfig | None = None
    for token in tokens:
        # Compare with every token, in constant time, so timing tells nothing.
        if hmac.compare_digest(token.secret.get_secret_value().encode(), presented.encode()):
            match = token
    return match


def bearer(request: Request) -> str | None:
    """The token presented as ``Authorization: Bearer <token>``, if any."""
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    return presented if scheme.lower() == "bearer" and presented else None


def authorise(
    request: Request, tokens: list[TokenConfig], cluster: str, *, write: bool = True
) -> str:
    """The name of the token in ``request`` if it may act on ``cluster`` (``write``: post
    to it, not only read it); else 401/403."""
    presented = bearer(request)
    if presented is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token: send 'Authorization: Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    match = find_token(tokens, presented)
    if match is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "unknown token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not match.allows(cluster):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"token {match.name!r} has no rights to cluster {cluster!r}"
        )
    if write and match.read_only:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"token {match.name!r} is read-only: it may read cluster {cluster!r}, not post to it",
        )
    return match.name
