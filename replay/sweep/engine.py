"""Running a sweep's cells on Dask: a local cluster sized to the machine, or a running
``dask.distributed`` scheduler. One code path: only how the client is made differs.

Each unfinished cell is one task, keyed by its cell id (a cell is never run twice at
once, and a rerun's client finds no stale result under another key); each trace is one
task holding its bytes, which Dask hands to the workers that need it, and can make again
if the worker holding it dies. When a worker dies, the scheduler reruns its cells
elsewhere (up to ``distributed.scheduler.allowed-failures`` times, 3 by default, after
which the cell is reported failed). The client writes each result as it arrives, so an
interrupted sweep keeps every finished cell. Dask is imported here only: the rest of
cpsched runs without it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Container, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cpsched.errors import MissingExtraError, SweepError

try:
    import dask
    from distributed import Client, Future, LocalCluster, as_completed
except ModuleNotFoundError as missing:
    raise MissingExtraError("cpsched sweep", "sweep", missing.name) from None

from cpsched.replay.outputs import write_json
from cpsched.replay.sweep.cell import CellOutcome, run_cell
from cpsched.replay.sweep.plan import Cell, SweepPlan
from cpsched.replay.sweep.shipping import TraceBundle
from cpsched.replay.sweep.store import CellStore

CONNECT_TIMEOUT_S = 20
WORKER_WAIT_S = 60
"""How long a sweep waits for a first worker to join the scheduler it was given."""
POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class SweepProgress:
    """Where a sweep stands; ``done`` counts failed cells too."""

    total: int
    done: int = 0
    running: int = 0
    failed: int = 0


@dataclass(slots=True)
class SweepRun:
    """What one ``run_sweep`` did."""

    cells: int
    skipped: int
    """Cells already finished before this run (resumed sweeps)."""
    ran: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    """Cell id -> error, for the cells that failed in this run."""
    wall_s: float = 0.0
    workers: int = 0
    threads: int = 0
    scheduler: str = ""
    """Its address, or ``local cluster``."""


def machine_cores() -> int:
    """Cores this process may use (the affinity mask, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def connect(scheduler: str | None, workers: int | None = None) -> Iterator[Client]:
    """A client of the scheduler at ``scheduler``, or of a local cluster of ``workers``
    single-threaded worker processes (default: one per core), closed afterwards."""
    if scheduler is None:
        # Replays hold the GIL: one process per core, one thread each. A worker takes one
        # cell at a time, so a long CP cell never holds a short one back in its queue.
        config = {"distributed.scheduler.worker-saturation": 1.0}
        with (
            dask.config.set(config),
            LocalCluster(
                n_workers=workers or machine_cores(),
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",  # a free port: never 8787, which may be taken
                silence_logs=logging.ERROR,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
        return
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise SweepError(
            f"cannot reach the Dask scheduler at {scheduler}: {exc}; start one with "
            "'dask scheduler', or leave out --scheduler to run on this machine"
        ) from None
    with client:
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except TimeoutError:
            raise SweepError(
                f"no Dask worker joined the scheduler at {scheduler} within {WORKER_WAIT_S} s; "
                f"start some with 'dask worker {scheduler}'"
            ) from None
        yield client


def run_sweep(
    plan: SweepPlan,
    out: Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    on_progress: Callable[[SweepProgress], None] | None = None,
) -> SweepRun:
    """Run every cell of ``plan`` not finished in ``out`` yet; write each as it ends."""
    store = CellStore(out)
    cells = plan.cells()
    todo = [cell for cell in cells if not store.finished(cell)]
    where = "local cluster" if scheduler is None else scheduler
    run = SweepRun(cells=len(cells), skipped=len(cells) - len(todo), scheduler=where)
    started = time.perf_counter()
    report = on_progress or (lambda _: None)
    progress = SweepProgress(total=len(cells), done=run.skipped)
    report(progress)
    if todo:
        with connect(scheduler, workers) as client:
            threads = client.nthreads()
            run.workers, run.threads = len(threads), sum(threads.values())
            futures = _submit(client, todo)
            progress = _collect(client, futures, store, run, progress, report)
    run.wall_s = round(time.perf_counter() - started, 3)
    write_json(
        {
            "cells": run.cells,
            "skipped": run.skipped,
            "ran": run.ran,
            "failed": run.failed,
            "wall_s": run.wall_s,
            "workers": run.workers,
            "threads": run.threads,
            "scheduler": run.scheduler,
        },
        out / "sweep.json",
    )
    return run


def _submit(client: Client, todo: Sequence[Cell]) -> dict[Future, Cell]:
    """One task per trace (its bytes) and per cell; CP cells first, as they take longest."""
    shipped: dict[str, Future] = {}
    for path in dict.fromkeys(cell.trace.path for cell in todo):
        bundle = TraceBundle.read(path)
        shipped[bundle.digest] = client.submit(
            _hold, bundle, key=f"cpsched-trace-{bundle.digest[:32]}", pure=False
        )
    order = sorted(todo, key=lambda cell: not cell.policy.policy.is_cp)
    futures = {}
    for cell in order:
        if cell.trace.digest not in shipped:
            raise SweepError(f"{cell.trace.path} changed after the grid was read; run again")
        future = client.submit(
            run_cell, cell, shipped[cell.trace.digest], key=f"cpsched-cell-{cell.id}", pure=False
        )
        futures[future] = cell
    return futures


def _hold(bundle: TraceBundle) -> TraceBundle:
    """A trace's bytes as a task's result: the cluster keeps it and copies it to workers."""
    return bundle


def _collect(
    client: Client,
    futures: dict[Future, Cell],
    store: CellStore,
    run: SweepRun,
    progress: SweepProgress,
    report: Callable[[SweepProgress], None],
) -> SweepProgress:
    """Write each cell as it finishes; tell ``report`` where the sweep stands."""
    keys = {future.key for future in futures}
    pending = as_completed(futures)
    while not pending.is_empty():
        for future in pending.next_batch(block=False):
            cell = futures[future]
            try:
                outcome: CellOutcome = future.result()
            except Exception as exc:  # the cluster gave up on it (KilledWorker, ...)
                outcome = CellOutcome(cell.id, None, error=f"{type(exc).__name__}: {exc}")
            future.release()
            store.save(cell, outcome)
            run.ran += 1
            if not outcome.ok:
                run.failed[cell.id] = str(outcome.error)
            progress = SweepProgress(
                progress.total, progress.done + 1, progress.running, len(run.failed)
            )
        progress = SweepProgress(
            progress.total, progress.done, _running(client, keys), progress.failed
        )
        report(progress)
        if not pending.is_empty():
            time.sleep(POLL_S)
    return SweepProgress(progress.total, progress.done, 0, progress.failed)


def _running(client: Client, keys: Container[object]) -> int:
    """Cells running now: those the workers hold, at most one per worker thread (a
    worker may hold a few more, queued)."""
    threads = client.nthreads()
    return sum(
        min(threads.get(worker, 1), sum(1 for key in held if key in keys))
        for worker, held in client.processing().items()
    )
