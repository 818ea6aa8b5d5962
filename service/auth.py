"""Bearer-token authorisation: who may write to which cluster."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status

from cpsched.service.settings import TokenConfig


def authorise(request: Request, tokens: list[TokenConfig], cluster: str) -> str:
    """The name of the token in ``request`` if it may act on ``cluster``; else 401/403."""
    header = request.headers.get("authorization", "")
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not presented:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token: send 'Authorization: Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    match: TokenConfig | None = None
    for token in tokens:
        # Compare with every token, in constant time, so timing tells nothing.
        if hmac.compare_digest(token.secret.get_secret_value().encode(), presented.encode()):
            match = token
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
    return match.name
