"""List-scheduling dispatchers: FCFS, SJF, LJF, strict or with EASY backfilling.

Which job comes next (the order) and where it goes (the allocator) are separate; a
dispatcher joins them. The variants are parameters: ``backfill=False`` stops at the first
job that cannot start (FCFS, SJF and LJF as in AccaSim), ``backfill=True`` is EASY with
reservation depth 1: the first blocked job gets a reservation, a later job starts now only
if it fits now and does not delay that reservation. A deeper reservation depth gives the
first ``depth`` blocked jobs reservations (:mod:`cpsched.core.conservative`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress, repeat
from operator import attrgetter, ge, itemgetter
from typing import Literal

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity, covers
from cpsched.core.conservative import backfill_with_depth
from cpsched.core.durations import Durations
from cpsched.core.problem import (
    Amounts,
    Decision,
    Diagnostics,
    Job,
    Snapshot,
    Start,
)
from cpsched.core.reservation import Reservation, reserve, running_releases
from cpsched.core.state import DispatcherState, passed
from cpsched.errors import ConfigError

Order = Callable[[Sequence[Job], Durations], list[Job]]

REFILTER_AHEAD = 256
"""After each backfilled start, EASY checks this many of the next candidates against what
is left free (in C), and the others as its scan reaches them, this many at a time: a job
that no longer fits costs no Python step, and a start costs no pass over a long queue."""


def by_submission(queue: Sequence[Job], durations: Durations) -> list[Job]:
    return list(queue)  # a snapshot's queue is in submission order already


def by_site_priority(queue: Sequence[Job], durations: Durations) -> list[Job]:
    """The site's priority first (``Job.priority``, higher first; a job without one
    last), then submission order: FCFS and EASY as a site with multifactor priority runs
    them."""
    return sorted(queue, key=site_rank)


def site_rank(job: Job) -> tuple[int, int]:
    """Sort key of the site's order: higher priority first, then earlier submission."""
    return (-(job.priority if job.priority is not None else -(1 << 62)), job.submit)


def shortest_first(queue: Sequence[Job], durations: Durations) -> list[Job]:
    return sorted(queue, key=lambda j: (durations[j.id], j.submit))


def longest_first(queue: Sequence[Job], durations: Durations) -> list[Job]:
    return sorted(queue, key=lambda j: (-durations[j.id], j.submit))


ORDERS: dict[str, Order] = {"fcfs": by_submission, "sjf": shortest_first, "ljf": longest_first}

QueueOrder = Literal["cpsched", "site"]
"""Who goes first: cpsched's own order (FCFS and EASY: submission; the CP dispatchers:
slowdown priority), or the site's priority (``Job.priority``)."""

BackfillOrder = Literal["queue", "shortest"]
"""The order EASY tries backfill candidates in: the queue's, or shortest (by duration)
first, as EASY++ does (Tsafrir, Etsion and Feitelson, TPDS 2007)."""


def exceeds_machine(job: Job, capacity_total: Amounts) -> bool:
    return not covers(capacity_total, job.request)


class _Stopped(Exception):
    """The caller's deadline came during the backfill, ``looked_at`` jobs in."""

    def __init__(self, looked_at: int) -> None:
        self.looked_at = looked_at


