"""Builders for dispatch-core objects used across the tests."""

from __future__ import annotations

from collections.abc import Sequence

from cpsched.core import Job, Node, RunningJob, Snapshot, make_snapshot

CPU_ONLY = ("cpu",)


def nodes(*capacities: int | tuple[int, ...]) -> tuple[Node, ...]:
    """Nodes ``n0, n1, …``; an int is a cpu-only capacity."""
    return tuple(
        Node(f"n{i}", (c,) if isinstance(c, int) else tuple(c)) for i, c in enumerate(capacities)
    )


def job(
    id: str,
    *,
    submit: int = 0,
    limit: int = 100,
    units: int = 1,
    unit: int | tuple[int, ...] = 1,
    user: str = "u",
) -> Job:
    ureq = (unit,) if isinstance(unit, int) else tuple(unit)
    return Job(id=id, submit=submit, time_limit=limit, units=units, unit_request=ureq, user=user)


def running(j: Job, start: int, allocation: Sequence[tuple[int, int]]) -> RunningJob:
    return RunningJob(j, start, j.time_limit, tuple(allocation))


def snapshot(
    time: int,
    machine: Sequence[Node],
    run: Sequence[RunningJob] = (),
    queue: Sequence[Job] = (),
    resources: Sequence[str] = CPU_ONLY,
) -> Snapshot:
    return make_snapshot(time, resources, machine, run, queue)


def limits_as_durations(snap: Snapshot) -> dict[str, int]:
    """The wall-time approach: every job runs for its limit."""
    d = {j.id: j.time_limit for j in snap.queued}
    d.update({rj.job.id: rj.job.time_limit for rj in snap.running})
    return d
