"""Placing a job where the site's rules allow: an allocator wrapper every dispatcher uses.

The allocators only know free capacity; the rules (:mod:`cpsched.core.site`) say which
nodes a job may use, how many, how many units on each, and whether it takes its nodes
whole. :class:`SitePlacement` wraps any allocator: before a dispatcher's call it reads
the snapshot's rules (it is an observing allocator, see :mod:`cpsched.core.contextual`),
and for each constrained job it hands the inner allocator only the nodes the job may use
(for an exclusive job, only those wholly free), then checks the node counts, re-placing
the job itself when the inner allocator's answer breaks them. Unconstrained jobs on a
snapshot without rules go straight to the inner allocator.

Reservation windows are judged for a start *now*: every start a dispatcher returns is
one, so they always hold; a reservation or plan for a later time is computed with the
nodes allowed now (a plan, not a promise).
"""

from __future__ import annotations

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity, units_fitting
from cpsched.core.durations import Durations
from cpsched.core.layout import block_layout
from cpsched.core.problem import Allocation, Job, Node, Snapshot
from cpsched.core.site import NO_SITE, NodeChoice, Site, node_choices, node_limits


class SitePlacement:
    """``inner``, placing each job only where the snapshot's rules let it go."""

    def __init__(self, inner: Allocator) -> None:
        self.inner = inner
        self.name = inner.name
        self._site: Site = NO_SITE
        self._no_site = True  # self._site.empty, read per placement: kept, not derived
        self._now = 0
        self._nodes: tuple[Node, ...] = ()
        self._features: tuple[frozenset[str], ...] = ()
        self._choices: dict[str, list[NodeChoice]] = {}

    def observe(self, snapshot: Snapshot, durations: Durations) -> None:
        observe = getattr(self.inner, "observe", None)
        if observe is not None:
            observe(snapshot, durations)
        self._site = snapshot.site
        self._no_site = snapshot.site.empty
        self._now = snapshot.time
        if snapshot.nodes is not self._nodes:
            self._nodes = snapshot.nodes
            self._features = tuple(node.features for node in snapshot.nodes)
        self._choices = {}

    def restricts(self, job: Job) -> bool:
        """Whether some rule may keep ``job`` from some nodes in this call."""
        return job.constraints is not None or not self._no_site

    def place(self, job: Job, free: FreeCapacity) -> Allocation | None:
        if job.constraints is None and self._no_site:
            return self.inner.place(job, free)
        choices = self._choices.get(job.id)
        if choices is None:
            choices = node_choices(
                job.constraints, job.time_limit, self._site, self._features, self._now
            )
            self._choices[job.id] = choices
        for choice in choices:
            allocation = self._place_on(job, free, choice)
            if allocation is not None:
                return allocation
        return None

    def _place_on(self, job: Job, free: FreeCapacity, choice: NodeChoice) -> Allocation | None:
        within = self._within(job, free, choice)
        low, high = node_limits(job.constraints, choice)
        per_node = job.constraints.tasks_per_node if job.constraints is not None else None
        allocation = self.inner.place(job, within)
        if allocation is not None and _counts_hold(allocation, low, high, per_node):
            return allocation
        if low == 1 and high is None and per_node is None:
            return None  # nothing to re-place for: the inner allocator found no room
        allocation = place_by_count(job, within, low, high, per_node)
        vet = getattr(self.inner, "vet", None)  # the inner placer's own conditions
        if allocation is None or vet is None:
            return allocation
        vetted: Allocation | None = vet(job, allocation, within)
        return vetted

    def _within(self, job: Job, free: FreeCapacity, choice: NodeChoice) -> FreeCapacity:
        """``free`` with every node the job may not use now emptied."""
        if choice.nodes is None and not job.exclusive:
            return free
        rows = free.rows()
        nodes = self._nodes
        masked: list[tuple[int, ...]] = []
        total = [0] * len(free.total)
        allowed = choice.nodes
        for n, row in enumerate(rows):
            usable = (allowed is None or n in allowed) and (
                not job.exclusive or row == nodes[n].capacity
            )
            if usable:
                masked.append(row)
                for r, amount in enumerate(row):
                    total[r] += amount
            else:
                masked.append(tuple(0 if a > 0 else a for a in row))
        return FreeCapacity(masked, total, free.capacity_total, free.nodes, later=free.later)


def _counts_hold(allocation: Allocation, low: int, high: int | None, per_node: int | None) -> bool:
    count = len(allocation)
    if count < low or (high is not None and count > high):
        return False
    return per_node is None or all(units <= per_node for _, units in allocation)


def place_by_count(
    job: Job, free: FreeCapacity, low: int, high: int | None, per_node: int | None
) -> Allocation | None:
    """``job`` on between ``low`` and ``high`` nodes, at most ``per_node`` units on each.

    The nodes that hold the most units are taken first (fewest nodes for the units, which
    a node-count limit needs), then more while fewer than ``low``; the units are split the
    block way (one on each node, then filling in node order), which is also how Slurm
    lays out a job pinned to those nodes.
    """
    wanted = job.wanted
    cap = per_node if per_node is not None else job.units
    fits = sorted(
        (
            (-fit, node)
            for node, row in enumerate(free.rows())
            if (fit := min(units_fitting(row, wanted), cap)) > 0
        ),
    )
    chosen: list[tuple[int, int]] = []
    placed = 0
    for negative, node in fits:
        if placed >= job.units and len(chosen) >= low:
            break
        chosen.append((node, -negative))
        placed -= negative
    if placed < job.units or len(chosen) < low or len(chosen) > job.units:
        return None
    if high is not None and len(chosen) > high:
        return None
    return block_layout(job.units, chosen)
