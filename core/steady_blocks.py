"""Placing a block job where the workload manager's own split cannot drift.

A block job (:mod:`cpsched.core.layout`) pinned to several nodes is split by Slurm when
it allocates it, a second or so after the snapshot: one task on every node, then the
nodes filled in node order, each with as many tasks as fit *then*. A job that ends in
between on one of those nodes leaves more room there, so Slurm puts more tasks on it and
fewer on the later ones: the job runs on another split than decided. (On the live test
bed most remaining mismatches were that.) A node with no running job cannot gain room,
and the last node in order gets what is left whatever its room. So a block start is
*steady* when it uses one node, or when every node but the last in order is idle in the
snapshot (nothing running on it; this decision's other starts do not end meanwhile).

:class:`SteadyBlocks` wraps an allocator: a block job's placement that is not steady is
replaced by a steady one on the same free capacity when there is one (the fewest nodes:
idle ones, plus one last node that may be in use), else kept. Other jobs go straight
through, so replays of traces (no block jobs) place exactly as before.
"""

from __future__ import annotations

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity, units_fitting
from cpsched.core.durations import Durations
from cpsched.core.layout import block_layout
from cpsched.core.problem import Allocation, Job, Snapshot


class SteadyBlocks:
    """``inner``, with block jobs placed steadily where they can be (module doc)."""

    def __init__(self, inner: Allocator) -> None:
        self.inner = inner
        self.name = inner.name
        self._snapshot: Snapshot | None = None
        self._idle: frozenset[int] | None = None

    def observe(self, snapshot: Snapshot, durations: Durations) -> None:
        observe = getattr(self.inner, "observe", None)
        if observe is not None:
            observe(snapshot, durations)
        self._snapshot = snapshot
        self._idle = None  # found when a block job first needs it: replays have none

    def place(self, job: Job, free: FreeCapacity) -> Allocation | None:
        allocation = self.inner.place(job, free)
        if job.layout != "block" or allocation is None or self.steady(allocation):
            return allocation
        return steady_placement(job, free, self.idle()) or allocation

    def idle(self) -> frozenset[int]:
        """The nodes no running job of the observed snapshot uses."""
        if self._idle is None:
            snapshot = self._snapshot
            if snapshot is None:
                return frozenset()
            running = {node for rj in snapshot.running for node, _ in rj.allocation}
            self._idle = frozenset(range(len(snapshot.nodes))) - running
        return self._idle

    def steady(self, allocation: Allocation) -> bool:
        """Whether every node of ``allocation`` but the last in node order is idle."""
        idle = self.idle()
        return all(node in idle for node, _ in sorted(allocation)[:-1])


def steady_placement(job: Job, free: FreeCapacity, idle: frozenset[int]) -> Allocation | None:
    """The fewest nodes of ``free`` that hold ``job`` with every node but the last (in
    node order) in ``idle``, split the block way; None if there are none."""
    c = job.constraints
    most = c.tasks_per_node if c is not None and c.tasks_per_node is not None else job.units
    fits = [min(units_fitting(row, job.wanted), most) for row in free.rows()]
    # Idle nodes, most room first: the ones to fill before a last node.
    roomy = sorted((n for n in idle if fits[n] > 0), key=lambda n: (-fits[n], n))
    best: list[int] | None = None
    for last, fit in enumerate(fits):
        if fit < 1:
            continue
        chosen, held = [last], fit
        for node in roomy:
            if held >= job.units or (best is not None and len(chosen) >= len(best)):
                break
            if node < last:
                chosen.append(node)
                held += fits[node]
        if held >= job.units and len(chosen) <= job.units:
            if best is None or len(chosen) < len(best):
                best = chosen
            if len(best) == 1:
                break
    if best is None:
        return None
    return block_layout(job.units, [(n, fits[n]) for n in best])
