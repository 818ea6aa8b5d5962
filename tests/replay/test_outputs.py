"""Files written for a replay: summary, job and dispatch tables, plots."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from cpsched.replay.outputs import JOB_COLUMNS, atomic_target, write_outputs
from cpsched.replay.plots import binned, ecdf_points
from cpsched.replay.results import DispatchStats, JobRecords, ReplayResult, TimeSeries


def _load_cases():
    # tests/ is not a package, so the hand-computed cases are loaded by path.
    spec = importlib.util.spec_from_file_location(
        "_replay_metric_cases", Path(__file__).with_name("test_metrics.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_cases = _load_cases()
four_jobs, empty_result = _cases.four_jobs, _cases.empty_result

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS = (
    "wait_distribution.png",
    "slowdown_distribution.png",
    "queue_length.png",
    "utilisation.png",
)


def random_result(n_jobs: int, n_samples: int, seed: int = 0) -> ReplayResult:
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.integers(0, 30 * 86400, n_jobs))
    wait = rng.exponential(3000, n_jobs).astype(np.int64)
    trace_run = rng.integers(1, 40 * 3600, n_jobs)
    requested = trace_run + rng.integers(0, 3600, n_jobs)
    killed = rng.random(n_jobs) < 0.02
    run = np.where(killed, np.maximum(trace_run // 2, 1), trace_run)
    start = submit + wait
    t = np.sort(rng.integers(0, int(start.max() + run.max()), n_samples))
    used = np.stack([rng.integers(0, 1000, n_samples), rng.integers(0, 4000, n_samples)], 1)
    return ReplayResult(
        JobRecords(
            job_id=np.arange(n_jobs, dtype=np.int64),
            submit=submit,
            start=start,
            end=start + run,
            trace_run=trace_run,
            requested=requested,
            procs=rng.integers(1, 64, n_jobs),
            killed=killed,
            predicted=requested,
        ),
        TimeSeries(
            time=t,
            queue_length=rng.integers(0, 500, n_samples).astype(np.int32),
            used=used,
            resource_names=("cpu", "mem"),
            capacity=(1000, 4000),
        ),
        DispatchStats(
            time=np.arange(n_samples),
            wall_ms=rng.random(n_samples) * 5,
            fallbacks=0,
            solver_status={"h": 1},
        ),
        settings={"trace": "random", "seed": seed},
    )


def test_write_outputs_files(tmp_path):
    out = tmp_path / "run"
    summary = write_outputs(four_jobs(), out, warmup_fraction=0.25)
    assert json.loads((out / "summary.json").read_text()) == summary
    assert (out / "summary.json").read_text().endswith("}\n")
    assert summary["warmup_jobs_excluded"] == 1

    jobs = pq.read_table(out / "jobs.parquet")
    assert tuple(jobs.column_names) == JOB_COLUMNS
    cols = jobs.to_pydict()
    assert cols["job_id"] == ["a", "b", "c", "d"]
    assert cols["wait"] == [0, 90, 4080, 4070]
    assert cols["run"] == [100, 4000, 5, 7200]
    assert cols["bounded_slowdown"] == pytest.approx([1, 1.0225, 408.5, 11270 / 7200])
    assert cols["length_class"] == ["short", "medium", "short", "long"]
    assert cols["warmup"] == [True, False, False, False]
    assert cols["killed"] == [False, False, False, True]

    header = (out / "jobs.csv").read_text().splitlines()[0]
    assert header == ",".join(f'"{c}"' for c in JOB_COLUMNS)
    csv_table = pacsv.read_csv(out / "jobs.csv")
    assert csv_table.num_rows == 4 and csv_table.column("wait").to_pylist()[2] == 4080

    dispatch = pq.read_table(out / "dispatch.parquet")
    assert dispatch.column_names == ["time", "wall_ms"]
    assert dispatch.column("wall_ms").to_pylist() == [1, 2, 3, 4, 5, 6, 7, 100]

    for name in PLOTS:
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000, name
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_write_outputs_without_plots_or_timings(tmp_path):
    a = write_outputs(four_jobs([1.0] * 8), tmp_path / "a", timings=False, plots=False)
    b = write_outputs(four_jobs([9.0] * 8), tmp_path / "b", timings=False, plots=False)
    assert not any(k.startswith("dispatch_ms_") for k in a)
    assert (tmp_path / "a" / "summary.json").read_bytes() == (
        tmp_path / "b" / "summary.json"
    ).read_bytes()
    assert a == b
    assert not list((tmp_path / "a").glob("*.png"))


def test_int_and_mixed_job_ids_become_strings(tmp_path):
    r = four_jobs()
    r.jobs.job_id = np.array([10, 11, 12, 13], dtype=np.int64)
    write_outputs(r, tmp_path / "i", plots=False)
    assert pq.read_table(tmp_path / "i" / "jobs.parquet").column("job_id").to_pylist() == [
        "10",
        "11",
        "12",
        "13",
    ]
    r.jobs.job_id = np.array([1, "x", 2, "y"], dtype=object)
    write_outputs(r, tmp_path / "m", plots=False)
    ids = pq.read_table(tmp_path / "m" / "jobs.parquet").column("job_id").to_pylist()
    assert ids == ["1", "x", "2", "y"]


def test_empty_result_writes_everything(tmp_path):
    summary = write_outputs(empty_result(), tmp_path)
    assert summary["jobs"] == 0
    assert pq.read_table(tmp_path / "jobs.parquet").num_rows == 0
    assert pq.read_table(tmp_path / "dispatch.parquet").num_rows == 0
    for name in PLOTS:
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC), name


def test_atomic_target_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_target(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]
    with atomic_target(path) as tmp:
        tmp.write_text("new")
    assert path.read_text() == "new"


def test_ecdf_points_are_capped_and_reach_one():
    x, y = ecdf_points(np.arange(100_000)[::-1], points=1000)
    assert len(x) == 1000 and y[-1] == 1.0 and x[0] == 0 and x[-1] == 99_999
    assert np.all(np.diff(x) >= 0)


def test_binned_mean_is_exact_time_weighted():
    # Step function 1 on [0, 10), 3 on [10, 30), 5 from 30 (end of span). Two bins of 15 s:
    # first (1*10 + 3*5) / 15, second 3.
    t = np.array([0, 10, 10, 30])
    v = np.array([[1, 0], [9, 0], [3, 2], [5, 2]])
    centres, mean, peak = binned(t, v, bins=2)
    assert centres.tolist() == [7.5, 22.5]
    assert mean[:, 0].tolist() == pytest.approx([25 / 15, 3])
    assert mean[:, 1].tolist() == pytest.approx([2 * 5 / 15, 2])
    # The sample 9 at t=10 is overridden at once, so it never shows.
    assert peak[:, 0].tolist() == [3, 5]
    _, m1, _ = binned(t, v[:, 0], bins=2)
    assert m1.tolist() == pytest.approx(mean[:, 0].tolist())


def test_metrics_module_does_not_import_matplotlib():
    import subprocess

    code = "import replay.metrics, sys; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
