"""Allocators for heterogeneous machines: balanced, weighted, hybrid, priority-weighted.

They follow Netti's thesis (chapter 5): like first-fit they walk a node
list and put as many units on each node as fit; only the order of the list differs.

* **balanced**: nodes are put in bins by the critical type they *currently* have free
  (the type with the largest free share of the node's capacity when several; a node
  with none free goes to the *none* bin). The list is the none bin, then the other bins
  interleaved by taking the next node of the currently longest bin, so that scarce
  accelerators are used last and evenly. Job-independent.
* **weighted**: per job, the nodes that fit at least one unit, ranked by what would be
  left on them after placing the job there, ``Σ_k w_k · left_k`` ascending. ``w_k =
  avgreq_k · load_k / avl_k`` (:func:`~cpsched.core.allocation_context.queue_weights`);
  ``left_k`` is in node-capacity units (left / the largest node's capacity of ``k``) so
  that MB of memory do not outweigh GPUs a thousandfold; the thesis leaves units open.
* **hybrid**: balanced's bins of the fitting nodes, each sorted by the weighted rule,
  then combined as balanced combines them.
* **priority-weighted**: weighted with ``w_k`` multiplied by a counter ``p_k`` per
  critical type, kept in ``[low, high]`` (default ``[1, 10]``): ``+step`` when
  placing a job needing ``k`` fails, ``-step`` when it succeeds.

These allocators need the snapshot (node capacities, queue, load): the dispatcher that
owns one calls :meth:`observe` once per call, before any placement (``make_dispatcher``
arranges it, see ``core/contextual.py``). ``place`` never changes the
capacity it reads. Priority-weighted's counters are its only state across calls; they
move once per job per call, on the job's first placement attempt of the call (the
capacity its dispatcher offers it to start now). Later attempts in the same call, such
as EASY's search for the blocked job's reservation over future capacities, leave the
counters alone: those are probes of what-ifs, not allocations that failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cpsched.core.allocation_context import (
    DEFAULT_WINDOW,
    AllocationContext,
    MachineShape,
    machine_shape,
    queue_weights,
)
from cpsched.core.capacity import FreeCapacity, take_in_turn, units_fitting
from cpsched.core.durations import Durations
from cpsched.core.problem import Allocation, Job, Node, Snapshot
from cpsched.errors import ConfigError


def fill(order: Iterable[int], fits: Sequence[int], units: int) -> Allocation | None:
    """Walk ``order`` putting as many units on each node as fit (``fits`` by node)."""
    return take_in_turn(units, ((node, fits[node]) for node in order if fits[node]))


def bin_of(row: Sequence[int], capacity: Sequence[int], critical: Sequence[int]) -> int:
    """The critical type whose free share of the node is largest, -1 when none is free.

    Ties go to the type configured first.
    """
    best, best_share = -1, 0.0
    for k in critical:
        if row[k] > 0:
            share = row[k] / capacity[k]
            if share > best_share:
                best, best_share = k, share
    return best


def interleave_longest_first(bins: Sequence[Sequence[int]]) -> list[int]:
    """Take the next node of the bin with the most nodes left until all are empty (ties:
    the earlier bin), so that the shortest bins, the scarcest types, come last.

    Node ``j`` of bin ``i`` is taken while its bin has ``len - j`` nodes left, and the
    heads' keys only shrink along a bin, so that greedy walk is one sort by
    (nodes left then, bin), done in C instead of a max() per node.
    """
    keyed = [
        (j - len(nodes), i, node) for i, nodes in enumerate(bins) for j, node in enumerate(nodes)
    ]
    keyed.sort()
    return [node for _, _, node in keyed]


def balanced_list(
    nodes: Iterable[int], rows: Sequence[Sequence[int]], shape: MachineShape
) -> list[int]:
    """``nodes`` (already in the order each bin keeps) as balanced orders them."""
    none: list[int] = []
    bins: dict[int, list[int]] = {k: [] for k in shape.critical}
    for node in nodes:
        k = bin_of(rows[node], shape.node_capacity[node], shape.critical)
        (none if k < 0 else bins[k]).append(node)
    return none + interleave_longest_first([bins[k] for k in shape.critical])


def weighted_ranking(
    job: Job, rows: Sequence[Sequence[int]], fits: Sequence[int], coefficients: Sequence[float]
) -> list[int]:
    """Nodes fitting at least one unit, least weighted capacity left after the job first
    (ties: node order). ``coefficients`` are ``w_k`` times the type's scale."""
    unit = job.unit_request
    active = [(r, c) for r, c in enumerate(coefficients) if c > 0.0]
    scored: list[tuple[float, int]] = []
    for node, row in enumerate(rows):
        fit = fits[node]
        if fit:
            take = fit if fit < job.units else job.units
            left = 0.0
            for r, c in active:
                left += c * (row[r] - take * unit[r])
            scored.append((left, node))
    scored.sort()
    return [node for _, node in scored]


