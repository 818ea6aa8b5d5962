"""Policy sweeps: many replays (trace slices × policies) on a Dask cluster.

``grid`` reads the grid file into a ``plan`` of cells; ``engine`` runs the unfinished
cells on Dask (the only module that imports it), ``cell`` is what a worker runs,
``shipping`` carries the traces to the workers, ``store`` keeps each cell's files,
``table`` and ``report`` turn them into ``results.parquet`` and ``report.md``.
Importing this package does not import Dask.
"""

from cpsched.replay.sweep.grid import load_grid
from cpsched.replay.sweep.plan import Cell, GridPolicy, SweepPlan, TraceSlice
from cpsched.replay.sweep.report import write_report
from cpsched.replay.sweep.store import CellStore
from cpsched.replay.sweep.table import results_table, wall_time_columns, write_results

__all__ = [
    "Cell",
    "CellStore",
    "GridPolicy",
    "SweepPlan",
    "TraceSlice",
    "load_grid",
    "results_table",
    "wall_time_columns",
    "write_report",
    "write_results",
]
