"""The profile without a step × node array: what each node has free comes from what is
free now, its running jobs' releases (each node's own, a few) and the jobs taken on it,
so its size grows with the running jobs and the jobs taken, not with steps × nodes. On
5,000 nodes and 4,000 running jobs the dense array is 1.2 GB and a wait-bound call took
16 s; this takes 0.9 s, most of it the wrapped EASY's own (docs/wait-bound.md).

It answers as :class:`~cpsched.core.dense_profile.DenseProfile` does, to the last unit
(tests/core/test_profile.py): releases only add capacity, so what a node has free
throughout a window is what it has at the window's start, lowered where a job taken on it
starts within the window.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from operator import itemgetter

import numpy as np

from cpsched.core.capacity import FreeCapacity
from cpsched.core.problem import Allocation, Job
from cpsched.core.profile_base import ProfileBase, Steps, rows_array
from cpsched.core.reservation import Release


class SparseProfile(ProfileBase):
    __slots__ = (
        "_arrays",
        "_base",
        "_cursor",
        "_next_rect",
        "_now_free",
        "_on_node",
        "_rects",
        "_releases",
    )

    def __init__(self, now: int, free: FreeCapacity, releases: list[Release]) -> None:
        super().__init__(now, free)
        rows, types = free.rows(), len(free.capacity_total)
        base = rows_array(rows, types)
        # What each release gives back, node by node, at its end (now at the earliest).
        at: list[int] = []
        node_of: list[int] = []
        given: list[Sequence[int]] = []
        for end, allocation, job in sorted(releases, key=itemgetter(0)):
            if end > self.times[-1]:
                self.times.append(end)
            amounts: list[tuple[int, Sequence[int]]]
            if job.exclusive and self._nodes is not None:
                amounts = [(node, self._nodes[node].capacity) for node, _ in allocation]
            else:
                amounts = [(node, _amounts(job, units, types)) for node, units in allocation]
            for node, amount in amounts:
                if end <= now:  # due by now: free now, beyond what the capacity given says
                    base[node] += amount
                    self._touched.add(node)
                else:
                    at.append(end)
                    node_of.append(node)
                    given.append(amount)
        self._base = base
        self._releases = _Releases(
            np.array(at, dtype=np.int64),
            np.array(node_of, dtype=np.int64),
            np.array(given, dtype=np.int64).reshape(len(given), types),
        )
        self._cursor = (0, base.copy())
        steps = np.searchsorted(self.times, self._releases.at)
        delta = np.zeros((len(self.times), types), dtype=np.int64)
        delta[0] = base.sum(axis=0)
        np.add.at(delta, steps, self._releases.given)
        self._total: Steps = np.cumsum(delta, axis=0)
        # What the jobs taken hold: one rectangle per (job, node), from start to end, by
        # id, and the ids on each node.
        self._rects: dict[int, _Rect] = {}
        self._on_node: dict[int, list[int]] = {}
        self._next_rect = 0
        self._arrays: tuple[Steps, Steps, Steps, Steps] | None = None
        self._now_free: Steps | None = None

    def _nodes_window(self, nodes: list[int], first: int, last: int) -> Steps:
        return self._lowest(nodes, first, last)

    def give(self, time: int, duration: int, allocation: Allocation, job: Job) -> None:
        """Undo :meth:`take` of ``job`` on ``allocation`` from ``time`` for ``duration``."""
        at = self.step_at(time)
        after = bisect_left(self.times, time + duration, lo=at + 1)
        for node, amount in self._held(allocation, job):
            held = (node, time, time + duration, tuple(amount))
            ids = self._on_node.get(node, [])
            found = next((i for i in ids if self._rects[i] == held), None)
            if found is None:
                raise ValueError(f"give: job {job.id} holds nothing on node {node} then")
            ids.remove(found)
            del self._rects[found]
            self._total[at:after] += amount
        self._changed(allocation)

    def take(self, at: int, duration: int, allocation: Allocation, job: Job) -> None:
        """``job`` runs on ``allocation`` from step ``at`` for ``duration`` seconds (an
        exclusive job takes its nodes whole: they must be wholly free then, as
        :meth:`fits_at` checks and the site's placement of an exclusive job ensures)."""
        after, end = self._end_step(at, duration)
        for node, amount in self._held(allocation, job):
            self._rects[self._next_rect] = (node, self.times[at], end, tuple(amount))
            self._on_node.setdefault(node, []).append(self._next_rect)
            self._next_rect += 1
            self._total[at:after] -= amount
        self._changed(allocation)

    def _changed(self, allocation: Allocation) -> None:
        self._touched.update(node for node, _ in allocation)
        self._now_free = None
        self._arrays = None

    # -- free capacity over a window, from the releases and the jobs taken ----------------

    def _held(self, allocation: Allocation, job: Job) -> list[tuple[int, list[int]]]:
        """What ``job`` holds on each node of ``allocation`` (an exclusive job: the node
        whole, which :meth:`fits_at` lets it take only when all of it is free)."""
        types = len(self._capacity)
        if job.exclusive and self._nodes is not None:
            return [(node, list(self._nodes[node].capacity)) for node, _ in allocation]
        return [(node, _amounts(job, units, types)) for node, units in allocation]

    def _free_now(self) -> Steps:
        """What each node has free at step 0 (node × type)."""
        if self._now_free is None:
            self._now_free = self._window(0, 1)
        return self._now_free

    def _window(self, first: int, last: int) -> Steps:
        """What each node has free throughout steps ``first`` to ``last - 1`` (node × type):
        what is free at ``times[first]``, lowered where a job taken starts within."""
        return self._lowest(None, first, last)

    def _lowest(self, nodes: list[int] | None, first: int, last: int) -> Steps:
        """The least free capacity of ``nodes`` (None: every node), type by type, over
        steps ``first`` to ``last - 1``. Releases only add capacity, so without the jobs
        taken it is what is free at the first step; a job taken lowers it from its start,
        so the least is at the first step or at such a start within the window."""
        begin = self.times[first]
        stop = self.times[last] if last < len(self.times) else None
        if nodes is not None:
            return np.array([self._node_lowest(n, begin, stop) for n in nodes], dtype=np.int64)
        lowest = self._free_at(begin, None)
        if not self._rects:
            return lowest
        node, start, end, amount = self._rect_arrays()
        held = (start <= begin) & (end > begin)
        np.subtract.at(lowest, node[held], amount[held])
        inside = start > begin
        if stop is not None:
            inside &= start < stop
        for when in sorted(set(start[inside].tolist())):
            rows = np.unique(node[inside & (start == when)])
            then = self._free_at(when, rows.tolist())
            covering = (start <= when) & (end > when) & np.isin(node, rows)
            np.subtract.at(then, np.searchsorted(rows, node[covering]), amount[covering])
            lowest[rows] = np.minimum(lowest[rows], then)
        return lowest

    def _node_lowest(self, node: int, begin: int, stop: int | None) -> Steps:
        """:meth:`_lowest` of one node, from its own jobs taken (a few)."""
        rects = [self._rects[i] for i in self._on_node.get(node, ())]
        points = [begin]
        points += [s for _, s, _, _ in rects if s > begin and (stop is None or s < stop)]
        lowest: Steps | None = None
        for when in points:
            value = self._node_free_at(node, when)
            for _, s, e, amount in rects:
                if s <= when < e:
                    value = value - np.array(amount, dtype=np.int64)
            lowest = value if lowest is None else np.minimum(lowest, value)
        assert lowest is not None
        return lowest

    def _rect_arrays(self) -> tuple[Steps, Steps, Steps, Steps]:
        """The jobs taken as arrays: node, start, end, amount (kept until one changes)."""
        if self._arrays is None:
            rects = list(self._rects.values())
            types = len(self._capacity)
            self._arrays = (
                np.array([r[0] for r in rects], dtype=np.int64),
                np.array([r[1] for r in rects], dtype=np.int64),
                np.array([r[2] for r in rects], dtype=np.int64),
                np.array([r[3] for r in rects], dtype=np.int64).reshape(len(rects), types),
            )
        return self._arrays

    def _free_at(self, time: int, nodes: list[int] | None) -> Steps:
        """What ``nodes`` (None: every node) have free at ``time`` without the jobs taken:
        free now plus what the running jobs have released by then (a new array)."""
        releases = self._releases
        count = int(np.searchsorted(releases.at, time, side="right"))
        if nodes is not None:
            return np.array([self._node_free_at(node, time) for node in nodes], dtype=np.int64)
        done, free = self._cursor
        if count < done:
            done, free = 0, self._base.copy()
        np.add.at(free, releases.node[done:count], releases.given[done:count])
        self._cursor = (count, free)
        return free.copy()

    def _node_free_at(self, node: int, time: int) -> Steps:
        found = self._releases.of_node(node)
        if found is None:
            return np.asarray(self._base[node], dtype=np.int64)
        times, given = found
        return np.asarray(self._base[node] + given[bisect_right(times, time)], dtype=np.int64)


class _Releases:
    """The running jobs' releases after now, one per (job, node), in time order."""

    __slots__ = ("_by_node", "_cached", "at", "given", "node")

    def __init__(self, at: Steps, node: Steps, given: Steps) -> None:
        self.at, self.node, self.given = at, node, given
        self._by_node: tuple[Steps, Steps, Steps] | None = None
        self._cached: dict[int, tuple[list[int], Steps]] = {}

    def of_node(self, node: int) -> tuple[list[int], Steps] | None:
        """``node``'s release times, and what it has been given back by each (row 0:
        nothing yet); None if it releases nothing."""
        found = self._cached.get(node)
        if found is not None:
            return found
        if self._by_node is None:
            order = np.argsort(self.node, kind="stable")  # each node's in time order
            self._by_node = (self.node[order], self.at[order], self.given[order])
        nodes, at, given = self._by_node
        first, last = np.searchsorted(nodes, [node, node + 1]).tolist()
        if first == last:
            return None
        summed = np.zeros((last - first + 1, given.shape[1]), dtype=np.int64)
        np.cumsum(given[first:last], axis=0, out=summed[1:])
        self._cached[node] = found = (at[first:last].tolist(), summed)
        return found


_Rect = tuple[int, int, int, tuple[int, ...]]
"""A job taken on one node: node, start, end, what it holds type by type."""


def _amounts(job: Job, units: int, types: int) -> list[int]:
    """What ``units`` of ``job`` hold, type by type."""
    if len(job.unit_request) == types:
        return [units * amount for amount in job.unit_request]
    amounts = [0] * types
    for r, amount in job.wanted:
        amounts[r] += units * amount
    return amounts
