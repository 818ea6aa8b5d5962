"""A sweep on Dask against the same cells one after the other.

    python bench/sweep_vs_sequential.py bench/sweep24.toml --out out/sweep24 [--workers N]

runs ``cpsched sweep GRID`` on a local cluster (``--workers``, default one per core),
then every cell's ``cpsched replay`` command (what ``cpsched sweep --dry-run`` prints),
one after the other, and prints the wall times, the load average around each run (the
machine may be shared: say what else ran) and whether every replay's ``summary.json`` is
byte for byte the sweep's.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from cpsched.replay.sweep import CellStore, load_grid

BIN = Path(sys.executable).parent


def timed(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    plan = load_grid(args.grid)
    cells = plan.cells()
    sweep_out = args.out / "sweep"
    if sweep_out.exists():
        sys.exit(f"{sweep_out} exists: a resumed sweep would skip its cells; remove it first")

    command = [str(BIN / "cpsched"), "sweep", str(args.grid), "--out", str(sweep_out)]
    if args.workers:
        command += ["--workers", str(args.workers)]
    before = load()
    swept = timed(command)
    after = load()
    print(f"sweep: {len(cells)} cells in {swept:.1f} s (load {before} -> {after})")
    table = pq.read_table(sweep_out / "results.parquet")
    busy = sum(table.column("cell_wall_s").to_pylist())
    print(f"sum of the cells' wall times on the workers: {busy:.1f} s")

    store = CellStore(sweep_out)
    before, same, total = load(), 0, 0.0
    for cell in cells:
        replay = shlex.split(cell.replay_command(args.out / "replays" / cell.id))
        total += timed([str(BIN / "cpsched"), *replay[1:]])
        mine = args.out / "replays" / cell.id / "summary.json"
        same += mine.read_bytes() == (store.folder(cell) / "summary.json").read_bytes()
    print(f"one after the other: {len(cells)} replays in {total:.1f} s (load {before} -> {load()})")
    print(f"speed-up: {total / swept:.2f} on {args.workers or os.cpu_count()} workers")
    print(f"summaries byte for byte the sweep's: {same} of {len(cells)}")


if __name__ == "__main__":
    main()
