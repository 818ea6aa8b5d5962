"""``cpsched sweep``: replay trace slices × policies on a Dask cluster, resumably.

Dask is imported only when a sweep runs (``cpsched.replay.sweep.engine``): ``cpsched
--help`` and the rest of the command work without the [sweep] extra, and a sweep without
it stops with one line naming the pip command.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cpsched.errors import ConfigError
from cpsched.replay.sweep import CellStore, load_grid, write_report, write_results

console = Console(stderr=True)


def sweep(
    grid: Annotated[
        Path, typer.Argument(help="Grid file (TOML): traces and policies; see docs/sweeps.md.")
    ],
    out: Annotated[Path, typer.Option(help="Directory for cells/, results.parquet and report.md.")],
    scheduler: Annotated[
        str | None,
        typer.Option(
            help="Address of a running dask.distributed scheduler (tcp://host:8786); "
            "default: a local cluster of one worker per core."
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, help="Worker processes of the local cluster (default: the cores)."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print each cell and the cpsched replay command giving its summary; run nothing.",
        ),
    ] = False,
) -> None:
    """Replay every trace slice of GRID under every policy of GRID, one cell per pair, on
    Dask; rank the policies per trace against today's (EASY on the users' requests).

    Finished cells are kept in OUT/cells and skipped when the sweep runs again; a cell
    that fails is reported with its error and the others go on (exit code 1 at the end).
    """
    if scheduler is not None and workers is not None:
        raise ConfigError(
            "--workers sizes the local cluster; with --scheduler the workers are those "
            "started with 'dask worker': leave out one of them"
        )
    plan = load_grid(grid)
    store = CellStore(out)
    if dry_run:
        for cell in plan.cells():
            done = "finished" if store.finished(cell) else "to run"
            typer.echo(f"{cell.id} ({done})\n    {cell.replay_command(out / 'replays' / cell.id)}")
        return

    from cpsched.replay.sweep.engine import SweepProgress, run_sweep

    # Dask sets its loggers to INFO when imported; they follow cpsched's level (-v).
    logging.getLogger("distributed").setLevel(logging.getLogger().level)

    with Progress(
        TextColumn("[bold]sweep[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[running]} running · {task.fields[failed]} failed"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(plan.source.name, total=len(plan.cells()), running=0, failed=0)

        def show(progress: SweepProgress) -> None:
            bar.update(
                task, completed=progress.done, running=progress.running, failed=progress.failed
            )

        run = run_sweep(plan, out, scheduler=scheduler, workers=workers, on_progress=show)
    table = write_results(plan, store)
    report = write_report(plan, store)
    where = f"{run.workers} workers" if run.workers else "nothing to run"
    console.print(
        f"{run.cells} cells: {run.ran} run, {run.skipped} finished before, "
        f"{len(run.failed)} failed · {run.wall_s:.1f} s on {where} → {table}, {report}",
        markup=False,
        soft_wrap=True,
    )
    for cell_id, error in run.failed.items():
        console.print(f"[red]failed:[/] {escape(f'{cell_id}: {error}')}", soft_wrap=True)
    if run.failed:
        raise typer.Exit(1)
