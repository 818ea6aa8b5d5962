"""A value the bridge reads from the workload manager now and then, not every cycle.

Partitions, reservations, limits, weights and fair shares change rarely; reading them
every cycle would be one more RPC to the controller each time. :class:`Refreshed` reads
again once its time to live has passed. A read that fails either raises (the cycle
cannot go on without it) or, given ``keep``, keeps the last value read (or ``keep``'s
value before any), logged: such a value is advice, and the workload manager goes on
enforcing its own rules meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from cpsched.slurm_bridge.errors import CommandError

T = TypeVar("T")

log = logging.getLogger("slurm_bridge.refresh")


class Refreshed(Generic[T]):
    def __init__(
        self, what: str, ttl_s: float, read: Callable[[], T], *, keep: Callable[[], T] | None = None
    ) -> None:
        self.what = what
        self.ttl_s = ttl_s
        self._read = read
        self._keep = keep
        self._value: tuple[float, T] | None = None

    def get(self) -> T:
        now = time.monotonic()
        if self._value is not None and now - self._value[0] < self.ttl_s:
            return self._value[1]
        try:
            value = self._read()
        except CommandError as exc:
            if self._keep is None:
                raise
            value = self._value[1] if self._value is not None else self._keep()
            log.info("%s not read: %s", self.what, exc)
        self._value = (now, value)
        return value
