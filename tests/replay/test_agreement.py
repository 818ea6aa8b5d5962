"""Two replays agree when they decided the same; what the wall clock decided (fallbacks
of calls past their deadline, timings) is reported beside, not compared."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq

from cpsched.replay.agreement import compare_replays, compare_summaries, is_wall_clock
from cpsched.replay.runner import ReplaySettings, run_replay
from cpsched.runtime.policy import Policy


def test_wall_clock_counters_are_reported_not_compared():
    """A busy machine: one call past its deadline answered by the fallback with the same
    decision (what made ./dev run fail in issue 40) is information, not a difference."""
    decided = {"jobs": 400, "mean_wait_s": 12.5, "utilisation": {"cpu": 0.5}}
    local = {**decided, "fallbacks": 0, "fallback_reasons": {}, "solver_status": {"ok": 9}}
    remote = {
        **decided,
        "fallbacks": 1,
        "fallback_reasons": {"deadline": 1},
        "solver_status": {"ok": 8, "deadline": 1},
        "dispatch_ms_p99": 470.0,
        "settings": {"service": "http://127.0.0.1:1"},
    }
    agreement = compare_summaries(local, remote)
    assert agreement.identical
    note = agreement.counters_note()
    assert note.startswith("dispatch_ms_p99 None vs 470.0, fallback_reasons {} vs")
    assert "fallbacks 0 vs 1" in note
    changed = compare_summaries(local, {**remote, "mean_wait_s": 13.0})
    assert changed.differing == ["mean_wait_s"]
    assert not changed.identical


def test_which_keys_the_wall_clock_decides():
    for key in ("fallbacks", "fallback_reasons", "solver_status", "model_size"):
        assert is_wall_clock(key)
    assert is_wall_clock("dispatch_ms_p50")
    assert is_wall_clock("replay_wall_s")
    for key in ("jobs", "mean_wait_s", "extensions", "killed_jobs", "dispatch_calls"):
        assert not is_wall_clock(key)


def test_replays_compare_job_by_job(small_trace, tmp_path):
    policy = Policy(dispatcher="easy", predictor="last-two")
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        run_replay(
            ReplaySettings(trace=small_trace, out=out, policy=policy, plots=False, timings=False)
        )
    assert compare_replays(*outs).identical

    summary = json.loads((outs[1] / "summary.json").read_text())
    summary["fallbacks"] += 1
    (outs[1] / "summary.json").write_text(json.dumps(summary))
    agreement = compare_replays(*outs)
    assert agreement.identical
    assert (
        agreement.counters_note()
        == f"fallbacks {summary['fallbacks'] - 1} vs {summary['fallbacks']}"
    )

    # One job started a second later: the summaries may not show it, the jobs do.
    jobs = pq.read_table(outs[1] / "jobs.parquet")
    start = jobs.column("start").to_pylist()
    start[5] += 1
    jobs = jobs.set_column(jobs.schema.get_field_index("start"), "start", [start])
    pq.write_table(jobs, outs[1] / "jobs.parquet")
    job = pc.take(jobs.column("job_id"), [5])[0].as_py()
    differing = compare_replays(*outs).differing
    assert differing == [f"jobs.start (first: job {job}, {start[5] - 1} vs {start[5]})"]
