"""A sweep's cells on disk: ``DIR/cells/<cell id>/``, one folder per cell.

A finished cell holds ``timings.json`` (the wall-clock keys of its summary), ``cell.json``
(its trace, policy, worker, wall time and the ``cpsched replay`` command that gives the
same summary) and, written last, ``summary.json``, byte for byte what that replay writes
with ``--no-timings``. Every file is renamed into place whole (``atomic_target``), so
``summary.json`` existing means the cell is finished: a rerun skips it. A failed cell
holds ``error.json`` instead, and a rerun tries it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpsched.replay.outputs import write_json
from cpsched.replay.sweep.cell import CellOutcome
from cpsched.replay.sweep.plan import Cell

SUMMARY, TIMINGS, RECORD, ERROR = "summary.json", "timings.json", "cell.json", "error.json"


@dataclass(frozen=True, slots=True)
class StoredCell:
    """What the store holds for a cell: its summary and record, or its error."""

    summary: dict[str, Any] | None
    timings: dict[str, Any]
    record: dict[str, Any]
    error: str | None


class CellStore:
    """Reads and writes the cells of the sweep whose output directory is ``out``."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.cells = out / "cells"

    def folder(self, cell: Cell) -> Path:
        return self.cells / cell.id

    def finished(self, cell: Cell) -> bool:
        return (self.folder(cell) / SUMMARY).is_file()

    def save(self, cell: Cell, outcome: CellOutcome) -> None:
        """Write ``outcome``: the summary last, or the error (a finished cell's files
        are never replaced by a failure)."""
        folder = self.folder(cell)
        record = {
            "cell": cell.id,
            "trace": cell.trace.label,
            "policy": cell.policy.label,
            "named_policy": cell.policy.base,
            "settings": cell.policy.policy.model_dump(mode="json"),
            "replay_command": cell.replay_command(self.out / "replays" / cell.id),
            "wall_s": outcome.wall_s,
            "worker": outcome.worker,
        }
        if outcome.summary is None:
            if not self.finished(cell):
                write_json({**record, "error": outcome.error}, folder / ERROR)
            return
        write_json(outcome.timings, folder / TIMINGS)
        write_json(record, folder / RECORD)
        (folder / ERROR).unlink(missing_ok=True)
        write_json(outcome.summary, folder / SUMMARY)

    def load(self, cell: Cell) -> StoredCell | None:
        """The stored cell, or None if it has neither run nor failed."""
        folder = self.folder(cell)
        if self.finished(cell):
            return StoredCell(
                summary=_read(folder / SUMMARY),
                timings=_read(folder / TIMINGS),
                record=_read(folder / RECORD),
                error=None,
            )
        if (folder / ERROR).is_file():
            record = _read(folder / ERROR)
            return StoredCell(None, {}, record, str(record.get("error")))
        return None


def _read(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data
