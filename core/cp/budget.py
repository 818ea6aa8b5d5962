"""One CP call's deadline: the time left, the time each phase took, and the exceptions
that end the CP path early (the caller then returns its fallback decision)."""

from __future__ import annotations

import math

from cpsched.core.cp.search import Clock, SearchConfig


class GiveUp(Exception):  # control flow inside a call, never raised to callers
    """The CP path stops at ``phase``: the caller returns its fallback decision, marked
    with ``status`` and ``reason``."""

    status = "deadline"

    def __init__(self, phase: str, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.phase = phase
        self.reason = reason
        self.detail = detail


class OutOfTime(GiveUp):
    """No time is left for ``phase``."""

    def __init__(self, phase: str) -> None:
        super().__init__(phase, f"no time left for {phase}")


class TooLarge(GiveUp):
    """The model would be too large to load within a call (see ``PCP20Dispatcher``)."""

    status = "too_large"


class Budget:
    """One call's deadline, read through the injected clock, with the time each phase took.

    The deadline is the configured one, or less when the caller gives less (``deadline``).

    ``check(phase)`` before a phase raises ``OutOfTime`` when less than ``margin`` is left
    (the time kept for building the decision); ``mark(phase)`` closes a phase. Without the
    wall clock (``SearchConfig.wall_clock`` off) time never runs out: the phases are still
    timed, for the notes, but nothing depends on it.
    """

    def __init__(self, config: SearchConfig, clock: Clock, deadline: float | None = None) -> None:
        self.clock = clock
        self.wall_clock = config.wall_clock
        self.deadline = config.deadline if deadline is None else min(deadline, config.deadline)
        self.margin = config.margin
        self.began = clock()
        self._last = self.began
        self.phases: list[tuple[str, float]] = []

    def left(self) -> float:
        """Seconds before the deadline (negative once past it; infinite without the wall
        clock)."""
        if not self.wall_clock:
            return math.inf
        return self.deadline - (self.clock() - self.began)

    def check(self, phase: str) -> None:
        """Raise ``OutOfTime(phase)`` unless more than the margin is left."""
        if self.left() <= self.margin:
            raise OutOfTime(phase)

    def mark(self, phase: str) -> None:
        now = self.clock()
        self.phases.append((phase, now - self._last))
        self._last = now

    def last(self, phase: str) -> float:
        """Seconds the latest ``phase`` took (0 if it has not run)."""
        return next((s for name, s in reversed(self.phases) if name == phase), 0.0)

    def note(self) -> str:
        return "phases ms: " + ", ".join(f"{name} {s * 1000:.1f}" for name, s in self.phases)
