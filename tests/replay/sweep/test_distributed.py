"""``cpsched sweep --scheduler`` on a real Dask cluster: a ``dask scheduler`` and two
``dask worker`` processes on 127.0.0.1 (random free ports), started from their own
command-line entry points and stopped by process group. The sweep must give the table a
local run gives (wall-clock columns aside), and survive a worker killed mid-sweep with
no cell lost or run twice into the results."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cpsched.replay.sweep import wall_time_columns
from tests.replay.sweep.conftest import kth_ctc_grid

pytestmark = pytest.mark.usefixtures("dask_installed")

BIN = Path(sys.executable).parent
CELLS = 12


def run(
    *args: str | Path, env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from cpsched.cli import main; main()", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def start(*args: str | Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [BIN / "dask", *map(str, args)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: a worker and its nanny
        )


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        os.killpg(process.pid, sig)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


@dataclass
class DaskCluster:
    address: str
    workers: dict[str, subprocess.Popen[bytes]]
    """Worker name -> its ``dask worker`` process (the nanny; the worker is its child)."""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The processes' environment: shipped traces land under this test's directory."""
    staging = tmp_path / "tmp"
    staging.mkdir()
    return {**os.environ, "TMPDIR": str(staging), "COLUMNS": "250"}


@pytest.fixture
def dask_cluster(tmp_path: Path, env: dict[str, str]) -> Iterator[DaskCluster]:
    from distributed import Client

    logs = tmp_path / "dask.log"
    scheduler_file = tmp_path / "scheduler.json"
    here = ("--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0", "--no-dashboard")
    scheduler = start(
        "scheduler", *here, "--port", "0", "--scheduler-file", scheduler_file, env=env, log=logs
    )
    workers: dict[str, subprocess.Popen[bytes]] = {}
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists():
            assert scheduler.poll() is None, logs.read_text()
            assert time.monotonic() < deadline, "the scheduler did not start\n" + logs.read_text()
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written whole, but let the scheduler finish starting
        address = json.loads(scheduler_file.read_text())["address"]
        for name in ("w0", "w1"):
            workers[name] = start(
                "worker", address, *here, "--name", name, "--nthreads", "1", "--nworkers", "1",
                "--local-directory", tmp_path / name, "--death-timeout", "60", env=env, log=logs,
            )  # fmt: skip
        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=90)
        yield DaskCluster(address, workers)
    finally:
        for process in [*workers.values(), scheduler]:
            stop(process)


@pytest.fixture(scope="module")
def local_table(traces_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The grid swept on a local cluster of two workers, without --scheduler."""
    root = tmp_path_factory.mktemp("local")
    grid = root / "grid.toml"
    grid.write_text(kth_ctc_grid(traces_dir))
    staging = root / "tmp"
    staging.mkdir()
    env = {**os.environ, "TMPDIR": str(staging), "COLUMNS": "250"}
    done = run("sweep", grid, "--out", root / "out", "--workers", "2", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads((root / "out" / "sweep.json").read_text())["scheduler"] == "local cluster"
    return pq.read_table(root / "out" / "results.parquet")


def without_wall_time(table):
    return table.drop_columns(wall_time_columns(table.column_names))


def test_a_sweep_on_a_dask_scheduler_gives_the_local_table(
    dask_cluster, local_table, traces_dir, tmp_path, env
):
    grid = tmp_path / "grid.toml"
    grid.write_text(kth_ctc_grid(traces_dir))
    out = tmp_path / "out"
    done = run("sweep", grid, "--out", out, "--scheduler", dask_cluster.address, env=env)
    assert done.returncode == 0, done.stderr
    assert f"{CELLS} cells: {CELLS} run, 0 finished before, 0 failed" in done.stderr
    sweep = json.loads((out / "sweep.json").read_text())
    assert (sweep["scheduler"], sweep["workers"]) == (dask_cluster.address, 2)

    table = pq.read_table(out / "results.parquet")
    assert table.num_rows == CELLS
    assert set(table.column("status").to_pylist()) == {"done"}
    assert without_wall_time(table).equals(without_wall_time(local_table))
    assert "cell_wall_s" in table.column_names and "mean_bounded_slowdown" in table.column_names

    # Any cell is what `cpsched replay` gives: here the second slice of KTH, under easy++.
    (cell,) = [c for c in table.column("cell").to_pylist() if c.startswith("kth_600_1200.easy++")]
    command = json.loads((out / "cells" / cell / "cell.json").read_text())["replay_command"]
    args = shlex.split(command)
    assert args[:2] == ["cpsched", "replay"] and "--skip-jobs" in args
    done = run(*args[1:], env=env)
    assert done.returncode == 0, done.stderr
    replayed = Path(args[args.index("--out") + 1]) / "summary.json"
    assert replayed.read_bytes() == (out / "cells" / cell / "summary.json").read_bytes()


def test_a_worker_killed_mid_sweep_loses_no_cell_and_repeats_none(
    dask_cluster, local_table, traces_dir, tmp_path, env
):
    from distributed import Client

    grid = tmp_path / "grid.toml"
    grid.write_text(kth_ctc_grid(traces_dir))
    out = tmp_path / "out"
    command = [sys.executable, "-c", "from cpsched.cli import main; main()"]
    sweep = subprocess.Popen(
        [*command, "sweep", grid, "--out", out, "--scheduler", dask_cluster.address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        with Client(dask_cluster.address, timeout=30) as client:
            victim = next(
                address
                for address, info in client.scheduler_info(n_workers=-1)["workers"].items()
                if info["name"] == "w0"
            )
            deadline = time.monotonic() + 90
            while True:  # one cell finished, and w0 in the middle of another
                assert sweep.poll() is None, "the sweep ended before a worker could be killed"
                assert time.monotonic() < deadline, "w0 was never seen running a cell"
                held = [
                    k for k in client.processing([victim]).get(victim, ()) if "cpsched-cell-" in k
                ]
                if held and any((out / "cells").glob("*/summary.json")):
                    break
                time.sleep(0.05)
            stop(dask_cluster.workers["w0"], signal.SIGKILL)
            killed_at = time.time()
            interrupted = held[0].removeprefix("cpsched-cell-")
        _, stderr = sweep.communicate(timeout=180)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 0, stderr
    assert f"{CELLS} cells: {CELLS} run, 0 finished before, 0 failed" in stderr

    table = pq.read_table(out / "results.parquet")
    cells = table.column("cell").to_pylist()
    assert len(cells) == len(set(cells)) == CELLS
    assert set(table.column("status").to_pylist()) == {"done"}
    assert len(list((out / "cells").glob("*/summary.json"))) == CELLS
    assert without_wall_time(table).equals(without_wall_time(local_table))
    # The cell w0 held when it died was run again elsewhere.
    assert (out / "cells" / interrupted / "summary.json").stat().st_mtime >= killed_at
    assert json.loads((out / "sweep.json").read_text())["ran"] == CELLS
