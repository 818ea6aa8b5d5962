"""Block layout: allocations a workload manager that spreads tasks itself reproduces.

Slurm, given a job of k tasks pinned to exactly the nodes S (``NodeList=S``,
``NumNodes=|S|``), puts one task on every node of S, then fills the nodes of S in its
node order, each with as many further tasks as fit, until the k tasks are placed. Any
other per-node split of the same job is not reproducible: Slurm would run it its own
way. Jobs that must be started like that carry ``layout="block"``
(:data:`cpsched.core.problem.Layout`), and every dispatcher's decision is passed
through :func:`lay_out`, which keeps each such start on the nodes its dispatcher chose
and re-splits its units the block way — the nodes' order being the snapshot's, which
the bridge sends in Slurm's order.

The re-split only ever uses capacity that nothing else in the decision uses: a block
job's room on a node is what is free after every start of the decision, plus its own
share. So a decision stays feasible, and a block start's per-node counts are exactly
what Slurm gives it once the decision's other starts on the same nodes hold theirs.
"""

from __future__ import annotations

from dataclasses import replace

from cpsched.core.capacity import FreeCapacity, units_fitting
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.problem import Allocation, Decision, Job, Snapshot, Start

MAX_PASSES = 8
"""Re-split passes at most; a decision still changing after them is returned as it is
(the bridge defers a start whose split depends on the others', ``apply.slurm_split_now``)."""


def block_layout(units: int, fits: list[tuple[int, int]]) -> Allocation:
    """Slurm's split of ``units`` tasks over nodes given as ``(node, units that fit)``.

    One unit on every node, then the rest on the nodes in index order, each up to what
    fits. Every node must fit at least one unit and the fits must add up to ``units`` or
    more (true of the nodes a feasible allocation uses, with its own share counted in).
    """
    ordered = sorted(fits)
    left = units - len(ordered)
    placed: list[tuple[int, int]] = []
    for node, fit in ordered:
        extra = min(fit - 1, left)
        left -= extra
        placed.append((node, 1 + extra))
    if left or any(fit < 1 for _, fit in ordered):
        raise ValueError(f"{units} units do not fit the nodes {ordered}")
    return tuple(placed)


def lay_out(
    snapshot: Snapshot, decision: Decision, started: dict[str, Job] | None = None
) -> Decision:
    """``decision`` with each start of a block job re-split the block way (module doc)."""
    if not decision.starts:
        return decision
    if started is None:
        started = started_jobs(snapshot, decision.starts)
    if not any(job.layout == "block" for job in started.values()):
        return decision
    free = FreeCapacity.of(snapshot)
    for start in decision.starts:
        free.take(start.allocation, started[start.job_id])
    # What the other starts use never changes; block starts are re-split one by one. A
    # re-split changes the room of a block job sharing its nodes, re-split before it: so
    # the passes repeat until no split changes (two or three, in the property tests).
    starts = list(decision.starts)
    for _ in range(MAX_PASSES):
        changed = False
        for i, start in enumerate(starts):
            job = started[start.job_id]
            if job.layout != "block" or len(start.allocation) < 2:
                continue
            free.give(start.allocation, job)  # its own share is room for it again
            most = most_per_node(job)
            fits = [
                (node, min(units_fitting(free.row(node), job.wanted), most))
                for node, _ in start.allocation
            ]
            allocation = block_layout(job.units, fits)
            free.take(allocation, job)
            if allocation != start.allocation:
                starts[i] = Start(start.job_id, allocation)
                changed = True
        if not changed:
            break
    return replace(decision, starts=tuple(starts))


def most_per_node(job: Job) -> int:
    """Units a node may hold of ``job``: its tasks-per-node rule, which Slurm's split
    follows too (``-n 4 --ntasks-per-node=2`` on two nodes runs 2 + 2)."""
    c = job.constraints
    return c.tasks_per_node if c is not None and c.tasks_per_node is not None else job.units


def started_jobs(snapshot: Snapshot, starts: tuple[Start, ...]) -> dict[str, Job]:
    """The queued jobs ``starts`` start, by id (the queue scan stops once all are seen)."""
    wanted = {s.job_id for s in starts}
    found: dict[str, Job] = {}
    for job in snapshot.queued:
        if job.id in wanted:
            found[job.id] = job
            if len(found) == len(wanted):
                break
    return found


class LayingOutDispatcher:
    """``inner``'s decision with its block-layout starts re-split (see :func:`lay_out`)."""

    def __init__(self, inner: Dispatcher) -> None:
        self.inner = inner
        self.name = inner.name

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        return lay_out(snapshot, self.inner.decide(snapshot, durations))

    def __getattr__(self, name: str) -> object:
        # Transparent: what the wrapped dispatcher exposes (its allocator, state,
        # search settings, fallback) reads the same through the wrapper.
        return getattr(self.inner, name)
