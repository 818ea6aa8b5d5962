"""The sweep's results as one table (``DIR/results.parquet``): one row per cell.

Columns: the cell (``cell``, ``status``, ``error``), its settings (``trace``,
``trace_file``, ``system``, ``skip_jobs``, ``jobs_limit``, ``warmup``, ``policy``, the
label; ``named_policy``; then every field of the policy under its own name:
``dispatcher``, ``predictor``, ``cp_window``, ...), every summary metric by its dotted
path (``mean_bounded_slowdown``, ``utilisation.cpu``, ``by_length_class.long.mean_wait_s``,
``fallback_reasons.deadline``, ...) and the wall-clock figures (``cell_wall_s`` and the
summary's ``dispatch_ms_*`` and ``replay_wall_s``: :func:`wall_time_columns`). Rows are in
the grid's order, so two runs of one grid give the same table but for those figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from cpsched.replay.metrics import TIMING_KEYS
from cpsched.replay.outputs import write_parquet
from cpsched.replay.sweep.plan import Cell, SweepPlan
from cpsched.replay.sweep.store import CellStore
from cpsched.runtime.policy import Policy

CELL_WALL = "cell_wall_s"
CELL_COLUMNS = (
    "cell",
    "status",
    "error",
    "trace",
    "trace_file",
    "system",
    "skip_jobs",
    "jobs_limit",
    "warmup",
    "policy",
    "named_policy",
)
SETTING_COLUMNS = (*CELL_COLUMNS, *Policy.model_fields)
LEFT_OUT = ("settings", "notes")
"""Summary keys that are not metrics: the settings are columns of their own, the notes
are the same text in every summary."""


def wall_time_columns(names: Iterable[str]) -> list[str]:
    """The columns measured on the wall clock: they differ from run to run."""
    return [n for n in names if n == CELL_WALL or n.startswith(TIMING_KEYS)]


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``; lists become JSON text."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, list):
            flat[name] = json.dumps(value)
        else:
            flat[name] = value
    return flat


def cell_row(cell: Cell, store: CellStore) -> dict[str, Any]:
    """The row of one cell: settings always; metrics once it has finished."""
    stored = store.load(cell)
    status = "missing" if stored is None else "failed" if stored.summary is None else "done"
    row: dict[str, Any] = {  # in the order of SETTING_COLUMNS
        "cell": cell.id,
        "status": status,
        "error": None if stored is None else stored.error,
        "trace": cell.trace.label,
        "trace_file": cell.trace.path.name,
        "system": cell.trace.system.source,
        "skip_jobs": cell.trace.skip_jobs,
        "jobs_limit": cell.trace.jobs,
        "warmup": cell.warmup,
        "policy": cell.policy.label,
        "named_policy": cell.policy.base,
        **cell.policy.policy.model_dump(mode="json"),
    }
    if stored is not None and stored.summary is not None:
        metrics = {k: v for k, v in stored.summary.items() if k not in LEFT_OUT}
        for name, value in flatten({**metrics, **stored.timings}).items():
            if name in row:
                raise ValueError(f"summary key {name!r} is also a setting column")
            row[name] = value
        row[CELL_WALL] = stored.record.get("wall_s")
    return row


def results_table(plan: SweepPlan, store: CellStore) -> pa.Table:
    """Every cell of ``plan`` as one row; columns missing from a row are null in it."""
    rows = [cell_row(cell, store) for cell in plan.cells()]
    metrics = sorted({k for row in rows for k in row} - {*SETTING_COLUMNS, CELL_WALL})
    columns = [*SETTING_COLUMNS, *metrics, CELL_WALL]
    return pa.table({name: _column([row.get(name) for row in rows]) for name in columns})


def _column(values: list[Any]) -> pa.Array:
    """One column; values of mixed kinds (a number in one cell, text in another) as
    JSON text."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else json.dumps(v) for v in values], pa.string())


def write_results(plan: SweepPlan, store: CellStore) -> Path:
    """Write ``results.parquet`` into the sweep's directory; return its path."""
    path = store.out / "results.parquet"
    write_parquet(results_table(plan, store), path)
    return path
