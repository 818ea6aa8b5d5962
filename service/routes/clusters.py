"""``/v1/clusters/{cluster}``: retire a cluster (its history, predictions and audit)."""

from __future__ import annotations

from fastapi import APIRouter

from cpsched.service.deps import Authorised, ClusterName, OrchestratorDep
from cpsched.service.routes.common import ERRORS
from cpsched.wire.schemas import ClusterRetiredOut, ErrorOut

router = APIRouter(prefix="/v1/clusters/{cluster}", responses=ERRORS)


@router.delete(
    "",
    response_model=ClusterRetiredOut,
    responses={404: {"model": ErrorOut, "description": "The service has no such cluster."}},
    summary="Retire a cluster: delete its finished jobs, predictions and audit trail, and "
    "forget it (stop its bridge first: a later dispatch starts it afresh).",
)
def retire(
    cluster: ClusterName, _token: Authorised, orchestrator: OrchestratorDep
) -> ClusterRetiredOut:
    return ClusterRetiredOut(cluster=cluster, deleted=orchestrator.retire(cluster))
