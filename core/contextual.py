"""Give a snapshot-reading allocator its context before each of its dispatcher's calls.

The heterogeneous allocators (``allocators_hetero``) rank nodes with the queue's demand
and the machine's critical types, which ``place(job, free)`` alone does not show. Rather
than widening that narrow interface for every dispatcher, the dispatcher that owns such
an allocator is wrapped: each call first lets the allocator observe the snapshot, then
decides as before. The wrapper works for any dispatcher, heuristic or CP alike.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from cpsched.core.allocators import Allocator
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.problem import Decision, Snapshot


@runtime_checkable
class ObservingAllocator(Allocator, Protocol):
    def observe(self, snapshot: Snapshot, durations: Durations) -> None:
        """Read what the call's placements need; called once per dispatcher call."""
        ...


class ContextualDispatcher:
    """``inner``, whose allocator observes each snapshot before ``inner`` decides."""

    def __init__(self, inner: Dispatcher, allocator: ObservingAllocator) -> None:
        self.inner = inner
        self.allocator = allocator
        self.name = inner.name

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        self.allocator.observe(snapshot, durations)
        return self.inner.decide(snapshot, durations)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)  # transparent: the inner's state, search, fallback


def with_allocator_context(dispatcher: Dispatcher, allocator: Allocator) -> Dispatcher:
    """``dispatcher`` wrapped when ``allocator`` reads the snapshot, else unchanged."""
    if isinstance(allocator, ObservingAllocator):
        return ContextualDispatcher(dispatcher, allocator)
    return dispatcher
