"""Replay over HTTP: the simulated cluster asks a running service what to do.

:class:`RemoteScheduler` takes both roles the simulator gives the dispatch core: it is
the dispatcher (each call posts the snapshot to ``/dispatch``) and the predictor (the
service predicts; a started job's duration is the prediction the service returned with
its start). Finished jobs are posted in batches before the next dispatch, as a bridge
would, so the service learns exactly what an in-process predictor would have learnt.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import httpx

from cpsched.core import Decision, Diagnostics, Extension, Job, Snapshot, Start
from cpsched.errors import CpschedError
from cpsched.predictor.base import FinishedJob
from cpsched.wire.schemas import (
    DecisionOut,
    DispatchRequest,
    FinishedBatch,
    FinishedJobIn,
    JobIn,
    NodeIn,
    RunningJobIn,
)

BATCH = 1000
"""Finished jobs per POST (the service takes up to 10,000)."""


class ServiceError(CpschedError):
    """The service refused a request or could not be reached."""


def _per_unit(job: Job, names: tuple[str, ...]) -> dict[str, int]:
    return {name: amount for name, amount in zip(names, job.unit_request, strict=True) if amount}


def _job_fields(job: Job, names: tuple[str, ...]) -> dict[str, Any]:
    return {
        "id": job.id,
        "user": job.user,
        "group": job.group,
        "name": job.name,
        "partition": job.queue,
        "submit": job.submit,
        "time_limit": job.time_limit,
        "units": job.units,
        "per_unit": _per_unit(job, names),
    }


def to_wire(snapshot: Snapshot, *, dry_run: bool = False) -> DispatchRequest:
    names = snapshot.resource_names
    nodes = snapshot.nodes
    return DispatchRequest(
        time=snapshot.time,
        dry_run=dry_run,
        nodes=[
            NodeIn(name=node.name, resources=dict(zip(names, node.capacity, strict=True)))
            for node in nodes
        ],
        running=[
            RunningJobIn(
                **{**_job_fields(rj.job, names), "time_limit": rj.time_limit},
                start=rj.start,
                allocation={nodes[node].name: units for node, units in rj.allocation},
                extensions=rj.extensions,
            )
            for rj in snapshot.running
        ],
        queued=[JobIn(**_job_fields(job, names)) for job in snapshot.queued],
    )


def from_wire(answer: DecisionOut, snapshot: Snapshot) -> Decision:
    index = {node.name: i for i, node in enumerate(snapshot.nodes)}
    d = answer.diagnostics
    return Decision(
        starts=tuple(
            Start(s.job_id, tuple((index[name], units) for name, units in s.allocation.items()))
            for s in answer.starts
        ),
        extensions=tuple(
            Extension(e.job_id, e.new_time_limit, e.reason) for e in answer.extensions
        ),
        planned=answer.planned,
        diagnostics=Diagnostics(
            dispatcher=d.dispatcher,
            solver_status=d.solver_status,
            fallback=d.fallback,
            fallback_reason=d.fallback_reason,
            restarts=d.restarts,
            model_variables=d.model_variables,
            model_constraints=d.model_constraints,
            model_intervals=d.model_intervals,
            notes=tuple(d.notes),
        ),
    )


class RemoteScheduler:
    """Dispatcher and predictor for the simulator, both answered by the service."""

    name = "service"

    def __init__(
        self, base_url: str, cluster: str, *, token: str | None = None, timeout: float = 120.0
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)
        self.cluster = cluster
        self._finished: list[FinishedJobIn] = []
        self._predicted: dict[str, int] = {}
        self._names: tuple[str, ...] = ()
        self.http_s = 0.0
        """Seconds spent in HTTP calls (the service's work included)."""
        self.calls = 0

    # -- the predictor role -------------------------------------------------------------

    def observe(self, finished: FinishedJob) -> None:
        job = finished.job
        self._finished.append(
            FinishedJobIn(
                **_job_fields(job, self._names),
                start=finished.start,
                end=finished.end,
                state="completed",
            )
        )

    def predict(self, job: Job, t: int) -> int:
        # A start's prediction came with the decision; before that the service keeps its
        # own, and the simulator's copy of it is never read (the service dispatches).
        return self._predicted.pop(job.id, job.time_limit)

    # -- the dispatcher role ------------------------------------------------------------

    def decide(self, snapshot: Snapshot, durations: Mapping[str, int]) -> Decision:
        self._names = snapshot.resource_names
        self.flush()
        answer = DecisionOut.model_validate(
            self._post(f"/v1/clusters/{self.cluster}/dispatch", to_wire(snapshot))
        )
        if answer.rejected:
            raise ServiceError(
                f"the service rejected jobs of a replayed snapshot: {answer.rejected[0].reason}"
            )
        self._predicted.update({s.job_id: s.predicted_run_time for s in answer.starts})
        return from_wire(answer, snapshot)

    def flush(self) -> None:
        """Post the finished jobs not yet acknowledged."""
        while self._finished:
            batch = self._finished[:BATCH]
            self._post(f"/v1/clusters/{self.cluster}/jobs/finished", FinishedBatch(jobs=batch))
            del self._finished[: len(batch)]

    def _post(self, path: str, body: DispatchRequest | FinishedBatch) -> dict[str, object]:
        began = time.perf_counter()
        try:
            response = self.client.post(
                path,
                content=body.model_dump_json(),
                headers={"content-type": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise ServiceError(
                f"cannot reach the service at {self.client.base_url}: {exc}"
            ) from None
        finally:
            self.http_s += time.perf_counter() - began
            self.calls += 1
        if response.status_code != 200:
            raise ServiceError(
                f"the service answered {response.status_code} to POST {path}: {response.text[:500]}"
            )
        return response.json()

    def close(self) -> None:
        self.client.close()
