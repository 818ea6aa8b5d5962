"""The bridge's bookkeeping, persisted atomically as one JSON file.

What must survive a restart: finished jobs the service acknowledged (never posted twice),
jobs the bridge pinned and released (re-held if they do not start), jobs handed to
Slurm's scheduler by the ``release`` fallback (taken back when the service returns),
extensions granted per job (the service counts them), the trial runs to end, and the
name this bridge gives the service (which lets one bridge dispatch per cluster: a
restart keeps its place).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cpsched.slurm_bridge.errors import StateFileError

KEEP_DELIVERED_S = 14 * 86400


@dataclass
class Pin:
    """A job released onto the nodes of ``allocation`` (units per node, each unit needing
    ``per_unit``) at ``at``."""

    at: float
    allocation: dict[str, int] = field(default_factory=dict)
    per_unit: dict[str, int] = field(default_factory=dict)


@dataclass
class BridgeState:
    delivered: dict[str, int] = field(default_factory=dict)  # job id → end time
    pinned: dict[str, Pin] = field(default_factory=dict)
    fallback_released: dict[str, float] = field(default_factory=dict)  # job id → when
    extensions: dict[str, int] = field(default_factory=dict)
    trials: dict[str, int] = field(default_factory=dict)
    """Jobs started for a trial run → its seconds: put back in the queue, held, once
    they have run that long (until then the snapshot says when)."""
    requeued_submits: dict[str, int] = field(default_factory=dict)
    """Jobs a trial put back → their submit time: Slurm resets it to the requeue's, and
    the job keeps its place in the queue."""
    fallback_active: bool = False
    writer_id: str = ""
    """How this bridge names itself to the service (its host and a random id, made once):
    the service lets one bridge dispatch per cluster, and a restart keeps the name."""

    def forget_old(self, now: int) -> None:
        """Drop acknowledged ids older than the finished-job look-back (bounded file)."""
        self.delivered = {
            j: end for j, end in self.delivered.items() if now - end < KEEP_DELIVERED_S
        }


def load(path: Path) -> BridgeState:
    if not path.exists():
        return BridgeState()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return BridgeState(
            delivered={str(k): int(v) for k, v in raw.get("delivered", {}).items()},
            pinned={str(k): _pin(v) for k, v in raw.get("pinned", {}).items()},
            fallback_released={
                str(k): float(v) for k, v in raw.get("fallback_released", {}).items()
            },
            extensions={str(k): int(v) for k, v in raw.get("extensions", {}).items()},
            trials={str(k): int(v) for k, v in raw.get("trials", {}).items()},
            requeued_submits={str(k): int(v) for k, v in raw.get("requeued_submits", {}).items()},
            fallback_active=bool(raw.get("fallback_active", False)),
            writer_id=str(raw.get("writer_id", "")),
        )
    except (OSError, ValueError, TypeError) as exc:
        raise StateFileError(
            f"cannot read bridge state {path} ({exc}); move it aside to start afresh "
            "(finished jobs may then be posted again; the service ignores duplicates)"
        ) from None


def _pin(raw: dict) -> Pin:
    # Files of earlier versions kept only the nodes: such a pin has no allocation, and
    # is then neither sent as starting nor checked for where it landed.
    allocation = raw.get("allocation") or {}
    per_unit = raw.get("per_unit") or {}
    return Pin(
        at=float(raw["at"]),
        allocation={str(n): int(u) for n, u in allocation.items()},
        per_unit={str(r): int(a) for r, a in per_unit.items()},
    )


def save(path: Path, state: BridgeState) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(state), handle, separators=(",", ":"), sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).replace(path)
    except OSError as exc:
        raise StateFileError(
            f"cannot write bridge state {path} ({exc}); check the directory's permissions"
        ) from None
