"""What a profile of free capacity over time answers, whatever holds it.

The free capacity from now on, as steps in time: what conservative backfilling and the
wait bound's witness plan in. Step ``k`` holds the capacity free from ``times[k]`` until
the next step. It starts as what is free now plus what the running jobs release as they
end (by their durations); each job taken takes its allocation from the steps it spans. A
job fits at step ``k`` when its allocation fits every step its duration spans, node by
node; the per-type totals (``_total``, step × type) are checked first because they are
cheap and rule out most steps. :mod:`cpsched.core.profile` says which representation
holds the nodes' capacity.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import chain

import numpy as np
import numpy.typing as npt

from cpsched.core.allocators import INDEX_FROM_ROOMY, Allocator
from cpsched.core.capacity import FreeCapacity, covers
from cpsched.core.problem import Allocation, Amounts, Job, Node
from cpsched.core.reservation import place_rest, restricts, units_on_freed

Steps = npt.NDArray[np.int64]


def rows_array(rows: Sequence[Amounts], types: int) -> Steps:
    """``rows`` as a node × type array (from one flat iterator: half the time of
    ``np.array`` on a list of tuples, 17 ms against 29 ms for 50,000 nodes of 8 types)."""
    flat = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=len(rows) * types)
    return flat.reshape(len(rows), types)


class ProfileBase:
    """The questions every profile answers from ``times``, ``_total`` and two views of
    the nodes: :meth:`_window` (what each node has free throughout some steps) and
    :meth:`_free_now`."""

    __slots__ = ("_capacity", "_made_from", "_nodes", "_total", "_touched", "times")

    _capacity: Amounts
    _made_from: FreeCapacity
    _nodes: Sequence[Node] | None
    _total: Steps
    _touched: set[int]
    times: list[int]

    def __init__(self, now: int, free: FreeCapacity) -> None:
        self._capacity = free.capacity_total
        self._nodes = free.nodes
        self.times = [now]
        self._made_from = free.copy()  # its own: the caller may go on placing in ``free``
        """What was free when the profile was made: a placement from now starts from it
        (:meth:`_capacity_now`), sharing its rows and, on a large machine, its node index."""
        self._touched = set()
        """The nodes whose capacity from now differs from ``_made_from``'s: jobs taken or
        given on them, or a release due by now (the subclasses add them)."""

    def _window(self, first: int, last: int) -> Steps:
        """What each node has free throughout steps ``first`` to ``last - 1``."""
        raise NotImplementedError

    def _free_now(self) -> Steps:
        """What each node has free at step 0."""
        raise NotImplementedError

    def _nodes_window(self, nodes: list[int], first: int, last: int) -> Steps:
        """What ``nodes`` have free throughout steps ``first`` to ``last - 1`` (a row
        each, in their order)."""
        raise NotImplementedError

    def step_at(self, time: int) -> int:
        """The step that starts at ``time`` (not before now), split off the step holding
        it when none starts there: a witness slot kept from an earlier call may lie
        between the ends this call knows of."""
        k = bisect_left(self.times, time)
        if k == len(self.times) or self.times[k] != time:
            self._split(k, time)
        return k

    def _split(self, k: int, time: int) -> None:
        """A step from ``time`` inserted at ``k``, holding what the step before holds."""
        self.times.insert(k, time)
        self._total = np.insert(self._total, k, self._total[k - 1], axis=0)

    def _end_step(self, at: int, duration: int) -> tuple[int, int]:
        """The step at which a job taken from step ``at`` for ``duration`` ends (a new
        one if none starts then), and that end."""
        end = self.times[at] + duration
        after = bisect_left(self.times, end)
        if after == len(self.times) or self.times[after] != end:
            self._split(after, end)
        return after, end

    def fits_at(self, time: int, duration: int, allocation: Allocation, job: Job) -> bool:
        """Whether ``job`` on ``allocation`` fits every step from ``time`` for
        ``duration`` seconds (an exclusive job: its nodes wholly free throughout)."""
        at = self.step_at(time)
        after = bisect_left(self.times, time + duration, lo=at + 1)
        nodes = [node for node, _ in allocation]
        window = self._nodes_window(nodes, at, after)
        if job.exclusive and self._nodes is not None:
            whole = np.array([self._nodes[node].capacity for node in nodes], dtype=np.int64)
            return bool((window >= whole).all())
        units = np.array([units for _, units in allocation], dtype=np.int64)
        return all(bool((window[:, r] >= units * amount).all()) for r, amount in job.wanted)

    def give(self, time: int, duration: int, allocation: Allocation, job: Job) -> None:
        raise NotImplementedError

    def take(self, at: int, duration: int, allocation: Allocation, job: Job) -> None:
        raise NotImplementedError

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
            window = self._window(k, last)
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
        if first == 0:
            return allocator.place(job, self._capacity_now(window, total))
        if restricts(allocator, job):
            return allocator.place(job, self._window_later(window, total))
        placed, needed = units_on_freed(job, self._freed_units(job, window))
        if not needed:
            return tuple(sorted(placed.items()))
        rest = self._window_later(window, total)
        return place_rest(job, rest, placed, needed, allocator)

    def _capacity_now(self, window: Steps, total: Steps) -> FreeCapacity:
        """``window``, from now, as the allocators see it: what was free when the profile
        was made, with the rows of the nodes changed since replaced (every other node has
        then what it had: releases only add capacity later). On 50,000 nodes, building
        every row and a node index again for each placement took 40-60 ms."""
        made_from = self._made_from
        if made_from.node_count > INDEX_FROM_ROOMY:
            made_from.index()  # built on the first placement from now, copied by the others
        touched = sorted(self._touched)
        rows = map(tuple, window[touched].tolist())
        return made_from.with_rows(dict(zip(touched, rows, strict=True)), total.tolist())

    def _window_later(self, window: Steps, total: Steps) -> FreeCapacity:
        """``window``, from a step after now, as the allocators see it; the nodes with
        nothing free share one row, so a busy machine costs its free nodes only."""
        empty = (0,) * window.shape[1]
        rows: list[Amounts] = [empty] * len(window)
        free_nodes = np.flatnonzero(window.any(axis=1))
        for node, row in zip(free_nodes.tolist(), window[free_nodes].tolist(), strict=True):
            rows[node] = tuple(row)
        return FreeCapacity(rows, total.tolist(), self._capacity, self._nodes, later=True)

    def _freed_units(self, job: Job, window: Steps) -> dict[int, int]:
        """Units of ``job`` that fit in what ``window`` has free but now has not, node by
        node in node order, until there are enough for the job (as
        :func:`~cpsched.core.reservation.freed_units`)."""
        freed = window - self._free_now()
        fit = np.min([freed[:, r] // amount for r, amount in job.wanted], axis=0)
        nodes = np.flatnonzero(fit > 0)
        units = fit[nodes]
        enough = int(np.searchsorted(np.cumsum(units), job.units)) + 1
        return dict(zip(nodes[:enough].tolist(), units[:enough].tolist(), strict=True))
