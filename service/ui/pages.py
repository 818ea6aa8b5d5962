"""The dashboard's pages, one per view of a cluster (read-only; a token or session needed).

* ``/ui/``: the clusters this token may see, each with its last decision;
* ``/ui/clusters/{c}``: the queue (predicted run time, planned start, what each job
  waits for, its wait so far) and the Gantt chart of running and planned jobs;
* ``/ui/clusters/{c}/decisions``: the decision log, filterable to fallbacks;
* ``/ui/clusters/{c}/predictions``: predicted against real run times, error over time;
* ``/ui/clusters/{c}/latency``: decision latency and fallback rate over the last hours,
  and shadow mode's comparison with what the workload manager did;
* ``/ui/clusters/{c}/jobs/{job}``: one job: its state, times, prediction and why it
  waits, the API's answer (``GET /v1/clusters/{c}/jobs/{job}``) as a page; the search box
  of every cluster page leads there (``/ui/clusters/{c}/jobs?id=...``).

Every page checks the token before it reads anything.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from cpsched.service.cluster import ClusterRuntime
from cpsched.service.deps import ClusterName, OrchestratorDep
from cpsched.service.orchestrator import Orchestrator
from cpsched.service.settings import TokenConfig
from cpsched.service.shadow import SHADOW_TOLERANCE_S
from cpsched.service.store import dashboard, history
from cpsched.service.ui import charts, gantt
from cpsched.service.ui.figures import (
    accuracy,
    error_over_time,
    latency_figures,
    shadow_figures,
    waits_by_class,
)
from cpsched.service.ui.live import live_view
from cpsched.service.ui.queue_order import (
    DESCENDING_FIRST,
    QueueQuery,
    SortKey,
    link,
    sort_links,
)
from cpsched.service.ui.render import page
from cpsched.service.ui.session import viewer

router = APIRouter(prefix="/ui", include_in_schema=False)
Viewer = Annotated[TokenConfig, Depends(viewer)]

LOG_PAGE = 100
HOURS = (1, 6, 24, 72)


class PageError(Exception):
    """A page that cannot be shown: its status and why (rendered as an HTML page)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _visible(orchestrator: Orchestrator, token: TokenConfig) -> list[str]:
    with orchestrator.sessions() as session:
        return [name for name in history.cluster_names(session) if token.allows(name)]


def _open_cluster(
    orchestrator: Orchestrator, token: TokenConfig, cluster: str
) -> tuple[ClusterRuntime, int]:
    """The cluster's runtime and id, if this token may see it and the service knows it."""
    if not token.allows(cluster):
        raise PageError(403, f"Token {token.name!r} has no rights to cluster {cluster!r}.")
    with orchestrator.sessions() as session:
        cluster_id = dashboard.cluster_id_of(session, cluster)
    if cluster_id is None:
        raise PageError(404, f"This service has never been sent anything for {cluster!r}.")
    return orchestrator.runtime(cluster), cluster_id


def _context(
    orchestrator: Orchestrator, token: TokenConfig, cluster: str | None, tab: str
) -> dict[str, Any]:
    return {
        "clusters": _visible(orchestrator, token),
        "cluster": cluster,
        "tab": tab,
        "viewer": token.name,
    }


@router.get("")
def root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/")
def index(request: Request, token: Viewer, orchestrator: OrchestratorDep) -> HTMLResponse:
    context = _context(orchestrator, token, None, "index")
    rows = []
    with orchestrator.sessions() as session:
        for name in context["clusters"]:
            cluster_id = dashboard.cluster_id_of(session, name)
            last = dashboard.decision_page(session, cluster_id, limit=1) if cluster_id else []
            rows.append({"name": name, "last": last[0] if last else None})
    return page(request, "index.html", {**context, "rows": rows})


@router.get("/clusters/{cluster}")
def queue(
    request: Request,
    cluster: ClusterName,
    token: Viewer,
    orchestrator: OrchestratorDep,
    page_number: Annotated[int, Query(alias="page", ge=1, le=1_000_000)] = 1,
    sort: Annotated[SortKey, Query()] = "position",
    direction: Annotated[Literal["asc", "desc"] | None, Query(alias="dir")] = None,
    user: Annotated[str, Query(max_length=256)] = "",
    partition: Annotated[str, Query(max_length=1024)] = "",
    qos: Annotated[str, Query(max_length=1024)] = "",
) -> HTMLResponse:
    """The queue as ``squeue`` lists it, sorted and filtered over the whole queue
    (``?sort=wait&dir=desc&user=...&partition=...&qos=...&page=N``), and the Gantt chart."""
    runtime, _ = _open_cluster(orchestrator, token, cluster)
    descending = sort in DESCENDING_FIRST if direction is None else direction == "desc"
    query = QueueQuery(sort, descending, user.strip(), partition.strip(), qos.strip())
    live = live_view(runtime, query, page_number)
    layout = gantt.layout(live) if live is not None else None
    chart = gantt.render(layout) if layout is not None else None
    context = _context(orchestrator, token, cluster, "queue")
    return page(
        request,
        "queue.html",
        {
            **context,
            "live": live,
            "gantt": chart,
            "layout": layout,
            "query": query,
            "sort_links": sort_links(query),
            "page_link": lambda n: link(query, n),
            "clear_link": link(query, user="", partition="", qos=""),
        },
    )


@router.get("/clusters/{cluster}/jobs")
def find_job(
    cluster: ClusterName,
    token: Viewer,
    orchestrator: OrchestratorDep,
    job_id: Annotated[str, Query(alias="id", min_length=1, max_length=256)],
) -> RedirectResponse:
    """The search box: the job's page."""
    _open_cluster(orchestrator, token, cluster)
    return RedirectResponse(f"/ui/clusters/{quote(cluster)}/jobs/{quote(job_id.strip())}", 303)


