"""Accuracy evaluation without scheduling."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from cpsched.core.problem import Job
from cpsched.predictor.accuracy import evaluate, write_accuracy
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.walltime import WallTime
from tests.predictor._util import mk


@dataclass(frozen=True)
class TJ:
    job: Job
    run_time: int
    wait: int = 0


def trace() -> list[TJ]:
    # Given out of submit order on purpose: evaluate sorts by submit.
    return [
        TJ(mk("c", submit=250, limit=1000), 300),  # a (end 100) and b (end 200) finished
        TJ(mk("a", submit=0, limit=1000), 100),
        TJ(mk("b", submit=50, limit=1000), 150),  # a has not finished at 50
        TJ(mk("d", submit=200, limit=1000), 500),  # b ends at 200: at or before counts
    ]


def test_last_two_learns_only_from_finished_jobs():
    result = evaluate(trace(), LastTwo())
    # c: mean(a=100, b=150); a, b: no history; d: a and b finished by 200.
    assert result["predictions"].tolist() == [125, 1000, 1000, 125]
    real = np.array([300, 100, 150, 500])
    pred = np.array([125, 1000, 1000, 125])
    assert result["mae_s"] == pytest.approx(np.abs(pred - real).mean())
    assert result["median_ae_s"] == pytest.approx(np.median(np.abs(pred - real)))
    assert result["under_rate"] == 0.5
    assert result["over_rate"] == 0.5
    assert result["exact_rate"] == 0.0
    assert result["ratios"].tolist() == pytest.approx((real / pred).tolist())
    assert result["predictor"] == "last-two"
    assert result["jobs"] == 4


def test_a_recorded_wait_delays_when_a_job_is_known_to_have_finished():
    jobs = trace()
    jobs[1] = TJ(jobs[1].job, 100, wait=200)  # a now ends at 300: after c and d are predicted
    result = evaluate(jobs, LastTwo())
    # c (at 250) and d (at 200) see only b, which ended at 200.
    assert result["predictions"].tolist() == [150, 1000, 1000, 150]


def test_wall_time_accuracy_and_written_files(tmp_path):
    result = evaluate(trace(), WallTime())
    assert result["under_rate"] == 0.0
    json_path, png_path = write_accuracy(result, tmp_path / "out")
    text = json_path.read_text()
    summary = json.loads(text)
    assert list(summary) == sorted(summary)
    assert summary["predictor"] == "wall-time"
    assert summary["jobs"] == 4
    assert summary["predictions"] == 4  # the count; per-job values stay out of the JSON
    assert set(summary["ratio_quantiles"]) >= {"p01", "p50", "p99"}
    assert png_path.read_bytes()[:4] == b"\x89PNG"


def test_empty_trace(tmp_path):
    result = evaluate([], LastTwo())
    assert result["jobs"] == 0
    assert result["mae_s"] is None
    write_accuracy(result, tmp_path)
    assert json.loads((tmp_path / "accuracy.json").read_text())["ratio_quantiles"] == {}


def test_the_asymmetric_loss_weighs_an_underestimate_nine_times_an_overestimate():
    from cpsched.predictor.accuracy import summarize

    real = np.array([100, 100, 100, 100])
    # Under by 50 and by 10; over by 50; exact.
    result = summarize("x", real, np.array([50, 90, 150, 100]))
    assert result["mean_under_s"] == 30.0 and result["mean_over_s"] == 50.0
    assert result["pinball_loss_s"] == pytest.approx((0.9 * 50 + 0.9 * 10 + 0.1 * 50) / 4)
    # All 20 s short or all 20 s long: the same MAE, nine times the loss when short.
    short = summarize("short", real, real - 20)
    long = summarize("long", real, real + 20)
    assert short["mae_s"] == long["mae_s"] == 20.0
    assert short["pinball_loss_s"] == pytest.approx(9 * long["pinball_loss_s"])
    assert summarize("z", real, real)["mean_under_s"] is None
