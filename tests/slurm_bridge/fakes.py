"""A fake workload manager and a scripted service for unit tests (the real Slurm is for
the ``slurm`` tests); states are built with the helpers below."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import httpx

from cpsched.slurm_bridge.backend import ExactSplit
from cpsched.slurm_bridge.errors import BridgeError
from cpsched.slurm_bridge.model import ClusterState, JobShape, JobView, NodeView


def node(
    name: str, cpu: int = 4, mem: int = 4000, gpu: int = 0, used_cpu: int = 0, state: str = "up"
) -> NodeView:
    capacity = {"cpu": cpu, "mem": mem} | ({"gpu": gpu} if gpu else {})
    return NodeView(
        name=name, capacity=capacity, used={"cpu": used_cpu, "mem": 0, "gpu": 0}, state=state
    )  # type: ignore[arg-type]


def held(job_id: str, cpu: int = 1, units: int = 1, **kw: object) -> JobView:
    shape = kw.pop("shape", None) or JobShape(
        units=units, per_unit={"cpu": cpu}, single_node=units == 1
    )
    return JobView(
        id=job_id,
        user="u",
        group="g",
        name=f"job {job_id}",
        partition="batch",
        state="pending",
        submit=100,
        time_limit_s=600,
        shape=shape,
        held_for_us=True,
        tagged=True,
        **kw,
    )  # type: ignore[arg-type]


def running(
    job_id: str, nodes: dict[str, int], cpu: int = 1, limit: int = 600, start: int = 900
) -> JobView:
    units = sum(nodes.values())
    return JobView(
        id=job_id,
        user="u",
        group="g",
        name="r",
        partition="batch",
        state="running",
        submit=100,
        time_limit_s=limit,
        shape=JobShape(units=units, per_unit={"cpu": cpu}, single_node=units == 1),
        start=start,
        allocation=nodes,
        tagged=True,
        priority=1,
    )


@dataclass
class FakeCluster:
    """Holds a state; records every action; ``fail`` makes a command raise."""

    state: ClusterState
    calls: list[tuple[str, ...]] = field(default_factory=list)
    ended: list[JobView] = field(default_factory=list)
    name: str = "fake"
    splits_tasks: bool = True
    pins_splits: bool = False
    finished_forgeable: bool = False
    ends_trials: bool = True
    finished_error: BridgeError | None = None  # finished_jobs raises it
    exact: dict[str, ExactSplit] = field(default_factory=dict)  # job → cores it was pinned to

    def read_state(self) -> ClusterState:
        return self.state

    def _set(self, job_id: str, **changes: object) -> None:
        self.state = replace(
            self.state,
            jobs=[replace(j, **changes) if j.id == job_id else j for j in self.state.jobs],
        )

    def start(
        self,
        job_id: str,
        allocation: Mapping[str, int],
        *,
        cpus_per_node: int | None = None,
        partition: str | None = None,
        exact: ExactSplit | None = None,
    ) -> None:
        nodes = list(allocation)
        self.calls.append(("start", job_id, *nodes))
        if exact is not None:
            self.exact[job_id] = exact
        self._set(job_id, held_for_us=False, priority=1, required_nodes=tuple(nodes))

    def settle(self, state: ClusterState) -> list[str]:
        return []

    def hold(self, job_id: str, *, unpin: bool) -> None:
        self.calls.append(("hold", job_id, str(unpin)))
        self._set(job_id, held_for_us=True, priority=0)

    def requeue_hold(self, job_id: str) -> None:
        self.calls.append(("requeue_hold", job_id))
        job = next(j for j in self.state.jobs if j.id == job_id)
        self._set(
            job_id,
            state="pending",
            held_for_us=True,
            priority=0,
            start=None,
            allocation={},
            required_nodes=(),
            restarts=job.restarts + 1,
            submit=self.state.time,  # as Slurm does (recorded on 22.05 and 24.11)
        )

    def release_to_native(self, job_id: str) -> None:
        self.calls.append(("release", job_id))
        self._set(job_id, held_for_us=False, priority=1)

    def extend(self, job_id: str, new_limit_s: int) -> None:
        self.calls.append(("extend", job_id, str(new_limit_s)))

    def finished_jobs(self, state: ClusterState) -> list[JobView]:
        if self.finished_error is not None:
            raise self.finished_error
        return list(self.ended)


def decision(
    starts: dict[str, dict[str, int]] | None = None,
    extensions: dict[str, int] | None = None,
    dry_run: bool = False,
) -> dict:
    return {
        "cluster": "test",
        "decision_id": None if dry_run else 1,
        "time": 1000,
        "dry_run": dry_run,
        "starts": [
            {"job_id": j, "allocation": a, "predicted_run_time": 60}
            for j, a in (starts or {}).items()
        ],
        "extensions": [
            {"job_id": j, "new_time_limit": s, "reason": "correction"}
            for j, s in (extensions or {}).items()
        ],
        "planned": None,
        "rejected": [],
        "diagnostics": {
            "dispatcher": "easy",
            "solver_status": "heuristic",
            "fallback": False,
            "restarts": 0,
            "wall_ms": 1.0,
            "solve_ms": 0.5,
        },
    }


@dataclass
class ScriptedService:
    """An httpx MockTransport handler: answers dispatch with ``answer`` or fails."""

    answer: Callable[[dict], dict] = lambda body: decision()
    down: bool = False
    locked_by: str | None = None  # another bridge holds the writer lease: 423
    posted_finished: list[dict] = field(default_factory=list)
    dispatches: list[dict] = field(default_factory=list)
    writers: list[str] = field(default_factory=list)  # each dispatch's X-Cpsched-Writer

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        body = json.loads(request.content)
        if request.url.path.endswith("/dispatch"):
            self.writers.append(request.headers.get("X-Cpsched-Writer", ""))
            if self.locked_by is not None:
                detail = f"bridge {self.locked_by!r} holds its writer lease"
                return httpx.Response(423, json={"error": "writer_conflict", "detail": detail})
            self.dispatches.append(body)
            return httpx.Response(200, json=self.answer(body))
        if request.url.path.endswith("/jobs/finished"):
            seen = {j["id"] for j in self.posted_finished}
            new = [j for j in body["jobs"] if j["id"] not in seen]
            self.posted_finished += new
            return httpx.Response(
                200, json={"stored": len(new), "duplicates": len(body["jobs"]) - len(new)}
            )
        return httpx.Response(404, json={"error": "not_found", "detail": request.url.path})