class ContextualAllocator:
    """Base of the allocators that read the snapshot: holds the per-call context."""

    name = "contextual"

    def __init__(
        self, critical: Sequence[str] | None = None, *, window: int = DEFAULT_WINDOW
    ) -> None:
        if window < 1:
            raise ConfigError(f"the weighted rule's queue window must be >= 1, got {window}")
        self.critical = None if critical is None else tuple(critical)
        self.window = window
        self.context: AllocationContext | None = None
        self._shape_of: tuple[tuple[str, ...], tuple[Node, ...]] | None = None
        self._shape: MachineShape | None = None

    def observe(self, snapshot: Snapshot, durations: Durations) -> None:
        """Read what this call's placements need from ``snapshot``; call once per call."""
        key = (snapshot.resource_names, snapshot.nodes)
        if self._shape is None or (key is not self._shape_of and key != self._shape_of):
            self._shape = machine_shape(snapshot.resource_names, snapshot.nodes, self.critical)
            self._shape_of = key
        self.context = AllocationContext(
            self._shape, queue_weights(snapshot, durations, self.window)
        )

    def _context(self) -> AllocationContext:
        if self.context is None:
            raise ConfigError(
                f"allocator {self.name!r} places jobs only after observe(snapshot, "
                "durations); build the dispatcher with make_dispatcher, which arranges it"
            )
        return self.context

    def place(self, job: Job, free: FreeCapacity) -> Allocation | None:
        if not free.fits_total(job.request):
            return None
        rows = free.rows()
        wanted = job.wanted
        fits = [units_fitting(row, wanted) for row in rows]
        # Most failed placements are decided here, before any ordering work.
        if sum(fits) < job.units:
            return None
        return fill(self._order(job, rows, fits, self._context()), fits, job.units)

    def _order(
        self,
        job: Job,
        rows: Sequence[Sequence[int]],
        fits: Sequence[int],
        context: AllocationContext,
    ) -> list[int]:
        """The node list the walk follows (nodes fitting no unit may be left out)."""
        raise NotImplementedError


class Balanced(ContextualAllocator):
    """No-critical-type nodes first, then critical bins interleaved, longest first."""

    name = "balanced"

    def _order(
        self,
        job: Job,
        rows: Sequence[Sequence[int]],
        fits: Sequence[int],
        context: AllocationContext,
    ) -> list[int]:
        return balanced_list(range(len(rows)), rows, context.shape)


class Weighted(ContextualAllocator):
    """Best fit with per-type weights from the queue's demand and the machine's load."""

    name = "weighted"

    def _coefficients(self, context: AllocationContext) -> list[float]:
        return [w * s for w, s in zip(context.weights, context.shape.scale, strict=True)]

    def _order(
        self,
        job: Job,
        rows: Sequence[Sequence[int]],
        fits: Sequence[int],
        context: AllocationContext,
    ) -> list[int]:
        return weighted_ranking(job, rows, fits, self._coefficients(context))


class Hybrid(Weighted):
    """Balanced's bins, each ranked by the weighted rule."""

    name = "hybrid"

    def _order(
        self,
        job: Job,
        rows: Sequence[Sequence[int]],
        fits: Sequence[int],
        context: AllocationContext,
    ) -> list[int]:
        ranked = weighted_ranking(job, rows, fits, self._coefficients(context))
        # Bins keep the order their nodes arrive in: the weighted ranking.
        return balanced_list(ranked, rows, context.shape)


@dataclass
class PriorityCounters:
    """Priority-weighted's ``p_k`` per critical type, by resource name."""

    low: int = 1
    high: int = 10
    step: int = 1
    values: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 1 <= self.low <= self.high or self.step < 1:
            raise ConfigError(
                f"priority counters need 1 <= low <= high and step >= 1, got "
                f"low={self.low}, high={self.high}, step={self.step}"
            )

    def get(self, name: str) -> int:
        return self.values.get(name, self.low)

    def move(self, names: Iterable[str], placed: bool) -> None:
        """Lower the counters of ``names`` after a success, raise them after a failure."""
        delta = -self.step if placed else self.step
        for name in names:
            self.values[name] = min(self.high, max(self.low, self.get(name) + delta))


class PriorityWeighted(Weighted):
    """Weighted, with each critical type's weight scaled by its failure counter."""

    name = "priority-weighted"

    def __init__(
        self,
        critical: Sequence[str] | None = None,
        *,
        window: int = DEFAULT_WINDOW,
        counters: PriorityCounters | None = None,
    ) -> None:
        super().__init__(critical, window=window)
        self.counters = counters if counters is not None else PriorityCounters()
        self._names: tuple[str, ...] = ()
        self._tried: set[str] = set()

    def observe(self, snapshot: Snapshot, durations: Durations) -> None:
        super().observe(snapshot, durations)
        self._names = snapshot.resource_names
        self._tried = set()

    def _coefficients(self, context: AllocationContext) -> list[float]:
        coefficients = super()._coefficients(context)
        for k in context.shape.critical:
            coefficients[k] *= self.counters.get(self._names[k])
        return coefficients

    def place(self, job: Job, free: FreeCapacity) -> Allocation | None:
        allocation = super().place(job, free)
        if job.id not in self._tried:
            self._tried.add(job.id)
            unit = job.unit_request
            needed = [self._names[k] for k in self._context().shape.critical if unit[k] > 0]
            if needed:
                self.counters.move(needed, allocation is not None)
        return allocation


HETEROGENEOUS: dict[str, type[ContextualAllocator]] = {
    "balanced": Balanced,
    "weighted": Weighted,
    "hybrid": Hybrid,
    "priority-weighted": PriorityWeighted,
}
