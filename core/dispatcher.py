"""The dispatcher interface every policy implements."""

from __future__ import annotations

from typing import Protocol

from cpsched.core.durations import Durations
from cpsched.core.problem import Decision, Snapshot


class Dispatcher(Protocol):
    """Decides which queued jobs start now, where, and which limits to extend.

    ``decide`` does no I/O and reads no clock but its deadline's (the CP dispatchers'
    ``SearchConfig.clock``, injectable), and changes neither the snapshot nor the
    durations. What it carries from one call to the next is its
    :class:`~cpsched.core.state.DispatcherState`, which its caller made and keeps: with
    the same state, snapshot and durations (and a deterministic search) a call gives the
    same decision. The heuristics carry nothing; the CP dispatchers keep their recent
    phase timings and, with reuse, the previous plan; priority-weighted its counters.
    """

    name: str

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        """Which queued jobs start now and where; see the class for what it may use."""
        ...
