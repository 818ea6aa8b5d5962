"""Job by job against a baseline (cpsched compare): shares of earlier, same and later
starts, p99 and max wait, mean waits by size and length class, from written jobs.parquet."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cpsched.errors import InputError
from cpsched.replay.job_by_job import Waits, job_by_job, to_markdown
from cpsched.replay.outputs import write_outputs
from cpsched.replay.results import ReplayResult
from tests.replay.test_outputs import random_result


def written(result: ReplayResult, out: Path, warmup: float = 0.0) -> Waits:
    write_outputs(result, out, warmup_fraction=warmup, timings=False, plots=False)
    return Waits.read(out / "jobs.parquet")


def shifted(result: ReplayResult, by: np.ndarray) -> ReplayResult:
    """``result`` with each job started ``by`` seconds later (its run unchanged)."""
    jobs = replace(result.jobs, start=result.jobs.start + by, end=result.jobs.end + by)
    return replace(result, jobs=jobs)


def test_shares_of_earlier_same_and_later_starts(tmp_path):
    base = random_result(1000, 50, seed=1)
    rng = np.random.default_rng(2)
    by = rng.choice([-600, 0, 0, 1800, 7200, 2 * 86400], size=1000)
    by = np.maximum(by, -(base.jobs.start - base.jobs.submit))  # never before its submit
    today = written(base, tmp_path / "today")
    other = written(shifted(base, by), tmp_path / "other")
    r = job_by_job(other, today)
    assert r["jobs"] == 1000
    assert r["earlier"] == pytest.approx((by < 0).mean())
    assert r["same"] == pytest.approx((by == 0).mean())
    assert r["later"] == pytest.approx((by > 0).mean())
    assert r["later_1h"] == pytest.approx((by > 3600).mean())
    assert r["later_1d"] == pytest.approx((by > 86400).mean())
    assert r["earlier"] + r["same"] + r["later"] == pytest.approx(1)
    wait = base.jobs.start - base.jobs.submit + by
    assert r["max_wait_s"] == wait.max()
    assert r["p99_wait_s"] == pytest.approx(np.percentile(wait, 99))


def test_mean_wait_by_size_and_length_class_beside_the_baseline(tmp_path):
    base = random_result(500, 20, seed=3)
    today = written(base, tmp_path / "today")
    later = written(shifted(base, np.full(500, 100)), tmp_path / "later")
    r = job_by_job(later, today)
    total = 0
    for name, c in {**r["by_size"], **r["by_length_class"]}.items():
        if c["jobs"]:
            assert c["mean_wait_s"] == pytest.approx(c["baseline_mean_wait_s"] + 100), name
        total += c["jobs"]
    assert total == 2 * 500  # every job in one size class and one length class
    one_cpu = base.jobs.procs == 1
    assert r["by_size"]["1 cpu"]["jobs"] == one_cpu.sum()


def test_warm_up_jobs_are_left_out_and_ids_are_matched_not_positions(tmp_path):
    base = random_result(200, 10, seed=4)
    today = written(base, tmp_path / "today", warmup=0.1)
    assert len(today.job_id) == 180
    same = written(base, tmp_path / "same", warmup=0.1)
    r = job_by_job(same, today)
    assert (r["same"], r["earlier"], r["later"]) == (1.0, 0.0, 0.0)


def test_runs_of_different_jobs_are_refused(tmp_path):
    today = written(random_result(100, 10), tmp_path / "today")
    other = written(random_result(90, 10), tmp_path / "other")
    with pytest.raises(InputError, match="did not replay the same jobs"):
        job_by_job(other, today)


def test_a_file_that_is_not_a_jobs_table_is_an_input_error(tmp_path):
    bad = tmp_path / "jobs.parquet"
    bad.write_text("not parquet")
    with pytest.raises(InputError, match="not a replay's jobs table"):
        Waits.read(bad)


def test_markdown_has_a_row_per_run_and_both_class_tables(tmp_path):
    base = random_result(300, 10, seed=5)
    today = written(base, tmp_path / "today")
    runs = {
        "a": job_by_job(written(shifted(base, np.full(300, 10)), tmp_path / "a"), today),
        "b": job_by_job(today, today),
    }
    text = to_markdown(runs)
    assert "| a | 0.0% | 0.0% | 100.0% |" in text
    assert "| b | 0.0% | 100.0% | 0.0% |" in text
    assert "Mean wait by job size" in text and "Mean wait by length class" in text
