"""PBS's sizes, durations and times as text, read and written."""

from __future__ import annotations

import re
import time
from typing import Any

from cpsched.slurm_bridge.errors import StateParseError

_SIZE = re.compile(r"^(\d+)(b|kb|mb|gb|tb|w|kw|mw|gw|tw)?$", re.IGNORECASE)
_MIB = {"b": 1 / 2**20, "kb": 1 / 1024, "mb": 1, "gb": 1024, "tb": 1024**2}


def size_mib(value: Any) -> int:
    """PBS size (``"527672488kb"``, ``"8gb"``, ``1024`` bytes) → MiB, rounded up."""
    if isinstance(value, int):
        return -(-value // 2**20)
    match = _SIZE.match(str(value).strip())
    if not match:
        raise StateParseError(f"cannot read PBS size {value!r}")
    unit = (match.group(2) or "b").lower()
    if unit.endswith("w"):  # words: 8 bytes
        unit, factor = (unit[:-1] or "") + "b", 8
    else:
        factor = 1
    return max(0, -(-int(int(match.group(1)) * factor * _MIB[unit if unit != "b" else "b"]) // 1))


def walltime_s(value: Any) -> int | None:
    """``"01:30:00"`` / ``"90:00"`` / ``5400`` → seconds."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    parts = [int(p) for p in str(value).split(":")]
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + part
    return seconds


def walltime_text(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def pbs_time(value: Any) -> int | None:
    """``"Fri Aug 20 23:14:08 2021"`` (server local time) or epoch → epoch seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    return int(time.mktime(time.strptime(str(value), "%a %b %d %H:%M:%S %Y")))
