"""Side-by-side comparison of replay summaries (``cpsched compare``).

Keys are dotted paths into a summary (``"utilisation.cpu"``,
``"by_length_class.long.mean_wait_s"``). Each row holds, per key, the run's value and its
ratio to the baseline run's value (``None`` where either is missing or the baseline is 0).
The CSV keeps the keys and raw numbers; the tables people read name each key in words
(:data:`COLUMNS`) and give durations in human units.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cpsched.replay.outputs import atomic_target

DEFAULT_KEYS: tuple[str, ...] = (
    "mean_bounded_slowdown",
    "mean_wait_s",
    "p95_wait_s",
    "max_wait_s",
    "by_length_class.long.mean_wait_s",
    "killed_jobs",
    "fallbacks",
    "utilisation.cpu",
    "dispatch_ms_p99",
    "replay_wall_s",
)
RATIO_SUFFIX = "_ratio"

Unit = Literal["number", "duration", "count", "share", "ms"]


@dataclass(frozen=True, slots=True)
class Column:
    """How a summary key reads in a table: its name in words and its unit."""

    label: str
    unit: Unit


COLUMNS: dict[str, Column] = {
    "mean_bounded_slowdown": Column("mean bsld", "number"),
    "mean_wait_s": Column("mean wait", "duration"),
    "p95_wait_s": Column("p95 wait", "duration"),
    "max_wait_s": Column("max wait", "duration"),
    "by_length_class.long.mean_wait_s": Column("long-job wait", "duration"),
    "killed_jobs": Column("killed", "count"),
    "fallbacks": Column("fallbacks", "count"),
    "utilisation.cpu": Column("cpu used", "share"),
    "dispatch_ms_p99": Column("decision p99", "ms"),
    "replay_wall_s": Column("replay", "duration"),
}
"""The default keys (and others a caller may name) as a table shows them; a key not
here is shown as it is, its value as a number."""


def label(key: str) -> str:
    """``key``'s column heading."""
    column = COLUMNS.get(key)
    return column.label if column is not None else key


def human_duration(seconds: float | None) -> str:
    """``seconds`` as a person reads it: 0.8 s, 38 s, 12 min, 4 h 12 min, 2 d 21 h."""
    if seconds is None:
        return "n/a"
    if seconds < 9.95 and seconds != int(seconds):
        return f"{seconds:.1f} s"  # a short replay's time: "0 s" would say nothing
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        hours, minutes = divmod(s // 60, 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(s // 3600, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def human(key: str, value: object) -> str:
    """``value`` of ``key`` in its unit: durations in words, shares in per cent."""
    column = COLUMNS.get(key)
    if value is None:
        return "n/a"
    if column is None or not isinstance(value, int | float):
        return _fmt(value)
    if column.unit == "duration":
        return human_duration(value)
    if column.unit == "share":
        return f"{value:.0%}"
    if column.unit == "ms":
        return f"{value:.3g} ms" if value < 100 else f"{value:,.0f} ms"
    if column.unit == "count":
        return f"{value:,.0f}"
    return _fmt(value)


def lookup(summary: Mapping[str, object], key: str) -> float | int | None:
    """The number at dotted path ``key`` in ``summary``, or ``None`` if absent."""
    node: object = summary
    parts = key.split(".")
    for part in parts:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return node


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    r = value / base
    return round(r, 6) if math.isfinite(r) else None


def comparison_rows(
    summaries: Mapping[str, Mapping[str, object]],
    baseline: str = "today",
    keys: Sequence[str] = DEFAULT_KEYS,
) -> list[dict[str, object]]:
    """One row per run (in the given order): ``{"run": name, key: value,
    key + "_ratio": value / baseline value, ...}``."""
    base = summaries.get(baseline)
    rows: list[dict[str, object]] = []
    for name, summary in summaries.items():
        row: dict[str, object] = {"run": name}
        for key in keys:
            value = lookup(summary, key)
            row[key] = value
            row[key + RATIO_SUFFIX] = None if base is None else _ratio(value, lookup(base, key))
        rows.append(row)
    return rows


def _keys_of(rows: Sequence[Mapping[str, object]]) -> list[str]:
    if not rows:
        return []
    return [k for k in rows[0] if k != "run" and not k.endswith(RATIO_SUFFIX)]


def _fmt(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        magnitude = abs(value)
        if magnitude >= 100:
            return f"{value:.0f}"
        if magnitude >= 10:  # three significant figures, as the verdict says them
            return f"{value:.1f}"
        if magnitude >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    return str(value)


def cell(row: Mapping[str, object], key: str) -> tuple[str, str]:
    """``row``'s value of ``key`` in its unit, and its ratio to the baseline (``×0.58``;
    empty when there is none)."""
    ratio = row.get(key + RATIO_SUFFIX)
    if not isinstance(ratio, float):
        return human(key, row.get(key)), ""
    return human(key, row.get(key)), f"×{ratio:.2f}" if ratio < 10 else f"×{ratio:.3g}"


def to_markdown(rows: Sequence[Mapping[str, object]]) -> str:
    """A Markdown table, one row per run, each key named in words; each cell is
    ``value (×ratio)``, durations in human units."""
    keys = _keys_of(rows)
    lines = [
        "| run | " + " | ".join(label(key) for key in keys) + " |",
        "|---|" + "---:|" * len(keys),
    ]
    for row in rows:
        cells = []
        for key in keys:
            value, ratio = cell(row, key)
            cells.append(f"{value} ({ratio})" if ratio else value)
        lines.append(f"| {row['run']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_csv(rows: Sequence[Mapping[str, object]], path: Path) -> None:
    """Write ``rows`` as CSV (``run``, then each key and its ratio), atomically."""
    keys = _keys_of(rows)
    header = ["run"] + [c for k in keys for c in (k, k + RATIO_SUFFIX)]
    with atomic_target(Path(path)) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for row in rows:
            writer.writerow(["" if row.get(c) is None else row.get(c) for c in header])
