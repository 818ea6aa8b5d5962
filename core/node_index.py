"""The nodes of a free capacity grouped by what they have free: placement without a scan.

Best-fit walks the nodes that can hold a unit of the job from the least free up, and
stops once the job is placed. On a large machine most nodes are alike (idle, or full), so
the nodes are kept in *buckets*, one per distinct free row, each in node order. A
placement then looks at each bucket once (is a unit's fit there nonzero; how much would
be left) and at the nodes it takes, not at every node: the walk becomes a merge of a few
sorted lists. (First-fit needs none: its scan stops at the first nodes that hold the job
and skips full ones in C.) ``take`` and ``give`` move the nodes they change from one
bucket to another (a bisection and a memmove each).

The walk gives the nodes in exactly the order the scan did, with the same fits, so the
allocations are the same (tests/core/test_node_index.py compares them).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence
from heapq import merge
from itertools import groupby, repeat

from cpsched.core.problem import Allocation, Amounts, Wanted

MOST_BUCKETS_PER_NODE = 8
"""No index when there are more than one bucket per this many nodes (nodes that all
differ, e.g. by free memory): merging that many lists costs more than the scan."""


def units_fitting(free: Sequence[int], wanted: Wanted) -> int:
    """How many units fit in ``free``, for a unit needing ``wanted`` (``Job.wanted``)."""
    fit = 1 << 62
    for r, amount in wanted:
        n = free[r] // amount
        if n < fit:
            fit = n
    return fit


def take_in_turn(needed: int, walk: Iterable[tuple[int, int]]) -> Allocation | None:
    """Up to each node's fit, in the order of ``walk`` (``(node, fit)`` pairs), until
    ``needed`` units are placed; in node order. None if they are not enough."""
    placed: list[tuple[int, int]] = []
    for node, fit in walk:
        take = fit if fit < needed else needed
        placed.append((node, take))
        needed -= take
        if not needed:
            placed.sort()
            return tuple(placed)
    return None


class NodeIndex:
    """Every node by its free row: ``buckets[row]`` lists the nodes with that row free,
    in node order."""

    __slots__ = ("buckets",)

    def __init__(self, buckets: dict[Amounts, list[int]]) -> None:
        self.buckets = buckets

    @classmethod
    def of(cls, rows: Sequence[Amounts]) -> NodeIndex | None:
        """The index of ``rows``; None when they are too varied for one to pay."""
        distinct = dict.fromkeys(rows)  # hashing in C: most machines have a few rows
        if len(distinct) > max(1, len(rows) // MOST_BUCKETS_PER_NODE):
            return None
        buckets: dict[Amounts, list[int]] = {}
        # One pass in Python: faster than a pass in C per distinct row (map(eq, ...)
        # compares tuples element by element) from two distinct rows up.
        for node, row in enumerate(rows):
            nodes = buckets.get(row)
            if nodes is None:
                buckets[row] = [node]
            else:
                nodes.append(node)
        return cls(buckets)

    def copy(self) -> NodeIndex:
        """An index of the same rows that changes apart from this one (the lists copied
        in C: 50,000 nodes in a few buckets take a fraction of a millisecond)."""
        return NodeIndex({row: nodes.copy() for row, nodes in self.buckets.items()})

    def moved(
        self, nodes: Sequence[int], before: Sequence[Amounts], after: Sequence[Amounts]
    ) -> None:
        """``nodes`` changed from the rows ``before`` to the rows ``after``."""
        buckets = self.buckets
        for node, old, new in zip(nodes, before, after, strict=True):
            if old == new:
                continue
            left = buckets[old]
            if len(left) == 1:
                del buckets[old]
            else:
                del left[bisect_left(left, node)]
            joined = buckets.get(new)
            if joined is None:
                buckets[new] = [node]
            else:
                insort(joined, node)

    def least_left_first(
        self, wanted: Wanted, weight: Sequence[float]
    ) -> Iterator[tuple[int, int]]:
        """``(node, fit)`` for every node holding the first wanted type's unit amount and
        a fit not 0, least left first (by the weighted sum of the wanted types), ties in
        node order (best-fit's walk)."""
        r0, a0 = wanted[0]
        held: list[tuple[float, list[int], int]] = []
        for row, nodes in self.buckets.items():
            if row[r0] < a0:
                continue
            fit = units_fitting(row, wanted)
            if fit:
                held.append((sum(row[r] * weight[r] for r, _ in wanted), nodes, fit))
        held.sort(key=_left)
        for _, alike in groupby(held, key=_left):
            group = list(alike)
            if len(group) == 1:
                _, nodes, fit = group[0]
                yield from zip(nodes, repeat(fit))
            else:
                yield from merge(*(zip(nodes, repeat(fit)) for _, nodes, fit in group))


def _left(bucket: tuple[float, list[int], int]) -> float:
    return bucket[0]
