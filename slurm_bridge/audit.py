"""The bridge's audit trail: one JSON line per action it takes on the cluster.

Every start (with the decided allocation), refusal, deferral, re-hold, placement
mismatch, extension and fallback is appended with the cluster's time, so an operator
can answer "why did job 123 start there, and who held it again" from one file. A
write that fails is logged once and never stops a cycle.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger("slurm_bridge.audit")


class Audit:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._failing = False

    def record(self, time: int, event: str, **fields: object) -> None:
        if self.path is None:
            return
        line = json.dumps({"time": time, "event": event, **fields}, separators=(",", ":"))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as exc:
            if not self._failing:
                log.error(
                    "audit trail not writable", extra={"path": str(self.path), "error": str(exc)}
                )
            self._failing = True
        else:
            self._failing = False
