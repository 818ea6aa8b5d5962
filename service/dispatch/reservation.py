"""EASY's reservation: the earliest time the blocked head job can start (SPEC §7)."""

from __future__ import annotations

from dataclasses import dataclass

from service.dispatch.allocators import Allocator
from service.dispatch.capacity import FreeCapacity
from service.dispatch.problem import Allocation, Amounts, Job


@dataclass(slots=True)
class Reservation:
    time: int
    """The head job's planned start (the "shadow time")."""
    spare: FreeCapacity
    """What stays free at ``time`` once the head job is placed: a job still running then
    may only use this, or it would delay the head job."""


def reserve(
    head: Job,
    free: FreeCapacity,
    ends: list[tuple[int, Allocation, Amounts]],
    allocator: Allocator,
) -> Reservation | None:
    """Release the running jobs in order of expected end until ``head`` can be placed.

    ``ends`` holds ``(expected end, allocation, unit request)`` of every running job,
    including those started in this call. Placement is checked node by node with the
    dispatcher's own allocator, so the reservation holds on heterogeneous machines too.
    None means the head job cannot be placed even on an otherwise idle machine.
    """
    future = free.copy()
    ends.sort(key=lambda e: e[0])
    count = len(ends)
    for i, (end, allocation, unit_request) in enumerate(ends):
        future.give(allocation, unit_request)
        if i + 1 < count and ends[i + 1][0] == end:
            continue  # release every job ending at the same time before trying
        if not future.fits_total(head.request):
            continue
        placement = allocator.place(head, future)
        if placement is not None:
            future.take(placement, head.unit_request)
            return Reservation(time=end, spare=future)
    return None
