"""Side-by-side comparison of replay summaries (``cpsched compare``).

Keys are dotted paths into a summary (``"utilisation.cpu"``,
``"by_length_class.long.mean_wait_s"``). Each row holds, per key, the run's value and its
ratio to the baseline run's value (``None`` where either is missing or the baseline is 0).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

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
        if magnitude >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    return str(value)


def to_markdown(rows: Sequence[Mapping[str, object]]) -> str:
    """A Markdown table, one row per run; each cell is ``value (×ratio)``."""
    keys = _keys_of(rows)
    lines = [
        "| run | " + " | ".join(keys) + " |",
        "|---|" + "---:|" * len(keys),
    ]
    for row in rows:
        cells = []
        for key in keys:
            cell = _fmt(row.get(key))
            ratio = row.get(key + RATIO_SUFFIX)
            if isinstance(ratio, float):
                cell += f" (×{ratio:.2f})"
            cells.append(cell)
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
