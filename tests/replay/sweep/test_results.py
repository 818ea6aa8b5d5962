"""The sweep's table and report, from cells run in this process (the engine has its own
tests): one row per cell, every metric, ratios to today as ``compare`` computes them."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from cpsched.replay.compare_table import comparison_rows
from cpsched.replay.sweep import (
    CellStore,
    results_table,
    wall_time_columns,
    write_report,
    write_results,
)
from cpsched.replay.sweep.cell import run_cell
from cpsched.replay.sweep.shipping import TraceBundle
from cpsched.replay.sweep.table import SETTING_COLUMNS


@pytest.fixture
def swept(two_slice_plan, small_trace, tmp_path):
    """Every cell of ``two_slice_plan`` run, except one left as if the sweep had been
    interrupted."""
    plan = two_slice_plan
    store = CellStore(tmp_path / "sweep")
    bundle = TraceBundle.read(small_trace)
    cells = plan.cells()
    for cell in cells[:-1]:
        store.save(cell, run_cell(cell, bundle))
    return plan, store


def test_one_row_per_cell_with_its_settings_metrics_and_wall_time(swept):
    plan, store = swept
    table = results_table(plan, store)
    rows = table.to_pylist()
    assert [r["cell"] for r in rows] == [c.id for c in plan.cells()]
    assert [r["status"] for r in rows] == ["done"] * 3 + ["failed"] * 2 + ["missing"]
    assert rows[3]["error"].startswith("TraceError: no job of")
    assert [r["policy"] for r in rows[:3]] == ["easy++", "fcfs", "today"]
    # The policy's fields by their own names, for every cell, run or not.
    assert [(r["dispatcher"], r["predictor"]) for r in rows[3:]] == [
        ("easy", "last-two"),
        ("fcfs", "wall-time"),
        ("easy", "wall-time"),
    ]
    done = rows[0]
    summary = json.loads((store.folder(plan.cells()[0]) / "summary.json").read_text())
    assert done["mean_bounded_slowdown"] == summary["mean_bounded_slowdown"]
    assert done["utilisation.cpu"] == summary["utilisation"]["cpu"]
    assert done["by_length_class.short.jobs"] == summary["by_length_class"]["short"]["jobs"]
    assert done["cell_wall_s"] > 0 and done["replay_wall_s"] > 0
    assert rows[3]["mean_bounded_slowdown"] is None
    assert set(SETTING_COLUMNS) <= set(table.column_names)
    assert set(wall_time_columns(table.column_names)) == {
        "cell_wall_s",
        "replay_wall_s",
        "dispatch_ms_max",
        "dispatch_ms_mean",
        "dispatch_ms_p50",
        "dispatch_ms_p99",
    }
    written = pq.read_table(write_results(plan, store))
    assert written.equals(table)


def test_the_report_ranks_policies_per_trace_with_compares_ratios_to_today(swept):
    plan, store = swept
    report = write_report(plan, store).read_text()
    whole, empty = report.split("## small[500:600]")
    summaries = {}
    for cell in plan.cells()[:3]:
        stored = store.load(cell)
        assert stored is not None and stored.summary is not None
        summaries[cell.policy.label] = stored.summary
    rows = comparison_rows(summaries, baseline="today")
    by_bsld = sorted(rows, key=lambda r: r["mean_bounded_slowdown"])
    positions = [whole.index(f"| {r['run']} |") for r in by_bsld]
    assert positions == sorted(positions), "best first"
    for row in rows:
        ratio = row["mean_bounded_slowdown_ratio"]
        assert f"(×{ratio:.2f})" in whole.split(f"| {row['run']} |")[1].splitlines()[0]
    assert "![small[0:40]](charts/small_0_40.png)" in whole
    assert (store.out / "charts" / "small_0_40.png").stat().st_size > 10_000
    assert "* easy++ failed: TraceError: no job of" in empty
    assert "* today: not run yet" in empty