class ListDispatcher:
    """Start queued jobs in ``order``; with ``backfill``, EASY.

    ``plan=True`` always returns the blocked job's reservation in ``Decision.planned``
    (the service explains pending jobs with it); with ``plan=False`` the reservation is
    computed only when some job could be backfilled, which is what a replay needs.
    """

    def __init__(
        self,
        name: str,
        order: Order,
        allocator: Allocator,
        *,
        backfill: bool,
        plan: bool = True,
        backfill_order: BackfillOrder = "queue",
        depth: int = 1,
        max_jobs: int | None = None,
        state: DispatcherState | None = None,
    ) -> None:
        self.name = name
        self.state = state
        """Where its caller's deadline is (``DispatcherState.deadline``), if it has one."""
        self.order = order
        self.allocator = allocator
        self.backfill = backfill
        self.plan = plan
        self.shortest_backfilled_first = backfill_order == "shortest"
        if depth < 1:
            raise ConfigError(f"the backfill reservation depth must be >= 1, got {depth}")
        self.depth = depth
        """Blocked jobs that get a reservation: 1 is EASY, more is conservative."""
        if max_jobs is not None and max_jobs < 1:
            raise ConfigError(f"the queue depth must be >= 1 job, got {max_jobs}")
        self.max_jobs = max_jobs
        """Jobs considered per call, in queue order (None: all), as Slurm's
        ``bf_max_job_test``: the rest wait for a later call. It bounds a call's work on
        any queue (EASY over 100,000 jobs took 0.8 s)."""
        self._plain = Diagnostics(dispatcher=name)  # shared by the calls with nothing to note

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        queue = self.order(snapshot.queued, durations)
        if self.max_jobs is not None:
            del queue[self.max_jobs :]
        if self.backfill and self.depth > 1:
            return self._conservative(snapshot, durations, queue)
        free = FreeCapacity.of(snapshot)
        place = self.allocator.place
        starts: list[Start] = []
        notes: list[str] = []
        head_at = len(queue)
        stop = _stop_of(self.state)
        for i, job in enumerate(queue):
            if stop is not None and stop():
                return self._partial(starts, notes, i, len(queue))
            allocation = place(job, free)
            if allocation is None:
                if exceeds_machine(job, snapshot.capacity_total):
                    notes.append(f"job {job.id} requests more than the machine has; skipped")
                    continue
                head_at = i
                break
            free.take(allocation, job)
            starts.append(Start(job.id, allocation))
        planned: dict[str, int] | None = None
        if self.backfill and head_at < len(queue):
            try:
                planned = self._backfill(
                    snapshot, durations, queue, head_at, free, starts, notes, stop
                )
            except _Stopped as stopped:
                return self._partial(starts, notes, stopped.looked_at, len(queue))
        return Decision(
            starts=tuple(starts),
            planned=planned,
            diagnostics=(
                Diagnostics(dispatcher=self.name, notes=tuple(notes)) if notes else self._plain
            ),
        )

    def _partial(self, starts: list[Start], notes: list[str], looked_at: int, of: int) -> Decision:
        """The starts made when the caller's deadline came: valid, but jobs after the
        ``looked_at`` first of ``of`` were not considered."""
        notes.append(f"stopped at the deadline after {looked_at} of {of} queued jobs")
        diagnostics = Diagnostics(dispatcher=self.name, partial=True, notes=tuple(notes))
        return Decision(starts=tuple(starts), diagnostics=diagnostics)

    def _conservative(self, snapshot: Snapshot, durations: Durations, queue: list[Job]) -> Decision:
        plan = backfill_with_depth(
            snapshot,
            durations,
            queue,
            self.allocator,
            self.depth,
            shortest_backfilled_first=self.shortest_backfilled_first,
        )
        return Decision(
            starts=tuple(plan.starts),
            planned=plan.planned or None,
            diagnostics=(
                Diagnostics(dispatcher=self.name, notes=tuple(plan.notes))
                if plan.notes
                else self._plain
            ),
        )

    def _backfill(
        self,
        snapshot: Snapshot,
        durations: Durations,
        queue: list[Job],
        head_at: int,
        free: FreeCapacity,
        starts: list[Start],
        notes: list[str],
        stop: Callable[[], bool] | None = None,
    ) -> dict[str, int] | None:
        now = snapshot.time
        head = queue[head_at]
        # Free and spare capacity only shrink during the scan, so a job that does not fit
        # them now never will in this call: drop those up front.
        candidates = within(queue[head_at + 1 :], free.total)
        if not candidates and not self.plan:
            return None
        if self.shortest_backfilled_first:
            candidates.sort(key=lambda job: durations[job.id])  # stable: ties keep queue order
        if stop is not None and stop():
            raise _Stopped(head_at + 1)
        releases = running_releases(snapshot, durations, queue[:head_at], starts)
        reservation = reserve(head, free, releases, self.allocator)
        if reservation is None:
            notes.append(f"job {head.id} cannot be placed even on an idle machine; no reservation")
        place = self.allocator.place
        limited: FreeCapacity | None = None  # free now and still spare at the shadow time
        if candidates and reservation is not None:
            candidates, limited = _without_outlasting_misfits(
                candidates, durations, free, reservation, reservation.time - now
            )
        k = 0
        fresh = len(candidates)  # candidates[k:fresh] are checked against free.total as it is
        while k < len(candidates):
            if k == fresh:
                fresh = refilter(candidates, k, k + REFILTER_AHEAD, free.total)
                continue
            job = candidates[k]
            k += 1
            if stop is not None and stop():
                raise _Stopped(head_at + k)
            if not free.fits_total(job.request):
                continue
            if reservation is None or now + durations[job.id] <= reservation.time:
                allocation = place(job, free)
                if allocation is None:
                    continue
                limited = None
            else:
                if not covers(reservation.spare_total, job.request):
                    continue
                if limited is None:
                    limited = free.clamp_to(reservation.spare())
                allocation = place(job, limited)
                if allocation is None:
                    continue
                reservation.take(allocation, job)
                limited.take(allocation, job)
            free.take(allocation, job)
            starts.append(Start(job.id, allocation))
            # What is free shrank: the jobs it no longer covers are out for this call
            # (a long queue's rest, once the free cores are taken, costs no step each).
            # Only the next few are checked now, the rest when the scan reaches them: a
            # check of the whole rest per start cost 13 ms a start on 50,000 jobs.
            fresh = refilter(candidates, k, min(fresh, k + REFILTER_AHEAD), free.total)
        return None if reservation is None else {head.id: reservation.time}


