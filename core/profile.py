"""The free capacity from now on, as steps in time: what conservative backfilling plans in.

Step ``k`` holds the capacity free from ``times[k]`` until the next step. It starts as
what is free now plus what the running jobs release as they end (by their durations);
each reservation takes its allocation from the steps it spans. A job fits at step ``k``
when its allocation fits every step its duration spans, node by node; the per-type totals
are checked first because they are cheap and rule out most steps.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity, covers
from cpsched.core.problem import Allocation, Job
from cpsched.core.reservation import Release, freed_units, place_freed_first


class Profile:
    __slots__ = ("free", "times")

    def __init__(self, now: int, free: FreeCapacity, releases: list[Release]) -> None:
        self.times: list[int] = [now]
        self.free: list[FreeCapacity] = [free.copy()]
        step = self.free[0]
        for end, allocation, job in sorted(releases, key=itemgetter(0)):
            if end > self.times[-1]:
                step = step.copy()
                self.times.append(end)
                self.free.append(step)
            step.give(allocation, job)

    def earliest(
        self, job: Job, duration: int, allocator: Allocator, *, now_only: bool = False
    ) -> tuple[int, Allocation] | None:
        """The first step at which ``job`` fits for ``duration`` seconds, and where; only
        step 0 (now) with ``now_only``. None if it fits at no step.

        Later than now, the job goes first where capacity is freed by then (not free now),
        as EASY places its reservation, so that the most of what is free now is left.
        """
        times, free, need = self.times, self.free, job.request
        count = len(times)
        k = 0
        while k < count:
            end = times[k] + duration
            i = k
            while i < count and (i == k or times[i] < end):
                if not covers(free[i].total, need):
                    break
                i += 1
            else:
                placement = self._place(job, k, i, allocator)
                if placement is not None:
                    return k, placement
                i = k  # the totals fit but the nodes do not: try the next step
            if now_only:
                return None
            k = i + 1
        return None

    def _place(self, job: Job, first: int, last: int, allocator: Allocator) -> Allocation | None:
        """``job`` placed in what steps ``first`` to ``last - 1`` all have free."""
        steps = self.free
        window = steps[first]
        for step in steps[first + 1 : last]:
            window = window.clamp_to(step)
        if first == 0:
            return allocator.place(job, window)
        return place_freed_first(job, window, freed_units(job, window, steps[0]), allocator)

    def take(self, at: int, duration: int, allocation: Allocation, job: Job) -> None:
        """``job`` runs on ``allocation`` from step ``at`` for ``duration`` seconds."""
        times, free = self.times, self.free
        end = times[at] + duration
        after = bisect_left(times, end)
        if after == len(times) or times[after] != end:  # the job's end starts a new step
            times.insert(after, end)
            free.insert(after, free[after - 1].copy())
        for step in free[at:after]:
            step.take(allocation, job)
