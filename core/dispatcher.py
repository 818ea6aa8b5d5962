"""The dispatcher interface every policy implements."""

from __future__ import annotations

from typing import Protocol

from cpsched.core.durations import Durations
from cpsched.core.problem import Decision, Snapshot


class Dispatcher(Protocol):
    name: str

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        """Which queued jobs start now and where. Pure: no I/O, no clock."""
        ...