def _stop_of(state: DispatcherState | None) -> Callable[[], bool] | None:
    """Whether the caller's deadline has passed, asked between jobs; None: no deadline."""
    deadline = state.deadline if state is not None else None
    if deadline is None:
        return None
    return lambda: passed(deadline)


def refilter(candidates: list[Job], first: int, last: int, total: Sequence[int]) -> int:
    """Drop from ``candidates[first:last]`` the jobs ``total`` no longer covers, in place;
    where that stretch now ends."""
    kept = within(candidates[first:last], total)
    candidates[first:last] = kept
    return first + len(kept)


def within(jobs: list[Job], total: Sequence[int]) -> list[Job]:
    """The ``jobs`` whose requests ``total`` covers, type by type, in order (filtered in C:
    on a busy machine most of the queue goes here, every call)."""
    for r, have in enumerate(total):
        requested = map(itemgetter(r), map(_request, jobs))
        jobs = list(compress(jobs, map(ge, repeat(have), requested)))
    return jobs


_request = attrgetter("request")


def _without_outlasting_misfits(
    candidates: list[Job],
    durations: Durations,
    free: FreeCapacity,
    reservation: Reservation,
    window: int,
) -> tuple[list[Job], FreeCapacity | None]:
    """The up-front filter again, for jobs that would outlast the reservation: they must
    fit in what is free now *and* spare then. The candidates left, and that capacity
    (None when no candidate outlasts it, or none fits the spare totals: then the spare
    capacity node by node, costly to build, is not needed)."""
    outlast = [job for job in candidates if durations[job.id] > window]
    if not outlast:
        return candidates, None
    limited: FreeCapacity | None = None
    fitting = within(outlast, reservation.spare_total)
    if fitting:
        limited = free.clamp_to(reservation.spare())
        fitting = within(fitting, limited.total)
    if len(fitting) < len(outlast):
        keep = {job.id for job in fitting}
        candidates = [job for job in candidates if durations[job.id] <= window or job.id in keep]
    return candidates, limited
