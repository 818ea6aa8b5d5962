"""``/v1/clusters/{cluster}/dispatch``: decide which queued jobs start now, and where;
``.../dispatch/delta``: the same on what changed since the latest answer's snapshot."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from cpsched.service.asgi import ARRIVED_SCOPE_KEY
from cpsched.service.deps import Authorised, ClusterName, OrchestratorDep
from cpsched.service.lease import WRITER_HEADER
from cpsched.service.routes.common import ERRORS
from cpsched.service.routes.reading import ReadInThread
from cpsched.wire.deltas import snapshot_digest
from cpsched.wire.schemas import DecisionOut, DispatchRequest, ErrorOut, SnapshotDeltaIn, shown

# The snapshot is read in a worker thread (up to 100,000 jobs: not on the event loop).
router = APIRouter(prefix="/v1/clusters/{cluster}", responses=ERRORS, route_class=ReadInThread)


LOCKED: dict[int | str, dict[str, object]] = {
    423: {"model": ErrorOut, "description": "Another bridge holds the cluster's writer lease."}
}


def writer_of(request: Request) -> str | None:
    """The bridge that sent the request (its ``X-Cpsched-Writer``), if it says; at most
    256 printable characters are taken."""
    name = request.headers.get(WRITER_HEADER, "").strip()
    return shown(name, 256) if name else None


@router.post(
    "/dispatch",
    response_model=DecisionOut,
    responses=LOCKED,
    summary="Decide which queued jobs start now, where, and which limits to extend.",
)
def dispatch(
    cluster: ClusterName,
    body: DispatchRequest,
    _token: Authorised,
    orchestrator: OrchestratorDep,
    request: Request,
) -> Response:
    # Digest of the parsed snapshot (dry_run aside: the audit row says it): the audit row
    # names exactly what was decided on, and an identical snapshot gets the same answer.
    digest = snapshot_digest(body)
    answer = orchestrator.dispatch(
        cluster, body, digest, request.scope.get(ARRIVED_SCOPE_KEY), writer_of(request)
    )
    # Rendered here, in the worker thread, from the validated model: FastAPI would validate
    # and render it again on the event loop.
    return Response(answer.model_dump_json(), media_type="application/json")


@router.post(
    "/dispatch/delta",
    response_model=DecisionOut,
    summary="As /dispatch, on what changed since the snapshot of the cluster's latest answer.",
    responses={
        409: {"model": ErrorOut, "description": "Not on the latest snapshot: send it whole."},
        **LOCKED,
    },
)
def dispatch_delta(
    cluster: ClusterName,
    body: SnapshotDeltaIn,
    _token: Authorised,
    orchestrator: OrchestratorDep,
    request: Request,
) -> Response:
    answer = orchestrator.dispatch_delta(
        cluster, body, request.scope.get(ARRIVED_SCOPE_KEY), writer_of(request)
    )
    return Response(answer.model_dump_json(), media_type="application/json")
