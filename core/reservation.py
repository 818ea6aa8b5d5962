"""EASY's reservation: the earliest time the blocked head job can start."""

from __future__ import annotations

from operator import itemgetter

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity, covers
from cpsched.core.problem import Allocation, Job

Release = tuple[int, Allocation, Job]
"""A running job's expected end, allocation and job."""


class Reservation:
    """The head job's planned start and what it leaves spare then.

    A job that is still running at ``time`` may only use the spare capacity, or it would
    delay the head job. The node-level spare capacity is built on first use: most calls
    on a busy machine never need it, and building it walks every released allocation.
    """

    __slots__ = ("_future", "_head", "_pending", "_spare", "allocator", "spare_total", "time")

    def __init__(
        self,
        time: int,
        head: Job,
        future: FreeCapacity,
        pending: list[Release],
        spare_total: list[int],
        allocator: Allocator,
        spare: FreeCapacity | None = None,
    ) -> None:
        self.time = time
        self.spare_total = spare_total
        """Per-type spare totals: a cheap necessary condition before the node-level check."""
        self.allocator = allocator
        self._head = head
        self._future = future
        self._pending = pending
        self._spare = spare

    def spare(self) -> FreeCapacity:
        if self._spare is None:
            future = self._future
            for _, allocation, job in self._pending:
                future.give(allocation, job)
            placement = self.allocator.place(self._head, future)
            # reserve() only defers this when the totals decide placement exactly.
            assert placement is not None, "reservation without a placement"
            future.take(placement, self._head)
            self._spare = future
        return self._spare

    def take(self, allocation: Allocation, job: Job) -> None:
        """A job running past ``time`` was placed: it uses spare capacity."""
        self.spare().take(allocation, job)
        for r, amount in enumerate(job.request):
            self.spare_total[r] -= amount


def totals_decide_placement(job: Job) -> bool:
    """Whether per-type totals alone tell if ``job`` can be placed: true when each unit
    needs exactly one of a single type, so every free unit of it is usable anywhere."""
    wanted = job.wanted
    return len(wanted) == 1 and wanted[0][1] == 1


def reserve(
    head: Job, free: FreeCapacity, releases: list[Release], allocator: Allocator
) -> Reservation | None:
    """Release the running jobs in order of expected end until ``head`` can be placed.

    ``releases`` holds every running job, including those started in this call.
    Placement is checked node by node with the dispatcher's own allocator, so the
    reservation holds on heterogeneous machines too; the per-type totals are checked
    first because they are cheap and rule out most end times. None means the head job
    cannot be placed even on an otherwise idle machine.
    """
    releases.sort(key=itemgetter(0))
    need = head.request
    exact = totals_decide_placement(head)
    total = list(free.total)
    future = free.copy()
    applied = 0
    count = len(releases)
    i = 0
    while i < count:
        end = releases[i][0]
        while i < count and releases[i][0] == end:  # every job ending then, together
            for r, amount in enumerate(releases[i][2].request):
                total[r] += amount
            i += 1
        if not covers(total, need):
            continue
        spare_total = [have - want for have, want in zip(total, need, strict=True)]
        if exact:
            return Reservation(end, head, future, releases[applied:i], spare_total, allocator)
        for _, allocation, job in releases[applied:i]:
            future.give(allocation, job)
        applied = i
        placement = allocator.place(head, future)
        if placement is not None:
            future.take(placement, head)
            return Reservation(end, head, future, [], spare_total, allocator, spare=future)
    return None
