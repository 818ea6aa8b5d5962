"""The numbers behind the dashboard's charts."""

from __future__ import annotations

import math

import pytest

from cpsched.service.store.dashboard import DecisionPoint, FinishedWait, Outcome, ShadowRecord
from cpsched.service.ui.figures import (
    accuracy,
    error_over_time,
    latency_figures,
    quantile,
    shadow_figures,
    waits_by_class,
)


def test_quantile_interpolates_between_order_statistics():
    assert quantile([3, 1, 2, 4], 0.5) == 2.5
    assert quantile([5], 0.95) == 5
    assert math.isnan(quantile([], 0.5))


def test_latency_figures_cover_the_hours_before_the_newest_answer():
    points = [DecisionPoint(0, 500.0, True, "deadline")]  # more than an hour before: out
    points += [DecisionPoint(7200 + 60 * i, float(i), i % 4 == 0, None) for i in range(60)]
    points.append(DecisionPoint(10799, 80.0, True, "deadline"))
    f = latency_figures(points, hours=1, bins=6)
    assert (f.start, f.end) == (7200, 10800)
    assert f.decisions == 61
    assert f.fallbacks == 15 + 1
    assert f.reasons == {"unnamed": 15, "deadline": 1}
    assert f.peak == 80.0
    assert [b.count for b in f.bins] == [10, 10, 10, 10, 10, 11]
    assert f.bins[0].fallback_rate == pytest.approx(3 / 10)
    assert f.bins[0].p50 == pytest.approx(4.5)


def test_the_queue_over_time_is_each_bins_largest():
    points = [DecisionPoint(60 * i, 1.0, False, None, queued=i, running=50 - i) for i in range(60)]
    f = latency_figures(points, hours=1, bins=6)
    assert [b.queued for b in f.bins] == [9, 19, 29, 39, 49, 59]
    assert [b.running for b in f.bins] == [50, 40, 30, 20, 10, 0]
    empty = latency_figures([DecisionPoint(0, 1.0, False, None, 5, 5), points[-1]], 1, 4)
    assert math.isnan(empty.bins[1].queued)


def test_utilisation_is_each_bins_mean_and_the_longest_wait_its_largest():
    points = [
        DecisionPoint(
            600 * i, 1.0, False, None, longest_wait_s=100 * i, utilisation={"cpu": i / 10}
        )
        for i in range(6)
    ]
    points.append(DecisionPoint(3599, 1.0, False, None))  # a row from before: no figures
    f = latency_figures(points, hours=1, bins=3)
    assert [b.longest_wait for b in f.bins] == [100, 300, 500]
    assert [b.utilisation["cpu"] for b in f.bins] == pytest.approx([0.05, 0.25, 0.45])
    old = latency_figures([DecisionPoint(0, 1.0, False, None)], hours=1, bins=2)
    assert math.isnan(old.bins[1].longest_wait) and old.bins[1].utilisation == {}


def test_an_empty_bin_has_no_rate_rather_than_zero():
    f = latency_figures(
        [DecisionPoint(0, 1.0, False, None), DecisionPoint(3599, 2.0, True, "x")], 1, 4
    )
    assert f.bins[0].count == 1
    assert math.isnan(f.bins[1].fallback_rate)
    assert latency_figures([], 6).bins == []


def test_accuracy_per_predictor():
    outcomes = [
        Outcome("a", "last-two", 100, 160, 0),  # ran 60 s longer
        Outcome("b", "last-two", 100, 80, 10),
        Outcome("c", "wall-time", 3600, 600, 20),
    ]
    by_name = {a.predictor: a for a in accuracy(outcomes)}
    assert by_name["last-two"].jobs == 2
    assert by_name["last-two"].mae_s == 40
    assert by_name["last-two"].under_rate == 0.5
    assert by_name["wall-time"].median_ae_s == 3000
    bins = error_over_time(outcomes, bins=2)
    assert [b.count for b in bins] == [2, 1]
    assert bins[1].median_ae_s == 3000


def test_shadow_verdicts_with_a_tolerance():
    record = ShadowRecord(
        would_start={"early": 100, "same": 200, "late": 900, "not-yet": 950},
        seen_queued={"early": 50, "same": 50, "late": 50, "slurm-first": 50, "gone": 50},
        slurm_start={"early": 400, "same": 230, "late": 300, "slurm-first": 120},
        first=100,
        last=950,
    )
    s = shadow_figures(record, running_starts={"gone": 500}, tolerance_s=60)
    verdicts = {j.job_id: j.verdict for j in s.jobs}
    assert verdicts == {
        "early": "earlier",
        "same": "same",
        "late": "later",
        "slurm-first": "later",  # every dry run left it waiting
        "gone": "later",  # running now, never started by a dry run
    }
    assert s.counts == {"earlier": 1, "same": 1, "later": 3}
    assert s.waiting == 1
    assert s.mean_delta_s == pytest.approx((-300 - 30 + 600) / 3)
    assert s.total_delta_s == -300 - 30 + 600
    assert s.jobs[0].job_id == "slurm-first"  # by real start
    strict = shadow_figures(record, running_starts={}, tolerance_s=0)
    assert {j.job_id: j.verdict for j in strict.jobs}["same"] == "earlier"


def test_waits_by_class_are_each_bins_mean_by_start_and_run_time():
    jobs = [
        FinishedWait(start=100, wait=60, run=600),  # short, first bin
        FinishedWait(start=200, wait=120, run=3599),  # short
        FinishedWait(start=300, wait=1000, run=3600),  # medium
        FinishedWait(start=2000, wait=7200, run=5 * 3600 + 1),  # long, second bin
        FinishedWait(start=-5, wait=99999, run=60),  # started before the window: out
    ]
    bins = waits_by_class(jobs, 0, 3600, bins=2)
    assert [b.jobs for b in bins] == [3, 1]
    assert bins[0].mean_wait["short"] == 90
    assert bins[0].mean_wait["medium"] == 1000
    assert math.isnan(bins[0].mean_wait["long"])
    assert bins[1].mean_wait["long"] == 7200
    assert waits_by_class(jobs, 10, 10) == []
