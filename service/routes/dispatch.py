"""``/v1/clusters/{cluster}/dispatch``: decide which queued jobs start now, and where."""

from __future__ import annotations

import hashlib

from fastapi import APIRouter

from cpsched.service.deps import Authorised, ClusterName, OrchestratorDep
from cpsched.service.routes.common import ERRORS
from cpsched.wire.schemas import DecisionOut, DispatchRequest

router = APIRouter(prefix="/v1/clusters/{cluster}", responses=ERRORS)


@router.post(
    "/dispatch",
    response_model=DecisionOut,
    summary="Decide which queued jobs start now, where, and which limits to extend.",
)
def dispatch(
    cluster: ClusterName, body: DispatchRequest, _token: Authorised, orchestrator: OrchestratorDep
) -> DecisionOut:
    # Digest of the parsed snapshot (dry_run aside: the audit row says it): the audit row
    # names exactly what was decided on, and an identical snapshot gets the same answer.
    digest = hashlib.sha256(body.model_dump_json(exclude={"dry_run"}).encode()).hexdigest()
    return orchestrator.dispatch(cluster, body, digest)
