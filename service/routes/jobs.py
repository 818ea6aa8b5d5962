"""``/v1/clusters/{cluster}/jobs``: finished jobs in, what is known of a job out."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.convertors import PathConvertor, register_url_convertor

from cpsched.service.deps import Authorised, ClusterName, JobId, OrchestratorDep, Reader
from cpsched.service.routes.common import ERRORS
from cpsched.service.routes.reading import ReadInThread
from cpsched.wire.schemas import FinishedAck, FinishedBatchIn, JobInfoOut

# Finished batches (up to 10,000 jobs) are read in a worker thread.
router = APIRouter(prefix="/v1/clusters/{cluster}/jobs", responses=ERRORS, route_class=ReadInThread)


class AnyText(PathConvertor):
    """Starlette's ``path``, newlines included: a job id with a control character reaches
    the route and its 422, instead of matching no route (404)."""

    regex = "(?s:.+)"


register_url_convertor("text", AnyText())


@router.post(
    "/finished",
    response_model=FinishedAck,
    summary="Record finished jobs (idempotent; acknowledged only once committed). Each job "
    "is checked on its own: those refused are listed with why, the others are stored.",
)
def finished(
    cluster: ClusterName, body: FinishedBatchIn, _token: Authorised, orchestrator: OrchestratorDep
) -> FinishedAck:
    return orchestrator.finished(cluster, body)


@router.get(
    # Any text, so that an id holding '/' (a PBS array, a site's naming) is found.
    "/{job_id:text}",
    response_model=JobInfoOut,
    summary="What the service knows of a job: history, prediction, why it waits.",
)
def job_info(
    cluster: ClusterName, job_id: JobId, _token: Reader, orchestrator: OrchestratorDep
) -> JobInfoOut:
    return orchestrator.job_info(cluster, job_id)
