"""One cell on a worker: stage the shipped trace, replay, summarise, hand the summary back.

The worker writes nothing but the staged trace: the client writes every cell's files
(``store.py``), so the output directory need exist only where the sweep was started.
A cell that fails returns its error instead of raising: it is reported, and the sweep
goes on. Nothing here imports Dask: the function runs on a worker as plain Python.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from cpsched.replay.metrics import pop_timings, summarise
from cpsched.replay.runner import simulate
from cpsched.replay.sweep.plan import Cell
from cpsched.replay.sweep.shipping import TraceBundle


@dataclass(frozen=True, slots=True)
class CellOutcome:
    """What a worker hands back for one cell."""

    cell: str
    summary: dict[str, object] | None
    """The summary ``cpsched replay --no-timings`` writes; None when the cell failed."""
    timings: dict[str, object] = field(default_factory=dict)
    """The summary's wall-clock keys (``dispatch_ms_*``, ``replay_wall_s``)."""
    error: str | None = None
    """``ErrorType: message`` when the cell failed."""
    wall_s: float = 0.0
    """Wall time of the whole cell on the worker: staging, reading, replay, summary."""
    worker: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


def run_cell(cell: Cell, bundle: TraceBundle) -> CellOutcome:
    """Replay ``cell`` on this machine from the shipped ``bundle`` of its trace."""
    start = time.perf_counter()
    host = socket.gethostname()
    trace = cell.trace.path
    try:
        if bundle.digest != cell.trace.digest:
            raise ValueError(
                f"cell {cell.id} was shipped the trace {bundle.name} of another digest"
            )
        trace = bundle.stage()
        result = simulate(cell.replay_settings(trace, Path(cell.id)), machine=cell.trace.system)
        summary = summarise(result, warmup_fraction=cell.warmup)
        timings = pop_timings(summary)
    except Exception as exc:  # any failure is this cell's: reported, the others go on
        # The trace as the grid names it, not the worker's copy.
        message = str(exc).replace(str(trace), str(cell.trace.path))
        return CellOutcome(
            cell.id,
            None,
            error=f"{type(exc).__name__}: {message}",
            wall_s=round(time.perf_counter() - start, 3),
            worker=host,
        )
    return CellOutcome(
        cell.id, summary, timings, wall_s=round(time.perf_counter() - start, 3), worker=host
    )
