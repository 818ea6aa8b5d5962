"""Summary statistics of a replay, checked against values computed by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from cpsched.replay.compare_table import (
    cell,
    comparison_rows,
    human,
    lookup,
    to_markdown,
    write_csv,
)
from cpsched.replay.metrics import job_metrics, summarise, warmup_count
from cpsched.replay.results import DispatchStats, JobRecords, ReplayResult, TimeSeries


def four_jobs(wall_ms: list[float] | None = None) -> ReplayResult:
    """A 4-cpu, 100-mem machine and four jobs, in submission order:

    job  submit start   end    wait  run   trace_run  predicted  procs  class   killed
    a      0      0     100      0   100     100        150        2    short
    b     10    100    4100     90  4000    4000       3000        4    medium
    c     20   4100    4105   4080     5       5         60        1    short
    d     30   4100   11300   4070  7200   20000       7200        2    long    yes (limit)

    slowdown (wait+run)/run:        a 1, b 4090/4000 = 1.0225, c 4085/5 = 817,
                                    d 11270/7200 = 1.565277…
    bounded max((wait+run)/max(run,10), 1): a 1, b 1.0225, c 4085/10 = 408.5, d 1.565277…

    One sample per dispatcher call (state after the call):
    t:      0   10   20   30   100  4100  4105  11300
    queue:  0    1    2    3     2     0     0      0
    cpu:    2    2    2    2     4     3     2      0
    mem:   10   10   10   10    50    30    20      0
    """
    jobs = JobRecords.from_columns(
        job_id=["a", "b", "c", "d"],
        submit=[0, 10, 20, 30],
        start=[0, 100, 4100, 4100],
        end=[100, 4100, 4105, 11300],
        trace_run=[100, 4000, 5, 20000],
        requested=[200, 4000, 60, 7200],
        procs=[2, 4, 1, 2],
        killed=[False, False, False, True],
        predicted=[150, 3000, 60, 7200],
    )
    series = TimeSeries.from_columns(
        time=[0, 10, 20, 30, 100, 4100, 4105, 11300],
        queue_length=[0, 1, 2, 3, 2, 0, 0, 0],
        used=[[2, 10], [2, 10], [2, 10], [2, 10], [4, 50], [3, 30], [2, 20], [0, 0]],
        resource_names=("cpu", "mem"),
        capacity=(4, 100),
    )
    wall_ms = wall_ms if wall_ms is not None else [1, 2, 3, 4, 5, 6, 7, 100]
    dispatch = DispatchStats.from_columns(
        time=range(len(wall_ms)),
        wall_ms=wall_ms,
        fallbacks=1,
        fallback_reasons={"no time left for solve": 1},
        solver_status={"optimal": 5, "heuristic": 3},
    )
    return ReplayResult(jobs, series, dispatch, settings={"trace": "hand.swf", "seed": 7})


def empty_result() -> ReplayResult:
    return ReplayResult(
        JobRecords.empty(),
        TimeSeries.empty(("cpu",), (4,)),
        DispatchStats.from_columns(time=[], wall_ms=[]),
        settings={},
    )


def test_per_job_metrics():
    m = job_metrics(four_jobs().jobs)
    assert m.wait.tolist() == [0, 90, 4080, 4070]
    assert m.run.tolist() == [100, 4000, 5, 7200]
    assert m.slowdown.tolist() == pytest.approx([1, 1.0225, 817, 11270 / 7200])
    assert m.bounded_slowdown.tolist() == pytest.approx([1, 1.0225, 408.5, 11270 / 7200])
    assert m.length_class.tolist() == [0, 1, 0, 2]


def test_length_class_boundaries():
    # < 3600 short; 3600..18000 medium (both ends); > 18000 long.
    jobs = JobRecords.from_columns(
        job_id=[1, 2, 3, 4],
        submit=[0] * 4,
        start=[0] * 4,
        end=[3599, 3600, 18000, 18001],
        trace_run=[3599, 3600, 18000, 18001],
        requested=[20000] * 4,
        procs=[1] * 4,
        killed=[False] * 4,
        predicted=[1] * 4,
    )
    assert job_metrics(jobs).length_class.tolist() == [0, 1, 1, 2]


def test_bounded_slowdown_floors_short_runs_at_tau_and_result_at_one():
    jobs = JobRecords.from_columns(
        job_id=["x", "y"],
        submit=[0, 0],
        start=[0, 3],
        end=[2, 5],
        trace_run=[2, 2],
        requested=[10, 10],
        procs=[1, 1],
        killed=[False, False],
        predicted=[2, 2],
    )
    m = job_metrics(jobs)
    # x: (0+2)/max(2,10) = 0.2 -> 1; y: (3+2)/10 = 0.5 -> 1. Plain slowdowns 1 and 2.5.
    assert m.bounded_slowdown.tolist() == [1.0, 1.0]
    assert m.slowdown.tolist() == [1.0, 2.5]


def test_summary_matches_hand_computation():
    s = summarise(four_jobs(), warmup_fraction=0.01)
    assert s["jobs"] == 4 and s["warmup_jobs_excluded"] == 0 and s["warmup_fraction"] == 0.01
    # waits sorted 0, 90, 4070, 4080: p95 at rank 2.85 -> 4070 + 0.85 * 10.
    assert s["mean_wait_s"] == 2060.0
    assert s["median_wait_s"] == 2080.0
    assert s["p95_wait_s"] == 4078.5
    assert s["max_wait_s"] == 4080 and isinstance(s["max_wait_s"], int)
    sd4 = 11270 / 7200
    assert s["mean_slowdown"] == round((1 + 1.0225 + 817 + sd4) / 4, 6)
    assert s["median_slowdown"] == round((1.0225 + sd4) / 2, 6)
    assert s["p95_slowdown"] == round(sd4 + 0.85 * (817 - sd4), 6)
    assert s["max_slowdown"] == 817.0
    assert s["mean_bounded_slowdown"] == round((1 + 1.0225 + 408.5 + sd4) / 4, 6)
    assert s["killed_jobs"] == 1
    assert s["makespan_s"] == 11300
    # cpu: 2*100 + 4*4000 + 3*5 + 2*7195 = 30605 cpu-s over 4 cpus * 11300 s.
    # mem: 10*100 + 50*4000 + 30*5 + 20*7195 = 345050 over 100 * 11300.
    assert s["utilisation"] == {"cpu": round(30605 / 45200, 6), "mem": round(345050 / 1130000, 6)}
    # 1*10 + 2*10 + 3*70 + 2*4000 = 8240 job-seconds queued (= Σ waits, Little's law).
    assert s["mean_queue_length"] == round(8240 / 11300, 6)
    assert s["max_queue_length"] == 3
    assert s["dispatch_calls"] == 8
    assert s["dispatch_ms_mean"] == 16.0
    assert s["dispatch_ms_p50"] == 4.5
    assert s["dispatch_ms_p99"] == round(7 + 0.93 * 93, 6)
    assert s["dispatch_ms_max"] == 100.0
    assert s["fallbacks"] == 1
    assert s["fallback_reasons"] == {"no time left for solve": 1}
    assert s["solver_status"] == {"heuristic": 3, "optimal": 5}
    assert s["by_length_class"] == {
        "short": {
            "jobs": 2,
            "mean_wait_s": 2040.0,
            "max_wait_s": 4080,
            "mean_slowdown": 409.0,
            "mean_bounded_slowdown": 204.75,
        },
        "medium": {
            "jobs": 1,
            "mean_wait_s": 90.0,
            "max_wait_s": 90,
            "mean_slowdown": 1.0225,
            "mean_bounded_slowdown": 1.0225,
        },
        "long": {
            "jobs": 1,
            "mean_wait_s": 4070.0,
            "max_wait_s": 4070,
            "mean_slowdown": round(sd4, 6),
            "mean_bounded_slowdown": round(sd4, 6),
        },
    }
    # |trace - predicted| = 50, 1000, 55, 12800; under: b, d; over: a, c.
    assert s["predictor"] == {"mae_s": 3476.25, "under_rate": 0.5, "over_rate": 0.5}
    assert s["settings"] == {"trace": "hand.swf", "seed": 7}
    assert s["model_size"] is None
    assert "warm-up" in s["notes"]["killed_jobs"]


def test_warmup_excludes_first_jobs_from_job_statistics_only():
    s = summarise(four_jobs(), warmup_fraction=0.25)
    assert s["warmup_jobs_excluded"] == 1 and s["jobs"] == 3 and s["jobs_total"] == 4
    assert s["mean_wait_s"] == round((90 + 4080 + 4070) / 3, 6)
    assert s["by_length_class"]["short"]["jobs"] == 1
    assert s["predictor"]["over_rate"] == round(1 / 3, 6)
    # Whole-run figures keep every job.
    assert s["killed_jobs"] == 1 and s["makespan_s"] == 11300
    assert s["utilisation"]["cpu"] == round(30605 / 45200, 6)
    assert "first 1 of 4" in s["notes"]["warmup"]


@pytest.mark.parametrize(
    ("n", "fraction", "expected"),
    [(4, 0.01, 0), (100, 0.01, 1), (199, 0.01, 1), (300_000, 0.01, 3000), (100, 0.29, 29)],
)
def test_warmup_count_floors(n, fraction, expected):
    assert warmup_count(n, fraction) == expected


def test_warmup_fraction_out_of_range():
    with pytest.raises(ValueError, match="warmup_fraction"):
        summarise(four_jobs(), warmup_fraction=1.0)


def test_empty_result_gives_nulls_not_nan():
    s = summarise(empty_result())
    text = json.dumps(s, allow_nan=False)
    assert s["jobs"] == 0 and s["dispatch_calls"] == 0
    for key in ("mean_wait_s", "p95_slowdown", "mean_bounded_slowdown", "makespan_s"):
        assert s[key] is None, key
    assert s["dispatch_ms_p99"] is None and s["mean_queue_length"] is None
    assert s["utilisation"] == {"cpu": None}
    assert s["by_length_class"]["long"] == {
        "jobs": 0,
        "mean_wait_s": None,
        "max_wait_s": None,
        "mean_slowdown": None,
        "mean_bounded_slowdown": None,
    }
    assert s["predictor"]["mae_s"] is None
    assert "NaN" not in text


def test_series_before_first_submit_and_zero_capacity_are_handled():
    r = four_jobs()
    series = TimeSeries.from_columns(
        time=[-50, 0, 200],
        queue_length=[5, 1, 0],
        used=[[4, 7], [2, 7], [0, 0]],
        resource_names=("cpu", "gpu"),
        capacity=(4, 0),
    )
    s = summarise(
        ReplayResult(
            r.jobs, series, DispatchStats.from_columns(time=[0, 1, 2], wall_ms=[1, 1, 1]), {}
        )
    )
    # The sample at -50 lies outside [0, 11300]: only 2 cpus over [0, 200) count.
    assert s["utilisation"] == {"cpu": round(400 / 45200, 6), "gpu": None}
    assert s["mean_queue_length"] == round(200 / 11300, 6)


def test_without_timings_summaries_are_byte_identical():
    a = summarise(four_jobs([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]), include_timings=False)
    b = summarise(four_jobs([9.5, 0.1, 3.3, 4.0, 5.0, 6.0, 7.0, 800.0]), include_timings=False)
    dump = [
        json.dumps(x, indent=2, sort_keys=True)
        for x in (a, b, summarise(four_jobs(), include_timings=False))
    ]
    assert dump[0] == dump[1] == dump[2]
    assert not any(k.startswith("dispatch_ms_") for k in a)
    assert a["dispatch_calls"] == 8


def test_model_size_is_summarised_when_given():
    r = four_jobs()
    r.dispatch.model_size = {"variables": np.array([10, 20, 30, 40, 50, 60, 70, 80])}
    assert summarise(r)["model_size"] == {"variables": {"mean": 45.0, "max": 80}}


def test_settings_are_made_json_ready():
    r = four_jobs()
    r.settings = {
        "trace": Path("/t/x.swf"),
        "jobs": np.int64(3),
        "ratio": np.float64(0.5),
        "bad": math.nan,
        "pair": (1, 2),
        "cleaning": {"counts": {"skip": np.int32(4)}},
    }
    s = summarise(r)
    assert s["settings"] == {
        "trace": "/t/x.swf",
        "jobs": 3,
        "ratio": 0.5,
        "bad": None,
        "pair": [1, 2],
        "cleaning": {"counts": {"skip": 4}},
    }
    json.dumps(s, allow_nan=False)


def test_int_job_ids_and_mismatched_lengths():
    jobs = JobRecords.from_columns(
        job_id=[7],
        submit=[0],
        start=[0],
        end=[1],
        trace_run=[1],
        requested=[1],
        procs=[1],
        killed=[False],
        predicted=[1],
    )
    assert jobs.job_id.dtype == np.int64
    with pytest.raises(Exception, match="entries"):
        JobRecords(**{**jobs.__dict__, "end": np.array([1, 2])})
    with pytest.raises(Exception, match="one per call"):
        ReplayResult(
            jobs,
            TimeSeries.empty(("cpu",), (1,)),
            DispatchStats.from_columns(time=[0, 1], wall_ms=[1]),
            {},
        )


# --- comparison table ---------------------------------------------------------------


def _summaries() -> dict[str, dict[str, object]]:
    easy = summarise(four_jobs())
    other = json.loads(json.dumps(easy))
    other["mean_wait_s"] = 1030.0
    other["killed_jobs"] = 0
    other["utilisation"] = {"cpu": 0.5}
    easy["killed_jobs"] = 0
    return {"easy": easy, "hcp3": other}


def test_comparison_rows_and_ratios():
    rows = comparison_rows(_summaries(), baseline="easy")
    assert [r["run"] for r in rows] == ["easy", "hcp3"]
    easy, hcp3 = rows
    assert easy["mean_wait_s"] == 2060.0 and easy["mean_wait_s_ratio"] == 1.0
    assert hcp3["mean_wait_s_ratio"] == 0.5
    assert hcp3["killed_jobs"] == 0 and hcp3["killed_jobs_ratio"] is None  # baseline 0
    assert hcp3["utilisation.cpu"] == 0.5
    assert hcp3["utilisation.cpu_ratio"] == round(0.5 / round(30605 / 45200, 6), 6)
    assert hcp3["dispatch_ms_p99_ratio"] == 1.0


def test_comparison_without_baseline_or_key():
    rows = comparison_rows(_summaries(), baseline="fcfs", keys=("mean_wait_s", "nope.deep"))
    assert rows[0]["mean_wait_s_ratio"] is None
    assert rows[1]["nope.deep"] is None and rows[1]["nope.deep_ratio"] is None
    assert lookup({"a": {"b": True}}, "a.b") is None


def test_markdown_and_csv(tmp_path):
    rows = comparison_rows(_summaries(), baseline="easy", keys=("mean_wait_s", "killed_jobs"))
    md = to_markdown(rows)
    lines = md.splitlines()
    assert lines[0] == "| run | mean wait | killed |"  # in words, not the summary's keys
    assert lines[3] == "| hcp3 | 17 min (×0.50) | 0 |"  # 1,030 s, in human units
    path = tmp_path / "cmp" / "table.csv"
    write_csv(rows, path)
    text = path.read_text().splitlines()
    assert text[0] == "run,mean_wait_s,mean_wait_s_ratio,killed_jobs,killed_jobs_ratio"
    assert text[2] == "hcp3,1030.0,0.5,0,"
    assert sorted(p.name for p in path.parent.iterdir()) == ["table.csv"]


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("mean_bounded_slowdown", 72.51, "72.5"),  # three figures, as the verdict
        ("mean_bounded_slowdown", 124.7, "125"),
        ("mean_bounded_slowdown", 1.234, "1.23"),
        ("max_wait_s", 541094, "6 d 6 h"),
        ("utilisation.cpu", 0.65, "65%"),
        ("dispatch_ms_p99", 0.254, "0.254 ms"),
        ("dispatch_ms_p99", 142.4, "142 ms"),
        ("killed_jobs", 1200, "1,200"),
        ("not.a.column", 3.5, "3.50"),
        ("max_wait_s", None, "n/a"),
    ],
)
def test_cells_read_in_their_units(key, value, text):
    assert human(key, value) == text


@pytest.mark.parametrize(
    ("ratio", "text"), [(0.584, "×0.58"), (2.18, "×2.18"), (63.95, "×64"), (123.16, "×123")]
)
def test_ratios_read_to_three_figures_at_most(ratio, text):
    assert cell({"replay_s": 60.0, "replay_s_ratio": ratio}, "replay_s")[1] == text