@router.get("/clusters/{cluster}/jobs/{job_id}")
def job_page(
    request: Request,
    cluster: ClusterName,
    job_id: Annotated[str, Path(min_length=1, max_length=256)],
    token: Viewer,
    orchestrator: OrchestratorDep,
) -> HTMLResponse:
    _open_cluster(orchestrator, token, cluster)
    info = orchestrator.job_info(cluster, job_id)  # the API's answer, one function
    context = _context(orchestrator, token, cluster, "job")
    status = 404 if info.state == "unknown" else 200
    return page(request, "job.html", {**context, "job": info}, status)


@router.get("/clusters/{cluster}/decisions")
def decisions(
    request: Request,
    cluster: ClusterName,
    token: Viewer,
    orchestrator: OrchestratorDep,
    fallbacks: Annotated[bool, Query()] = False,
    before: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> HTMLResponse:
    _, cluster_id = _open_cluster(orchestrator, token, cluster)
    with orchestrator.sessions() as session:
        rows = dashboard.decision_page(
            session, cluster_id, before_id=before, fallbacks_only=fallbacks, limit=LOG_PAGE
        )
    context = _context(orchestrator, token, cluster, "decisions")
    older = rows[-1].id if len(rows) == LOG_PAGE else None
    return page(
        request,
        "decisions.html",
        {**context, "rows": rows, "fallbacks": fallbacks, "before": before, "older": older},
    )


@router.get("/clusters/{cluster}/decisions/{decision_id}")
def decision(
    request: Request,
    cluster: ClusterName,
    decision_id: Annotated[int, Path(ge=1, le=2**62)],
    token: Viewer,
    orchestrator: OrchestratorDep,
) -> HTMLResponse:
    runtime, cluster_id = _open_cluster(orchestrator, token, cluster)
    with orchestrator.sessions() as session:
        row = dashboard.decision_of(session, cluster_id, decision_id)
    if row is None:
        raise PageError(404, f"No decision #{decision_id} on {cluster}.")
    context = _context(orchestrator, token, cluster, "decisions")
    deadline_ms = runtime.policy.deadline * 1000
    return page(request, "decision.html", {**context, "row": row, "deadline_ms": deadline_ms})


@router.get("/clusters/{cluster}/predictions")
def predictions(
    request: Request, cluster: ClusterName, token: Viewer, orchestrator: OrchestratorDep
) -> HTMLResponse:
    runtime, cluster_id = _open_cluster(orchestrator, token, cluster)
    with orchestrator.sessions() as session:
        outcomes = dashboard.prediction_outcomes(session, cluster_id)
    context = _context(orchestrator, token, cluster, "predictions")
    return page(
        request,
        "predictions.html",
        {
            **context,
            "jobs": len(outcomes),
            "predictor": runtime.predictor.name,
            "accuracy": accuracy(outcomes),
            "scatter": charts.prediction_scatter(outcomes) if outcomes else None,
            "errors": charts.error_chart(error_over_time(outcomes)) if outcomes else None,
        },
    )


SHADOW_ROWS = 50
"""Jobs the shadow table lists: the latest started of the verdict chosen."""


@router.get("/clusters/{cluster}/latency")
def latency(
    request: Request,
    cluster: ClusterName,
    token: Viewer,
    orchestrator: OrchestratorDep,
    hours: Annotated[int, Query(ge=1, le=24 * 30)] = 6,
    tolerance: Annotated[int, Query(ge=0, le=86400)] = SHADOW_TOLERANCE_S,
    verdict: Annotated[Literal["all", "earlier", "same", "later"], Query()] = "all",
) -> HTMLResponse:
    runtime, cluster_id = _open_cluster(orchestrator, token, cluster)
    with orchestrator.sessions() as session:
        points = dashboard.decision_series(session, cluster_id)
        record = dashboard.shadow_record(session, cluster_id)
        figures = latency_figures(points, hours)
        finished = dashboard.finished_waits(session, cluster_id, figures.start) if points else []
    class_waits = waits_by_class(finished, figures.start, figures.end)
    deadline_ms = runtime.policy.deadline * 1000
    with runtime.lock:
        snapshot = runtime.last_snapshot
    running = {rj.job.id: rj.start for rj in snapshot.running} if snapshot else {}
    shadow = shadow_figures(record, running, tolerance) if record.first is not None else None
    context = _context(orchestrator, token, cluster, "latency")
    return page(
        request,
        "latency.html",
        {
            **context,
            "hours": hours,
            "hour_choices": HOURS,
            "figures": figures,
            "deadline_ms": deadline_ms,
            "latency_chart": charts.latency_chart(figures, deadline_ms) if points else None,
            "fallback_chart": charts.fallback_chart(figures) if points else None,
            "queue_chart": charts.queue_chart(figures) if points else None,
            "utilisation_chart": charts.utilisation_chart(figures) if points else None,
            "wait_chart": charts.longest_wait_chart(figures) if points else None,
            "class_wait_chart": charts.class_wait_chart(class_waits, figures.start, figures.end),
            "shadow": shadow,
            "shadow_chart": charts.shadow_chart(shadow) if shadow and shadow.jobs else None,
            "verdict": verdict,
            "tolerance": tolerance,
            "listed": (
                [j for j in shadow.jobs if verdict in ("all", j.verdict)][-SHADOW_ROWS:][::-1]
                if shadow
                else []
            ),
        },
    )
