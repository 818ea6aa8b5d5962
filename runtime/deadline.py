"""A call's deadline on the caller's clock: what the service hands its dispatchers.

The dispatch core reads no clock (:class:`cpsched.core.state.Deadline`); the service knows
when its answer is due and gives the dispatcher this, read through ``time.perf_counter``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ClockDeadline:
    """Due at ``due`` on ``time.perf_counter``'s scale."""

    due: float

    given: float = field(init=False)
    """Seconds that were left when it was made (for logs and tests)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "given", self.due - time.perf_counter())

    @classmethod
    def within(cls, seconds: float) -> ClockDeadline:
        """Due ``seconds`` from now."""
        return cls(time.perf_counter() + seconds)

    def left(self) -> float:
        return self.due - time.perf_counter()
