"""What the routes depend on: path parameters, the token check, the orchestrator.

Everything is read from ``request.app.state`` (set by :func:`cpsched.service.app.create_app`),
so the routes are plain module-level functions that tests can mount on any app.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from sqlalchemy import Engine

from cpsched.service.auth import authorise
from cpsched.service.metrics import ServiceMetrics
from cpsched.service.orchestrator import Orchestrator

ClusterName = Annotated[
    str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
]
JobId = Annotated[str, Path(min_length=1, max_length=256)]


def token_for_cluster(cluster: ClusterName, request: Request) -> str:
    """The token's name if it may post to ``cluster``: a dependency, so that a request
    without rights is refused before its body is even validated."""
    return authorise(request, request.app.state.settings.tokens, cluster)


def reader_of_cluster(cluster: ClusterName, request: Request) -> str:
    """The token's name if it may read ``cluster`` (a read-only token may)."""
    return authorise(request, request.app.state.settings.tokens, cluster, write=False)


def orchestrator_of(request: Request) -> Orchestrator:
    orchestrator: Orchestrator = request.app.state.orchestrator
    return orchestrator


def metrics_of(request: Request) -> ServiceMetrics:
    metrics: ServiceMetrics = request.app.state.metrics
    return metrics


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


Authorised = Annotated[str, Depends(token_for_cluster)]
"""A token that may post to the cluster."""
Reader = Annotated[str, Depends(reader_of_cluster)]
"""A token that may read the cluster (read-only tokens too)."""
OrchestratorDep = Annotated[Orchestrator, Depends(orchestrator_of)]
MetricsDep = Annotated[ServiceMetrics, Depends(metrics_of)]
EngineDep = Annotated[Engine, Depends(engine_of)]
