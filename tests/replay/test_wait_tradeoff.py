"""``bench/wait_tradeoff.py``: its run names stand for the policies they say, and a short
replay of real jobs gives a table and a chart."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from cpsched.runtime.policy import Policy
from tests.conftest import REPO


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "bench"))  # its siblings are imported by name
    return importlib.import_module("wait_tradeoff")


def test_a_bound_written_out_is_that_policy(bench: ModuleType) -> None:
    policy = bench.policy_of("3h/2+today1h+q0.98")
    assert policy == Policy.named(
        "default",
        wait_bound=10800,
        wait_bound_depth=2,
        wait_bound_today=3600,
        wait_overdue_quantile=0.98,
    )


def test_trial_runs_written_out(bench: ModuleType) -> None:
    assert bench.policy_of("6h+trial1m") == Policy.named("default", trial_run=60)


def test_the_default_bound_is_the_default_policy(bench: ModuleType) -> None:
    assert bench.policy_of("6h") == Policy.named("default")
    assert bench.policy_of("default") == Policy.named("default")


def test_unbounded_owed_today_only(bench: ModuleType) -> None:
    policy = bench.policy_of("unbounded+today3h")
    assert (policy.wait_bound, policy.wait_bound_depth, policy.wait_bound_today) == (0, 0, 10800)


@pytest.mark.parametrize("run", ["3x", "6h+later2h", "often", "3h/x", "+today3h"])
def test_a_wrong_run_name_says_what_a_run_is(bench: ModuleType, run: str) -> None:
    with pytest.raises(ValueError, match=r"run is|duration|after \+"):
        bench.policy_of(run)


def test_a_short_replay_gives_the_table_and_the_chart(
    bench: ModuleType, traces_dir: Path, tmp_path: Path
) -> None:
    found = {
        run: bench.replay("kth", run, tmp_path / run, traces_dir, 300, 0)
        for run in ("today", "unbounded")
    }
    figs = {run: bench.figures(where) for run, where in found.items()}
    text = bench.table("kth, jobs 1-300", figs, {run: None for run in found})
    assert "| today |" in text and "1.00 / 1.00 / 1.00 / 1.00" in text
    assert figs["unbounded"]["max"] >= figs["unbounded"]["p99"] > 0
    made = (found["unbounded"] / "summary.json").stat().st_mtime_ns
    bench.replay("kth", "unbounded", tmp_path / "unbounded", traces_dir, 300, 0)
    assert (found["unbounded"] / "summary.json").stat().st_mtime_ns == made  # not replayed
    chart = bench.plot("kth, jobs 1-300", figs, tmp_path / "curve.png")
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_trigger_line_runs_from_the_soonest_trigger_to_none(bench: ModuleType) -> None:
    runs = ["today", "unbounded", "1d", "1h", "6h+today3h", "3h/2", "90m"]
    assert bench.trigger_line(runs) == ["1h", "90m", "1d", "unbounded"]
