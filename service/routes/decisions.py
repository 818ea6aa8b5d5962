"""``/v1/clusters/{cluster}/decisions``: the audit trail."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from cpsched.service.deps import ClusterName, OrchestratorDep, Reader
from cpsched.service.routes.common import ERRORS
from cpsched.wire.schemas import AuditPageOut

router = APIRouter(prefix="/v1/clusters/{cluster}", responses=ERRORS)


@router.get(
    "/decisions",
    response_model=AuditPageOut,
    summary="The audit trail: every dispatch answer, applied or dry run, oldest first.",
)
def audit(
    cluster: ClusterName,
    _token: Reader,
    orchestrator: OrchestratorDep,
    after_id: Annotated[int, Query(ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditPageOut:
    return orchestrator.audit(cluster, after_id, limit)
