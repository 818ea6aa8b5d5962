"""When the next cycle runs: on a cluster event, when the service returns, or on time.

Slurm tells the bridge about events by touching a *wake file*: ``job_submit.lua`` on
every submission and the ``EpilogSlurmctld`` script (``kit/cpsched-wake``) when a job
ends. Touching a file costs slurmctld nothing and never blocks it, even when the bridge
is down. Between cycles the bridge looks at the file's modification time every
``tick_s``; a change starts a cycle, but never sooner than ``min_gap_s`` after the last
one started, which bounds what the bridge asks of slurmctld (one squeue/sinfo pair per
cycle). During a service outage it also probes the service's ``/healthz`` every
``probe_s`` and cycles as soon as it answers. The periodic cycle stays as a safety net.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class WakeFile:
    """A file whose modification time changes when something happened on the cluster."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._seen = self._mtime()

    def _mtime(self) -> int | None:
        if self.path is None:
            return None
        try:
            return self.path.stat().st_mtime_ns
        except OSError:
            return None

    def fired(self) -> bool:
        """Whether the file was touched since the last call (or since it was opened)."""
        now = self._mtime()
        if now is None or now == self._seen:
            return False
        self._seen = now
        return True


@dataclass
class Pacer:
    wake: WakeFile
    healthy: Callable[[], bool]
    clock: Callable[[], float]  # monotonic seconds
    sleep: Callable[[float], None]
    min_gap_s: float = 1.0
    probe_s: float = 1.0
    tick_s: float = 0.2

    def wait(self, cycle_started: float, delay: float, *, outage: bool) -> str:
        """Sleep until the next cycle is due; say why it is ("event", "service back",
        "periodic")."""
        due = cycle_started + delay
        next_probe = self.clock() + self.probe_s
        while True:
            now = self.clock()
            if now >= due:
                return "periodic"
            if now - cycle_started >= self.min_gap_s and self.wake.fired():
                return "event"
            if outage and now >= next_probe:
                if self.healthy():
                    return "service back"
                next_probe = self.clock() + self.probe_s
            self.sleep(max(0.0, min(self.tick_s, due - now)))
