"""EASY's reservation: the earliest time the blocked head job can start, and where.

Where the head job is placed at its reserved time decides what may be backfilled now: a
job that outlasts the reservation may only use what is free now *and* spare then. So the
head job goes first onto capacity that is busy now but freed by its reserved time, and
only then onto capacity free now; that leaves the most of what is free now to backfill,
as standard EASY's spare-capacity rule counts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from operator import itemgetter

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity, covers
from cpsched.core.durations import Durations
from cpsched.core.problem import Allocation, Job, Snapshot, Start

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
            now = future.copy()  # ``future`` is still what was free at the reservation
            for _, allocation, job in self._pending:
                future.give(allocation, job)
            freed = freed_units(self._head, future, now)
            placement = place_freed_first(self._head, future, freed, self.allocator)
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


def totals_decide_placement(job: Job, allocator: Allocator) -> bool:
    """Whether per-type totals alone tell if ``job`` can be placed: true when each unit
    needs exactly one of a single type, so every free unit of it is usable anywhere, and
    no site rule keeps it from some nodes."""
    wanted = job.wanted
    return len(wanted) == 1 and wanted[0][1] == 1 and not restricts(allocator, job)


def restricts(allocator: Allocator, job: Job) -> bool:
    """Whether ``allocator`` keeps ``job`` from some nodes (site rules, see
    :class:`~cpsched.core.site_placement.SitePlacement`): then only it may place the job."""
    check = getattr(allocator, "restricts", None)
    return check is not None and bool(check(job))


def freed_units(job: Job, then: FreeCapacity, now: FreeCapacity) -> dict[int, int]:
    """Units of ``job`` that fit in what is free in ``then`` but not in ``now`` (busy now,
    freed by then), node by node in node order, until there are enough for the job.

    ``then`` and ``now`` are copies of one another changed since (copy-on-write rows), so
    only the nodes whose rows differ are looked at."""
    wanted = job.wanted
    freed: dict[int, int] = {}
    enough = job.units
    there, here = then.rows(), now.rows()
    single = len(wanted) == 1
    r0, a0 = wanted[0]
    for node in then.changed_from(now):
        # A unit may not straddle the two: it fits in the difference or not at all.
        if single:
            fit = (there[node][r0] - here[node][r0]) // a0
        else:
            fit = min((there[node][r] - here[node][r]) // amount for r, amount in wanted)
        if fit > 0:
            freed[node] = fit
            enough -= fit
            if enough <= 0:
                break
    return freed


def place_freed_first(
    job: Job, future: FreeCapacity, freed: Mapping[int, int], allocator: Allocator
) -> Allocation | None:
    """Place ``job`` in ``future``: first the units of :func:`freed_units` (``freed``, in
    node order), then the rest where ``allocator`` puts them in what is left. Capacity
    free now is used only for what the freed capacity cannot hold, which leaves the most
    of it to backfill. A job the site's rules keep from some nodes is placed by
    ``allocator`` alone, which knows them."""
    if restricts(allocator, job):
        return allocator.place(job, future)
    first, needed = units_on_freed(job, freed)
    if not needed:
        return tuple(sorted(first.items()))
    return place_rest(job, future, first, needed, allocator)


def units_on_freed(job: Job, freed: Mapping[int, int]) -> tuple[dict[int, int], int]:
    """The first step of :func:`place_freed_first`: ``job``'s units put on ``freed``
    capacity in node order, and how many units are left to place."""
    needed = job.units
    first: dict[int, int] = {}
    for node, fit in freed.items():
        take = fit if fit < needed else needed
        first[node] = take
        needed -= take
        if not needed:
            break
    return first, needed


def place_rest(
    job: Job, future: FreeCapacity, first: dict[int, int], needed: int, allocator: Allocator
) -> Allocation | None:
    """The second step of :func:`place_freed_first`: the ``needed`` units left after
    ``first`` placed where ``allocator`` puts them in what ``future`` has left."""
    if not first:
        return allocator.place(job, future)
    rest_of = future.copy()
    # ``take`` counts a whole job's units in the totals: hand it the part placed so far.
    rest_of.take(tuple(first.items()), replace(job, units=job.units - needed))
    rest = allocator.place(replace(job, units=needed), rest_of)
    if rest is None:
        return None
    placed = dict(first)
    for node, units in rest:
        placed[node] = placed.get(node, 0) + units
    return tuple(sorted(placed.items()))


def reserve(
    head: Job, free: FreeCapacity, releases: list[Release], allocator: Allocator
) -> Reservation | None:
    """Release the running jobs in order of expected end until ``head`` can be placed.

    ``releases`` holds every running job, including those started in this call.
    Placement is checked node by node (:func:`place_freed_first`, with the dispatcher's
    own allocator for what free capacity it needs), so the reservation holds on
    heterogeneous machines too; the per-type totals are checked first because they are
    cheap and rule out most end times. None means the head job cannot be placed even on
    an otherwise idle machine.
    """
    releases.sort(key=itemgetter(0))
    need = head.request
    exact = totals_decide_placement(head, allocator)
    total = list(free.total)
    future = free.copy()
    future.later = True
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
            return Reservation(end, head, future, releases[:i], spare_total, allocator)
        for _, allocation, job in releases[applied:i]:
            future.give(allocation, job)
        applied = i
        placement = place_freed_first(head, future, freed_units(head, future, free), allocator)
        if placement is not None:
            future.take(placement, head)
            return Reservation(end, head, future, [], spare_total, allocator, spare=future)
    return None


def running_releases(
    snapshot: Snapshot, durations: Durations, ahead: list[Job], starts: list[Start]
) -> list[Release]:
    """Expected end, allocation and job of everything running, including the jobs of
    ``ahead`` that this call started."""
    now = snapshot.time
    # This is durations.expected_end, max(now + 1, start + d), inlined: it runs for every
    # running job at every blocked call.
    soonest = now + 1
    releases: list[Release] = [
        (
            end if (end := rj.start + durations[rj.job.id]) > soonest else soonest,
            rj.allocation,
            rj.job,
        )
        for rj in snapshot.running
    ]
    started = {s.job_id: s.allocation for s in starts}
    releases.extend(
        (now + max(1, durations[j.id]), started[j.id], j) for j in ahead if j.id in started
    )
    return releases
