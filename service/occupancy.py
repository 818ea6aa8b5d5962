"""How loaded a cluster is in one snapshot: the share of its capacity in use and the
longest current wait. Set as gauges on ``/metrics`` and kept in each audit row's
diagnostics, from which the dashboard draws them over time."""

from __future__ import annotations

from cpsched.core import Snapshot


def longest_wait(snapshot: Snapshot) -> int:
    """Seconds the longest-waiting queued job has waited, among those the workload
    manager does not hold back (a dependency, a user hold: not cpsched's to start)."""
    return max(
        (
            snapshot.time - job.submit
            for job in snapshot.queued
            if job.constraints is None or job.constraints.eligible
        ),
        default=0,
    )


def utilisation(snapshot: Snapshot) -> dict[str, float]:
    """Per resource type, the share of the nodes' capacity the running jobs hold (a node
    a job takes whole counts as wholly used), rounded to 0.1 %; types with no capacity
    are left out."""
    return {
        name: round(1 - free / capacity, 4)
        for name, free, capacity in zip(
            snapshot.resource_names, snapshot.free_total, snapshot.capacity_total, strict=True
        )
        if capacity > 0
    }
