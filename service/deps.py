"""What the routes depend on: path parameters, the token check, the orchestrator.

Everything is read from ``request.app.state`` (set by :func:`cpsched.service.app.create_app`),
so the routes are plain module-level functions that tests can mount on any app.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request

from cpsched.service.auth import VERDICT_SCOPE_KEY, Refusal, authorise
from cpsched.service.orchestrator import Orchestrator
from cpsched.wire.schemas import PRINTABLE

ClusterName = Annotated[
    str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
]
JobId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=256,
        pattern=PRINTABLE,
        description="The job's id, as the workload manager gives it; a '/' in it may be "
        "sent as is or as %2F.",
    ),
]


def _token(request: Request, cluster: str, *, write: bool) -> str:
    """The token's name if it may act on ``cluster``. :class:`~cpsched.service.auth.BearerAuth`
    has already refused a request without rights before its body was read; a route
    mounted without that middleware checks here."""
    verdict: tuple[str, bool] | None = request.scope.get(VERDICT_SCOPE_KEY)
    if verdict is not None and (verdict[1] or not write):
        return verdict[0]
    try:
        return authorise(
            request.headers.get("authorization"),
            request.app.state.settings.tokens,
            cluster,
            write=write,
        )
    except Refusal as refusal:
        raise HTTPException(refusal.status, refusal.detail, refusal.headers or None) from None


def token_for_cluster(cluster: ClusterName, request: Request) -> str:
    """The token's name if it may post to ``cluster``."""
    return _token(request, cluster, write=True)


def reader_of_cluster(cluster: ClusterName, request: Request) -> str:
    """The token's name if it may read ``cluster`` (a read-only token may)."""
    return _token(request, cluster, write=False)


def orchestrator_of(request: Request) -> Orchestrator:
    orchestrator: Orchestrator = request.app.state.orchestrator
    return orchestrator


Authorised = Annotated[str, Depends(token_for_cluster)]
"""A token that may post to the cluster."""
Reader = Annotated[str, Depends(reader_of_cluster)]
"""A token that may read the cluster (read-only tokens too)."""
OrchestratorDep = Annotated[Orchestrator, Depends(orchestrator_of)]
