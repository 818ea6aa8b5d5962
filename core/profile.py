"""The free capacity from now on, as steps in time: what conservative backfilling plans in.

Step ``k`` holds the capacity free from ``times[k]`` until the next step. It starts as
what is free now plus what the running jobs release as they end (by their durations);
each reservation takes its allocation from the steps it spans. A job fits at step ``k``
when its allocation fits every step its duration spans, node by node; the per-type totals
are checked first because they are cheap and rule out most steps.

The steps are one array (step × node × type): the capacity free throughout a window of
steps is an element-wise minimum over a slice, which a conservative plan on a few hundred
nodes takes hundreds of thousands of times in a replay. The allocators see the window as
an ordinary :class:`~cpsched.core.capacity.FreeCapacity`.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter

import numpy as np
import numpy.typing as npt

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity, covers
from cpsched.core.problem import Allocation, Amounts, Job
from cpsched.core.reservation import Release, place_rest, restricts, units_on_freed

Steps = npt.NDArray[np.int64]


class Profile:
    __slots__ = ("_capacity", "_free", "_nodes", "_total", "times")

    def __init__(self, now: int, free: FreeCapacity, releases: list[Release]) -> None:
        rows = free.rows()
        types = len(free.capacity_total)
        self._capacity = free.capacity_total
        self._nodes = free.nodes
        self.times: list[int] = [now]
        ordered = sorted(releases, key=itemgetter(0))
        step_of: list[int] = []
        for end, _, _ in ordered:
            if end > self.times[-1]:
                self.times.append(end)
            step_of.append(len(self.times) - 1)
        delta = np.zeros((len(self.times), len(rows), types), dtype=np.int64)
        delta[0] = np.array(rows, dtype=np.int64).reshape(len(rows), types)
        for step, (_, allocation, job) in zip(step_of, ordered, strict=True):
            given = delta[step]
            if job.exclusive and self._nodes is not None:
                for node, _ in allocation:  # an exclusive job gives back its nodes whole
                    given[node] += self._nodes[node].capacity
                continue
            for node, units in allocation:
                for r, amount in job.wanted:
                    given[node, r] += units * amount
        self._free: Steps = np.cumsum(delta, axis=0)
        self._total: Steps = self._free.sum(axis=1)

    def fits_now_total(self, request: Amounts) -> bool:
        """Necessary condition for starting a job now: each type's total free covers it."""
        return covers(self._total[0].tolist(), request)

    def earliest(
        self, job: Job, duration: int, allocator: Allocator, *, now_only: bool = False
    ) -> tuple[int, Allocation] | None:
        """The first step at which ``job`` fits for ``duration`` seconds, and where; only
        step 0 (now) with ``now_only``. None if it fits at no step.

        Later than now, the job goes first where capacity is freed by then (not free now),
        as EASY places its reservation, so that the most of what is free now is left.
        """
        times, need = self.times, np.array(job.request, dtype=np.int64)
        count = len(times)
        short = np.flatnonzero((self._total < need).any(axis=1)).tolist()
        k = 0
        while k < count:
            last = bisect_left(times, times[k] + duration, lo=k + 1)
            # A step without the totals rules out every start whose window spans it.
            blocked = bisect_left(short, k)
            if blocked < len(short) and short[blocked] < last:
                if now_only:
                    return None
                k = short[blocked] + 1
                continue
            window = self._free[k:last].min(axis=0)
            total = window.sum(axis=0)
            if (total >= need).all():  # the totals of the window itself, a tighter test
                placement = self._place(job, k, window, total, allocator)
                if placement is not None:
                    return k, placement
            if now_only:
                return None
            k += 1
        return None

    def _place(
        self, job: Job, first: int, window: Steps, total: Steps, allocator: Allocator
    ) -> Allocation | None:
        """``job`` placed in ``window``, what the steps from ``first`` on all have free.

        Later than now, most jobs fit wholly in what is freed by then: those are placed
        without building the window's node rows, which on thousands of nodes cost more
        than the rest of the search."""
        if first == 0 or restricts(allocator, job):
            return allocator.place(job, self._window_capacity(window, total, first > 0))
        placed, needed = units_on_freed(job, self._freed_units(job, window))
        if not needed:
            return tuple(sorted(placed.items()))
        rest = self._window_capacity(window, total, later=True)
        return place_rest(job, rest, placed, needed, allocator)

    def _window_capacity(self, window: Steps, total: Steps, later: bool) -> FreeCapacity:
        """``window`` as the allocators see it (``later``: from a step after now); the
        nodes with nothing free share one row, so a busy machine costs its free nodes
        only."""
        empty = (0,) * window.shape[1]
        rows: list[Amounts] = [empty] * len(window)
        free_nodes = np.flatnonzero(window.any(axis=1))
        for node, row in zip(free_nodes.tolist(), window[free_nodes].tolist(), strict=True):
            rows[node] = tuple(row)
        return FreeCapacity(rows, total.tolist(), self._capacity, self._nodes, later=later)

    def _freed_units(self, job: Job, window: Steps) -> dict[int, int]:
        """Units of ``job`` that fit in what ``window`` has free but now has not, node by
        node in node order, until there are enough for the job (as
        :func:`~cpsched.core.reservation.freed_units`)."""
        freed = window - self._free[0]
        fit = np.min([freed[:, r] // amount for r, amount in job.wanted], axis=0)
        nodes = np.flatnonzero(fit > 0)
        units = fit[nodes]
        enough = int(np.searchsorted(np.cumsum(units), job.units)) + 1
        return dict(zip(nodes[:enough].tolist(), units[:enough].tolist(), strict=True))

    def step_at(self, time: int) -> int:
        """The step that starts at ``time`` (not before now), split off the step holding
        it when none starts there: a witness slot kept from an earlier call may lie
        between the ends this call knows of."""
        times = self.times
        k = bisect_left(times, time)
        if k == len(times) or times[k] != time:
            times.insert(k, time)
            self._free = np.insert(self._free, k, self._free[k - 1], axis=0)
            self._total = np.insert(self._total, k, self._total[k - 1], axis=0)
        return k

    def fits_at(self, time: int, duration: int, allocation: Allocation, job: Job) -> bool:
        """Whether ``job`` on ``allocation`` fits every step from ``time`` for
        ``duration`` seconds (an exclusive job: its nodes wholly free throughout)."""
        at = self.step_at(time)
        after = bisect_left(self.times, time + duration, lo=at + 1)
        window = self._free[at:after].min(axis=0)
        nodes = [node for node, _ in allocation]
        if job.exclusive and self._nodes is not None:
            whole = np.array([self._nodes[node].capacity for node in nodes], dtype=np.int64)
            return bool((window[nodes] >= whole).all())
        units = np.array([units for _, units in allocation], dtype=np.int64)
        return all(bool((window[nodes, r] >= units * amount).all()) for r, amount in job.wanted)

    def give(self, time: int, duration: int, allocation: Allocation, job: Job) -> None:
        """Undo :meth:`take` of ``job`` on ``allocation`` from ``time`` for ``duration``
        (an exclusive job gives back its nodes whole, as it took them when they were
        wholly free, the only way :meth:`fits_at` lets it in)."""
        at = self.step_at(time)
        after = bisect_left(self.times, time + duration, lo=at + 1)
        spanned = self._free[at:after]
        nodes = [node for node, _ in allocation]
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
        times = self.times
        end = times[at] + duration
        after = bisect_left(times, end)
        if after == len(times) or times[after] != end:  # the job's end starts a new step
            times.insert(after, end)
            self._free = np.insert(self._free, after, self._free[after - 1], axis=0)
            self._total = np.insert(self._total, after, self._total[after - 1], axis=0)
        spanned = self._free[at:after]
        nodes = [node for node, _ in allocation]
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
