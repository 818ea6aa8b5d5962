"""Allocators: where a job's units go.

An allocator walks a node list and puts as many units on each node as fit, until the
job is placed; the order of the list is the policy. It never changes the capacity it
is given; the caller takes what the returned allocation uses.

First-fit and best-fit live here; balanced, weighted, hybrid and priority-weighted, which
also read the snapshot, in ``allocators_hetero``. ``make_allocator`` builds them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import compress, count, repeat
from operator import floordiv, ge, itemgetter
from typing import Protocol

from cpsched.core.allocators_hetero import HETEROGENEOUS, PriorityCounters, PriorityWeighted
from cpsched.core.capacity import FreeCapacity, take_in_turn, units_fitting
from cpsched.core.problem import Allocation, Job
from cpsched.errors import ConfigError, UnknownPolicyError

INDEX_FROM_ROOMY = 512
"""Best-fit ranks up to this many nodes with room itself; more, and it walks the index."""


class Allocator(Protocol):
    name: str

    def place(self, job: Job, free: FreeCapacity) -> Allocation | None:
        """An allocation of all of ``job``'s units within ``free``, or None if none exists."""
        ...


class FirstFit:
    """Nodes in their configured order."""

    name = "first-fit"

    def place(self, job: Job, free: FreeCapacity) -> Allocation | None:
        if not free.fits_total(job.request):
            return None
        wanted = job.wanted
        # The nodes where a unit's first type fits are found in C, so the full nodes of a
        # busy machine cost no Python step; the scan stops at the first nodes that hold
        # the job (an idle machine's first ones).
        r, amount = wanted[0]
        rows = free.rows()
        roomy = compress(count(), map(floordiv, map(itemgetter(r), rows), repeat(amount)))
        walk: Iterable[tuple[int, int]]
        if len(wanted) == 1:
            walk = ((node, rows[node][r] // amount) for node in roomy)
        else:
            # (A node whose first type has no room for a unit holds none, unless another
            # type is below zero: an over-filled node, which a valid snapshot has not.)
            walk = ((node, fit) for node in roomy if (fit := units_fitting(rows[node], wanted)))
        return take_in_turn(job.units, walk)


class BestFit:
    """Consolidate: the nodes with the least free capacity (of the job's types) first.

    A node's free capacity is the sum over the job's types of its free amount divided by
    the machine's total of that type (so cores and memory weigh alike), so a node with
    one core left is preferred to an idle one. Ties keep the configured node order.
    """

    name = "best-fit"

    def place(self, job: Job, free: FreeCapacity) -> Allocation | None:
        if not free.fits_total(job.request):
            return None
        wanted = job.wanted
        weight = [1.0 / c if c else 0.0 for c in free.capacity_total]
        index = free.index(build=False)
        if index is not None:
            return take_in_turn(job.units, index.least_left_first(wanted, weight))
        rows = free.rows()
        r0, a0 = wanted[0]
        # The nodes with room for a unit's first type, found in C (full ones are skipped
        # without a Python step: 2.35 million of them at 5,000 nodes).
        roomy = list(compress(count(), map(ge, map(itemgetter(r0), rows), repeat(a0))))
        # Many nodes with room, or as many ranked already by this call's placements: the
        # index is cheaper than ranking them, now and for the next jobs.
        if (len(roomy) > INDEX_FROM_ROOMY or free.ranked(len(roomy))) and (
            index := free.index()
        ) is not None:
            return take_in_turn(job.units, index.least_left_first(wanted, weight))
        candidates: list[tuple[float, int, int]]
        if len(wanted) == 1:
            w0 = weight[r0]
            candidates = [(rows[node][r0] * w0, node, rows[node][r0] // a0) for node in roomy]
        else:
            candidates = []
            for node in roomy:
                row = rows[node]
                fit = units_fitting(row, wanted)
                if fit:
                    left = sum(row[r] * weight[r] for r, _ in wanted)
                    candidates.append((left, node, fit))
        candidates.sort()
        return take_in_turn(job.units, ((node, fit) for _, node, fit in candidates))


ALLOCATORS: dict[str, Callable[..., Allocator]] = {
    "first-fit": FirstFit,
    "best-fit": BestFit,
    **HETEROGENEOUS,
}
"""Every allocator by name; the heterogeneous ones take the critical resource types."""


def make_allocator(
    name: str,
    *,
    critical: Sequence[str] | None = None,
    counters: PriorityCounters | None = None,
) -> Allocator:
    """The allocator registered as ``name``.

    ``critical`` names the critical resource types of balanced, weighted, hybrid and
    priority-weighted (default: every type that not all nodes have); a name may carry
    them too, ``"balanced:gpu,mic"``, which is how the command line passes them.
    ``counters`` are priority-weighted's failure counters, kept by the caller between
    calls (``DispatcherState.priority_counters``); the other allocators learn nothing.
    """
    base, colon, spec = name.partition(":")
    if base not in ALLOCATORS:
        raise UnknownPolicyError("allocator", name, ALLOCATORS)
    if colon:
        critical = tuple(t.strip() for t in spec.split(",") if t.strip())
    if base == "priority-weighted":
        return PriorityWeighted(critical, counters=counters)
    if base in HETEROGENEOUS:
        return HETEROGENEOUS[base](critical)
    if critical is not None:
        raise ConfigError(
            f"allocator {base!r} has no critical resource types; use one of "
            f"{', '.join(HETEROGENEOUS)} to protect accelerators"
        )
    return ALLOCATORS[base]()
