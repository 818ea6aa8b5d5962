"""Python's cyclic garbage collector held off for the length of a dispatch call.

The callers hold it off, not the dispatch core (which must not change the process it runs
in): :class:`~cpsched.runtime.cluster.Cluster`, which the service's orchestrator and the
replay's simulator drive, calls every CP dispatcher through :func:`decide_paused`, as
does ``bench-instances``.

A full (generation 2) collection scans every live object of the process. In a process
that holds a large machine's state (Curie's 5,544 nodes and thousands of running jobs,
or the service's caches) one took 66-93 ms, at an allocation nobody can foresee: in
the phases after the search, whose time the deadline keeps back, it made calls late
(measured in docs/results/cp-dispatchers.md). A call allocates little that only the cyclic
collector can free (reference counting frees the rest), so it is safe to defer the
collector until the call has answered; it then runs at its next threshold as usual.

Calls may overlap in threads (one per cluster in the service): the collector comes
back on when the last of them ends, and only if it was on when the first began. So
that calls overlapping without a break cannot hold it off for ever, every
``MAX_HELD``-th call that ends while others still run collects in full itself, after
its answer is made (the caller sees that time; the deadline did not cover it).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from cpsched.core import Decision, Dispatcher, Durations, Snapshot

MAX_HELD = 64
"""Calls ending while others still hold the collector off before one collects."""

_lock = threading.Lock()
_active = 0
_held = 0
_was_enabled = False
_freeze_due = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off automatic garbage collection inside the ``with`` block."""
    global _active, _held, _was_enabled, _freeze_due
    with _lock:
        if _active == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        collect = freeze = False
        with _lock:
            _active -= 1
            if _active == 0:
                _held = 0
                freeze, _freeze_due = _freeze_due, False
                if freeze:
                    gc.freeze()
                if _was_enabled:
                    gc.enable()
            else:
                _held += 1
                collect = _was_enabled and _held >= MAX_HELD
                if collect:
                    _held = 0
        if collect:
            gc.collect()


def freeze_after_calls() -> None:
    """Freeze what lives once no call holds the collector off (``gc.freeze``, with no
    collection first).

    For a call that built something large that lives on: a 50,000-node machine's
    translation (:class:`~cpsched.runtime.codec.MachineTranslation`, about 300,000
    objects) made every later full collection scan it, 84-97 ms measured, on whichever
    thread allocated then, the event loop answering ``/healthz`` included. Frozen, it is
    freed as usual when the cluster sends other nodes (by reference counting: nothing in
    it is cyclic). Calls overlapping without a break leave it unfrozen.

    No collection runs before the freeze: one of the young generations, where the call's
    objects all are, took 57-75 ms on 50,000 nodes (the same stall on ``/healthz``) and
    found no garbage. What a call leaves in cycles would be kept for good, once per
    change of a large machine (docs/results/service.md).
    """
    global _freeze_due
    with _lock:
        _freeze_due = True


def freeze_what_lives_now() -> None:
    """Take every object alive now out of the collector's scans for good (``gc.freeze``).

    A long-running process (``cpsched serve``) calls it once it has started: its modules,
    OR-Tools' and pydantic's tables, the app and its routes, about 233,000 objects that
    live as long as the process. A full collection scans them all (122-136 ms measured on
    the service at start) and holds every thread meanwhile, the event loop answering
    ``/healthz`` included; once they are frozen it scans only what was made since.
    Garbage found now is collected first, so nothing freed later is kept for ever.
    """
    gc.collect()
    gc.freeze()


def decide_paused(dispatcher: Dispatcher, snapshot: Snapshot, durations: Durations) -> Decision:
    """``dispatcher``'s decision, with automatic garbage collection held off meanwhile."""
    with collector_paused():
        return dispatcher.decide(snapshot, durations)
