"""The profile as one array, step × node × type: simple and fast on a few hundred nodes,
but its size grows with the steps (the running jobs' ends) times the nodes, so
:func:`cpsched.core.profile.make_profile` uses it only while that product is small.

The capacity free throughout a window of steps is an element-wise minimum over a slice,
which a conservative plan on a few hundred nodes takes hundreds of thousands of times in
a replay.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter

import numpy as np

from cpsched.core.capacity import FreeCapacity
from cpsched.core.problem import Allocation, Job
from cpsched.core.profile_base import ProfileBase, Steps, rows_array
from cpsched.core.reservation import Release


class DenseProfile(ProfileBase):
    __slots__ = ("_free",)

    def __init__(self, now: int, free: FreeCapacity, releases: list[Release]) -> None:
        super().__init__(now, free)
        rows, types = free.rows(), len(free.capacity_total)
        ordered = sorted(releases, key=itemgetter(0))
        step_of: list[int] = []
        for end, _, _ in ordered:
            if end > self.times[-1]:
                self.times.append(end)
            step_of.append(len(self.times) - 1)
        delta = np.zeros((len(self.times), len(rows), types), dtype=np.int64)
        delta[0] = rows_array(rows, types)
        for step, (_, allocation, job) in zip(step_of, ordered, strict=True):
            given = delta[step]
            if step == 0:  # due by now: free now, beyond what the capacity given says
                self._touched.update(node for node, _ in allocation)
            if job.exclusive and self._nodes is not None:
                for node, _ in allocation:  # an exclusive job gives back its nodes whole
                    given[node] += self._nodes[node].capacity
                continue
            for node, units in allocation:
                for r, amount in job.wanted:
                    given[node, r] += units * amount
        self._free: Steps = np.cumsum(delta, axis=0)
        self._total: Steps = self._free.sum(axis=1)

    def _window(self, first: int, last: int) -> Steps:
        window: Steps = self._free[first:last].min(axis=0)
        return window

    def _free_now(self) -> Steps:
        now: Steps = self._free[0]
        return now

    def _nodes_window(self, nodes: list[int], first: int, last: int) -> Steps:
        window: Steps = self._free[first:last, nodes].min(axis=0)  # those nodes only
        return window

    def _split(self, k: int, time: int) -> None:
        super()._split(k, time)
        self._free = np.insert(self._free, k, self._free[k - 1], axis=0)

    def give(self, time: int, duration: int, allocation: Allocation, job: Job) -> None:
        """Undo :meth:`take` of ``job`` on ``allocation`` from ``time`` for ``duration``
        (an exclusive job gives back its nodes whole, as it took them when they were
        wholly free, the only way :meth:`fits_at` lets it in)."""
        at = self.step_at(time)
        after = bisect_left(self.times, time + duration, lo=at + 1)
        spanned = self._free[at:after]
        nodes = [node for node, _ in allocation]
        self._touched.update(nodes)
        if job.exclusive and self._nodes is not None:
            whole = np.array([self._nodes[node].capacity for node in nodes], dtype=np.int64)
            spanned[:, nodes] += whole
            self._total[at:after] += whole.sum(axis=0)
            return
        units = np.array([units for _, units in allocation], dtype=np.int64)
        for r, amount in job.wanted:
            spanned[:, nodes, r] += units * amount
        self._total[at:after] += np.array(job.request, dtype=np.int64)

    def take(self, at: int, duration: int, allocation: Allocation, job: Job) -> None:
        """``job`` runs on ``allocation`` from step ``at`` for ``duration`` seconds."""
        after, _ = self._end_step(at, duration)
        spanned = self._free[at:after]
        nodes = [node for node, _ in allocation]
        self._touched.update(nodes)
        if job.exclusive and self._nodes is not None:
            # An exclusive job takes its nodes whole: all that is free on them.
            whole = np.maximum(spanned[:, nodes], 0)
            spanned[:, nodes] -= whole
            self._total[at:after] -= whole.sum(axis=1)
        else:
            units = np.array([units for _, units in allocation], dtype=np.int64)
            for r, amount in job.wanted:
                spanned[:, nodes, r] -= units * amount
            self._total[at:after] -= np.array(job.request, dtype=np.int64)
