"""``cpsched sweep`` as a user runs it: one-line errors for bad grids, a clear word when
Dask is missing, a dry run, and a failed cell that does not stop the sweep."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

# Dask made unimportable, as in an install without the [sweep] extra.
WITHOUT_DASK = "import sys; sys.modules['dask'] = sys.modules['distributed'] = None; "


def cpsched(*args: str | Path, prelude: str = "", tmp: Path | None = None):
    env = {**os.environ, "COLUMNS": "250"}
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return subprocess.run(
        [sys.executable, "-c", prelude + "from cpsched.cli import main; main()", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def grid(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(text)
    return path


TRACE = '[[traces]]\npath = "TRACE"\n[[policies]]\n'
BAD_GRIDS = [
    (TRACE + "cp_windw = 5", "unknown policy field 'cp_windw'"),
    ('[[traces]]\npath = "gone.swf"\n', "trace file 'gone.swf' does not exist"),
    (TRACE + "cp_window = {from = 9, to = 1, step = 1}", "range from 9 is above to 1"),
    (
        TRACE + "backfill_depth = 0",
        "backfill_depth = 0: Input should be greater than or equal to 1",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_GRIDS)
def test_a_bad_grid_is_one_line_and_exit_code_2(small_trace, tmp_path, text, message):
    path = grid(tmp_path, text.replace("TRACE", str(small_trace)))
    done = cpsched("sweep", path, "--out", tmp_path / "out")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: grid ") and message in lines[0]
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "out").exists()


def test_a_missing_grid_file_is_one_line(tmp_path):
    done = cpsched("sweep", tmp_path / "none.toml", "--out", tmp_path / "out")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"error: grid file {tmp_path / 'none.toml'} does not exist; check the path"
    )


def test_without_dask_the_command_still_helps_and_a_sweep_names_the_extra(small_trace, tmp_path):
    done = cpsched("--help", prelude=WITHOUT_DASK)
    assert done.returncode == 0, done.stderr
    assert "sweep" in done.stdout
    path = grid(tmp_path, f'[[traces]]\npath = "{small_trace}"\n[[policies]]\npolicy = "today"')
    done = cpsched("sweep", path, "--out", tmp_path / "out", prelude=WITHOUT_DASK)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: cpsched sweep needs the [sweep] extra (dask is not installed): "
        "pip install 'cpsched[sweep]'"
    ]


def test_a_dry_run_lists_the_cells_and_their_replay_commands(small_trace, tmp_path):
    path = grid(
        tmp_path,
        f'[[traces]]\npath = "{small_trace}"\njobs = [10, "10:20"]\n'
        '[[policies]]\npolicy = "easy++"\nbackfill_depth = [1, 2]',
    )
    done = cpsched("sweep", path, "--out", tmp_path / "out", "--dry-run", prelude=WITHOUT_DASK)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 * 3 * 2  # two slices, three policies (today added), two lines each
    assert lines[0].startswith("small_0_10.easy++_backfill_depth_1.") and "(to run)" in lines[0]
    assert "cpsched replay" in lines[1] and "--policy easy++ --jobs 10" in lines[1]
    assert "--backfill-depth 2 --skip-jobs 10 --jobs 10" in lines[-3]
    assert not (tmp_path / "out").exists()


def test_workers_and_a_scheduler_do_not_go_together(small_trace, tmp_path):
    path = grid(tmp_path, f'[[traces]]\npath = "{small_trace}"\n[[policies]]\npolicy = "today"')
    done = cpsched("sweep", path, "--out", tmp_path / "o", "--workers", "2", "--scheduler", "x:1")
    assert done.returncode == 2
    assert "--workers sizes the local cluster" in done.stderr


@pytest.mark.usefixtures("dask_installed")
def test_a_failed_cell_is_reported_and_the_others_finish_on_a_local_cluster(small_trace, tmp_path):
    path = grid(
        tmp_path,
        f'[[traces]]\npath = "{small_trace}"\njobs = [40, "100:"]\n[[policies]]\npolicy = "easy++"',
    )
    out = tmp_path / "out"
    (tmp_path / "tmp").mkdir()
    done = cpsched("sweep", path, "--out", out, "--workers", "2", tmp=tmp_path / "tmp")
    assert done.returncode == 1
    assert "4 cells: 4 run, 0 finished before, 2 failed" in done.stderr
    failed = [line for line in done.stderr.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 2
    assert all("small_100.easy++." in line or "small_100.today." in line for line in failed)
    assert all("TraceError: no job of" in line for line in failed)
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert [r["status"] for r in rows] == ["done", "done", "failed", "failed"]
    assert "easy++ failed: TraceError" in (out / "report.md").read_text()
