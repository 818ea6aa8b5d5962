"""A dispatcher's working copy of the free capacity, changed as it places jobs.

Rows are copied on first write only, so a call that starts a few jobs on a large machine
costs what it touches, not the machine's size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import compress, count
from operator import is_not, itemgetter

from cpsched.core.node_index import NodeIndex, take_in_turn, units_fitting
from cpsched.core.problem import Allocation, Amounts, Job, Node, RunningJob, Snapshot, Start


def covers(have: Sequence[int], want: Sequence[int]) -> bool:
    """Whether ``have`` holds at least ``want`` of every type (a hot path: no generators)."""
    for a, w in zip(have, want, strict=True):  # noqa: SIM110 - all(genexpr) is 3x slower here
        if w > a:
            return False
    return True


def shift(
    rows: list[Amounts],
    total: list[int],
    allocation: Allocation,
    job: Job,
    sign: int,
    nodes: Sequence[Node] | None = None,
) -> None:
    """Add (``sign`` = 1) or remove (-1) what ``job`` uses at ``allocation``.

    An exclusive job uses its nodes whole: taking empties their rows, giving back adds
    the nodes' capacities (``nodes``; without them it counts its units, as any job).
    Rows are replaced, never changed in place, so rows shared with a snapshot or another
    copy stay as they were.
    """
    if job.exclusive and nodes is not None:
        _shift_whole(rows, total, allocation, sign, nodes)
        return
    wanted = job.wanted
    if len(wanted) == 1:  # most jobs: one type (cores), changed without a loop per type
        r, amount = wanted[0]
        step = sign * amount
        if len(total) == 1:  # and a machine of one type (every SWF header's)
            for node, units in allocation:
                rows[node] = (rows[node][0] + step * units,)
        else:
            for node, units in allocation:
                row = list(rows[node])
                row[r] += step * units
                rows[node] = tuple(row)
        total[r] += step * job.units
        return
    for node, units in allocation:
        row = list(rows[node])
        for r, amount in wanted:
            row[r] += sign * units * amount
        rows[node] = tuple(row)
    for r, amount in wanted:
        total[r] += sign * job.units * amount


def _shift_whole(
    rows: list[Amounts], total: list[int], allocation: Allocation, sign: int, nodes: Sequence[Node]
) -> None:
    for node, _ in allocation:
        old = rows[node]
        if sign < 0:
            new = tuple(0 if a > 0 else a for a in old)
        else:
            new = tuple(a + c for a, c in zip(old, nodes[node].capacity, strict=True))
        rows[node] = new
        for r, (a, b) in enumerate(zip(old, new, strict=True)):
            total[r] += b - a


__all__ = [
    "FreeCapacity",
    "after_starts",
    "covers",
    "distinct_rows",
    "placeable_units",
    "shift",
    "take_in_turn",
    "units_fitting",
]


class FreeCapacity:
    """Free capacity per node (``rows``) and per type (``total``).

    The allocators scan the rows. Best-fit, once many nodes have room, walks a
    :class:`~cpsched.core.node_index.NodeIndex` instead (built then, kept up to date by
    ``take`` and ``give``): a decision starting many jobs on a large machine then costs the
    nodes it takes, not the machine's size per start.
    """

    __slots__ = (
        "_index",
        "_ranked",
        "_rows",
        "_unindexed",
        "capacity_total",
        "later",
        "nodes",
        "total",
    )

    def __init__(
        self,
        rows: Sequence[Amounts],
        total: Sequence[int],
        capacity_total: Amounts,
        nodes: Sequence[Node] | None = None,
        *,
        later: bool = False,
    ) -> None:
        self._rows: list[Amounts] = list(rows)
        self.total: list[int] = list(total)
        self.capacity_total = capacity_total
        self.nodes = nodes
        """The nodes, for their capacities: what an exclusive job takes and gives back."""
        self.later = later
        """Whether this is what will be free at a later time (a reservation's), not now:
        a placement in it starts nothing yet."""
        self._index: NodeIndex | None = None
        self._unindexed = False
        """Whether the rows proved too varied for an index."""
        self._ranked = 0
        """Nodes ranked one by one by placements in this capacity so far (:meth:`ranked`)."""

    @classmethod
    def of(cls, snapshot: Snapshot) -> FreeCapacity:
        return cls(snapshot.free, snapshot.free_total, snapshot.capacity_total, snapshot.nodes)

    @property
    def node_count(self) -> int:
        return len(self._rows)

    def row(self, node: int) -> Amounts:
        return self._rows[node]

    def rows(self) -> list[Amounts]:
        return self._rows

    def fits_total(self, request: Amounts) -> bool:
        """Necessary condition for placing a job: each type's total free covers it."""
        return covers(self.total, request)

    def index(self, *, build: bool = True) -> NodeIndex | None:
        """The nodes by free row, built on the first call that may ``build`` it; None
        when not built, or when the rows are too varied for one."""
        if self._index is None and build and not self._unindexed:
            self._index = NodeIndex.of(self._rows)
            self._unindexed = self._index is None
        return self._index

    def ranked(self, nodes: int) -> bool:
        """Count ``nodes`` more ranked one by one; whether placements here have now ranked
        as many as the machine has, so that building an index (one pass over every node)
        costs less than the ranking already done. On a busy machine only a few nodes have
        room, but a call starting hundreds of jobs ranks them again for each: on 5,000
        nodes, 90% busy, EASY took 0.17-0.20 s for 461 starts by ranking, 0.01-0.05 s with
        the index."""
        self._ranked += nodes
        return self._ranked > len(self._rows)

    def take(self, allocation: Allocation, job: Job) -> None:
        self._shift(allocation, job, -1)

    def give(self, allocation: Allocation, job: Job) -> None:
        self._shift(allocation, job, 1)

    def _shift(self, allocation: Allocation, job: Job, sign: int) -> None:
        index, rows = self._index, self._rows
        if index is None:
            shift(rows, self.total, allocation, job, sign, self.nodes)
            return
        nodes = [node for node, _ in allocation]
        before = [rows[node] for node in nodes]
        shift(rows, self.total, allocation, job, sign, self.nodes)
        index.moved(nodes, before, [rows[node] for node in nodes])

    def copy(self) -> FreeCapacity:
        return FreeCapacity(
            self._rows, self.total, self.capacity_total, self.nodes, later=self.later
        )

    def with_rows(self, changed: Mapping[int, Amounts], total: Sequence[int]) -> FreeCapacity:
        """A copy with the rows of the nodes in ``changed`` replaced, and ``total``; it
        shares the other rows, and takes a copy of this one's node index (when built)
        with those nodes moved, so that a large machine's index is built once."""
        copy = FreeCapacity(self._rows, total, self.capacity_total, self.nodes, later=self.later)
        rows = copy._rows
        index = self.index(build=False)
        if index is not None:
            nodes = list(changed)
            copy._index = index.copy()
            copy._index.moved(nodes, [rows[node] for node in nodes], list(changed.values()))
        for node, row in changed.items():
            rows[node] = row
        return copy

    def clamp_to(self, other: FreeCapacity) -> FreeCapacity:
        """Element-wise minimum with ``other``: what is free here *and* there."""
        theirs = other._rows
        if len(self.total) == 1:  # one type: the lesser row is the minimum, taken in C
            rows = list(map(min, self._rows, theirs))
            lost = sum(map(itemgetter(0), self._rows)) - sum(map(itemgetter(0), rows))
            return FreeCapacity(
                rows, [self.total[0] - lost], self.capacity_total, self.nodes, later=self.later
            )
        rows = list(self._rows)
        total = list(self.total)
        # Copies share the rows neither has changed: only the others are compared, and
        # finding them runs in C (a replay clamps hundreds of thousands of times).
        for node in self.changed_from(other):
            a, b = rows[node], theirs[node]
            low = tuple(map(min, a, b))
            if low != a:
                rows[node] = low
                for r, (x, y) in enumerate(zip(a, low, strict=True)):
                    total[r] -= x - y
        return FreeCapacity(rows, total, self.capacity_total, self.nodes, later=self.later)

    def changed_from(self, other: FreeCapacity) -> list[int]:
        """The nodes whose rows are not the very rows of ``other`` (copies share rows
        neither has changed since): a superset of the nodes where the two differ."""
        return list(compress(count(), map(is_not, self._rows, other._rows)))


def distinct_rows(free: FreeCapacity) -> list[tuple[Amounts, int]]:
    """Each distinct free row with how many nodes have it: most machines have a few, so
    what fits on them is counted once per row, not once per node. The node index, when
    built, has them already."""
    index = free.index(build=False)
    if index is not None:
        return [(row, len(nodes)) for row, nodes in index.buckets.items()]
    return list(Counter(free.rows()).items())


def placeable_units(rows: Iterable[tuple[Amounts, int]], job: Job) -> int:
    """Units of ``job`` that fit on the machine as it is (its ``distinct_rows``), summed
    over nodes."""
    wanted = job.wanted
    return sum(units_fitting(row, wanted) * nodes for row, nodes in rows)


def after_starts(snapshot: Snapshot, starts: list[Start]) -> Snapshot:
    """``snapshot`` with ``starts`` running (from now, on their allocations) and out of
    the queue."""
    started = {start.job_id: start.allocation for start in starts}
    free = FreeCapacity.of(snapshot)
    running = list(snapshot.running)
    for job in snapshot.queued:
        allocation = started.get(job.id)
        if allocation is not None:
            free.take(allocation, job)
            running.append(RunningJob(job, snapshot.time, job.time_limit, allocation))
    return replace(
        snapshot,
        running=tuple(running),
        queued=tuple(job for job in snapshot.queued if job.id not in started),
        free=tuple(free.rows()),
        free_total=tuple(free.total),
    )
