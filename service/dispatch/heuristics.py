"""List-scheduling dispatchers: FCFS, SJF, LJF, strict or with EASY backfilling (SPEC §7).

Which job comes next (the order) and where it goes (the allocator) are separate; a
dispatcher joins them. The variants are parameters: ``backfill=False`` stops at the first
job that cannot start (FCFS, SJF and LJF as in AccaSim), ``backfill=True`` is EASY with
reservation depth 1: the first blocked job gets a reservation, a later job starts now only
if it fits now and does not delay that reservation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter

from service.dispatch.allocators import Allocator
from service.dispatch.capacity import FreeCapacity, covers
from service.dispatch.durations import Durations, expected_end
from service.dispatch.problem import (
    Amounts,
    Decision,
    Diagnostics,
    Job,
    Snapshot,
    Start,
)
from service.dispatch.reservation import Release, reserve

Order = Callable[[Sequence[Job], Durations], list[Job]]


def by_submission(queue: Sequence[Job], durations: Durations) -> list[Job]:
    return sorted(queue, key=attrgetter("submit"))


def shortest_first(queue: Sequence[Job], durations: Durations) -> list[Job]:
    return sorted(queue, key=lambda j: (durations[j.id], j.submit))


def longest_first(queue: Sequence[Job], durations: Durations) -> list[Job]:
    return sorted(queue, key=lambda j: (-durations[j.id], j.submit))


ORDERS: dict[str, Order] = {"fcfs": by_submission, "sjf": shortest_first, "ljf": longest_first}


def exceeds_machine(job: Job, capacity_total: Amounts) -> bool:
    return any(want > have for want, have in zip(job.request, capacity_total, strict=True))


class ListDispatcher:
    def __init__(self, name: str, order: Order, allocator: Allocator, *, backfill: bool) -> None:
        self.name = name
        self.order = order
        self.allocator = allocator
        self.backfill = backfill

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        free = FreeCapacity.of(snapshot)
        place = self.allocator.place
        queue = self.order(snapshot.queued, durations)
        starts: list[Start] = []
        notes: list[str] = []
        head_at = len(queue)
        for i, job in enumerate(queue):
            if exceeds_machine(job, snapshot.capacity_total):
                notes.append(f"job {job.id} requests more than the machine has; skipped")
                continue
            allocation = place(job, free)
            if allocation is None:
                head_at = i
                break
            free.take(allocation, job.unit_request)
            starts.append(Start(job.id, allocation))
        planned: dict[str, int] | None = None
        if self.backfill and head_at < len(queue):
            planned = self._backfill(snapshot, durations, queue, head_at, free, starts, notes)
        return Decision(
            starts=tuple(starts),
            planned=planned,
            diagnostics=Diagnostics(dispatcher=self.name, notes=tuple(notes)),
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
    ) -> dict[str, int] | None:
        now = snapshot.time
        head = queue[head_at]
        releases: list[Release] = [
            (
                expected_end(rj, durations[rj.job.id], now),
                rj.allocation,
                rj.job.unit_request,
                rj.job.request,
            )
            for rj in snapshot.running
        ]
        started = {s.job_id: s.allocation for s in starts}
        releases.extend(
            (now + max(1, durations[j.id]), started[j.id], j.unit_request, j.request)
            for j in queue[:head_at]
            if j.id in started
        )
        reservation = reserve(head, free, releases, self.allocator)
        if reservation is None:
            notes.append(f"job {head.id} cannot be placed even on an idle machine; no reservation")
        place = self.allocator.place
        limited: FreeCapacity | None = None  # free now and still spare at the shadow time
        capacity_total = snapshot.capacity_total
        for job in queue[head_at + 1 :]:
            if not free.fits_total(job.request) or exceeds_machine(job, capacity_total):
                continue
            if reservation is None or now + durations[job.id] <= reservation.time:
                allocation = place(job, free)
                if allocation is not None:
                    free.take(allocation, job.unit_request)
                    starts.append(Start(job.id, allocation))
                    limited = None
                continue
            if not covers(reservation.spare_total, job.request):
                continue
            if limited is None:
                limited = free.clamp_to(reservation.spare())
            allocation = place(job, limited)
            if allocation is not None:
                free.take(allocation, job.unit_request)
                reservation.take(allocation, job)
                limited.take(allocation, job.unit_request)
                starts.append(Start(job.id, allocation))
        return None if reservation is None else {head.id: reservation.time}
