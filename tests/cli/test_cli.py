"""The ``cpsched`` command as a user runs it: a real process, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REQUIRED_KEYS = {
    "jobs",
    "mean_wait_s",
    "median_wait_s",
    "max_wait_s",
    "mean_slowdown",
    "mean_bounded_slowdown",
    "killed_jobs",
    "dispatch_calls",
    "dispatch_ms_p50",
    "dispatch_ms_p99",
    "dispatch_ms_max",
    "fallbacks",
    "utilisation",
    "makespan_s",
}


def cpsched(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from cpsched.cli import main; main()", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "250"},  # error boxes on one line each
    )


def test_replay_writes_every_output(small_trace, tmp_path):
    out = tmp_path / "out"
    done = cpsched("replay", small_trace, "--out", out, "--dispatcher", "easy", "--validate")
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary.keys() >= REQUIRED_KEYS
    assert summary["jobs"] == 40  # 42 lines: one malformed, one larger than the machine
    assert summary["settings"]["cleaning"]["counts"]["malformed"] == 1
    assert summary["settings"]["cleaning"]["counts"]["exceeds_machine"] == 1
    for name in ("jobs.parquet", "jobs.csv", "dispatch.parquet", "wait_distribution.png"):
        assert (out / name).stat().st_size > 0


BROKEN_LINE = "small.swf: 1 malformed line left out (line 44: field 3 ('this') is not a number)"


def test_replay_and_compare_report_malformed_lines_on_stderr(small_trace, tmp_path):
    for command in ("replay", "compare"):
        done = cpsched(command, small_trace, "--out", tmp_path / command, "--no-plots")
        assert done.returncode == 0, done.stderr
        (warning,) = [x for x in done.stderr.splitlines() if x.startswith("warning:")]
        assert warning == f"warning: {BROKEN_LINE}; --strict stops at the first instead"
    summary = json.loads((tmp_path / "replay" / "summary.json").read_text())
    assert summary["settings"]["cleaning"]["malformed_lines"] == [
        {"line": 44, "problem": "field 3 ('this') is not a number"}
    ]


@pytest.mark.parametrize("command", ["replay", "compare"])
def test_strict_stops_at_the_first_malformed_line(small_trace, tmp_path, command):
    done = cpsched(command, small_trace, "--out", tmp_path / "out", "--no-plots", "--strict")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {small_trace}:44: field 3 ('this') is not a number (without --strict, "
        "malformed lines are left out and counted)"
    ]


@pytest.mark.parametrize(
    "policy",
    # A heuristic; the default's CP search limited by solver work, with a deadline that is
    # never reached (the default 0.2 s is wall-clock time: its fallbacks vary).
    [["--policy", "today"], ["--cp-deterministic", "--deadline", "60"]],
)
def test_the_same_replay_twice_gives_the_same_summary_bytes(small_trace, tmp_path, policy):
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        done = cpsched("replay", small_trace, "--out", out, "--no-timings", "--no-plots", *policy)
        assert done.returncode == 0, done.stderr
    a, b = ((out / "summary.json").read_bytes() for out in outs)
    assert a == b
    assert "dispatch_ms_p50" in json.loads((outs[0] / "timings.json").read_text())


def test_compare_shows_today_easy_plus_plus_default_and_the_oracle_by_default(
    small_trace, tmp_path
):
    out = tmp_path / "cmp"
    done = cpsched("compare", small_trace, "--out", out, "--no-plots")
    assert done.returncode == 0, done.stderr
    table = (out / "comparison.md").read_text()
    for name in ("today", "easy++", "default", "oracle"):
        assert f"| {name} |" in table
        assert (out / name / "summary.json").exists()
    assert "ratios are to today" in table
    header = (out / "comparison.csv").read_text().splitlines()[0]
    assert "mean_bounded_slowdown_ratio" in header
    easy_plus_plus = json.loads((out / "easy++" / "summary.json").read_text())
    assert easy_plus_plus["settings"]["policy"]["predictor"] == "last-two"
    assert easy_plus_plus["settings"]["policy"]["backfill_order"] == "shortest"
    # A verdict sentence per run first, then the tables.
    first = table.splitlines()[0]
    assert first.startswith("* easy++: mean bounded slowdown") and "start earlier" in first
    # The terminal: the verdicts, then a table in words that fits 100 columns, then
    # what each run is.
    assert done.stdout.startswith("• easy++: mean bounded slowdown")
    assert max(len(line) for line in done.stdout.splitlines()) <= 100
    assert "long-job wait" in done.stdout and "decision p99" in done.stdout  # not cut at 80
    for heading in ("mean bsld", "max wait", "long-job wait", "decision p99"):
        assert heading in done.stdout
    assert "default: HCP3 (constraint programming) on the users' last two run times" in done.stdout
    assert "mean_bounded_slowdown" not in done.stdout
    # Job by job against today: every other run, its shares adding up to all jobs.
    assert "Job by job against today" in table
    by_job = json.loads((out / "job_by_job.json").read_text())
    assert set(by_job) == {"easy++", "default", "oracle"}
    for run in by_job.values():
        assert run["earlier"] + run["same"] + run["later"] == pytest.approx(1)


def test_compare_runs_dispatchers_on_the_given_policy_and_adds_today(small_trace, tmp_path):
    out = tmp_path / "cmp"
    done = cpsched(
        "compare",
        small_trace,
        "--out",
        out,
        "--policies",
        "fcfs,sjf",
        "--policy",
        "easy++",
        "--no-plots",
    )
    assert done.returncode == 0, done.stderr
    for name in ("fcfs", "sjf", "today"):  # today joins as the baseline
        assert (out / name / "summary.json").exists()
    sjf = json.loads((out / "sjf" / "summary.json").read_text())["settings"]["policy"]
    assert (sjf["dispatcher"], sjf["predictor"]) == ("sjf", "last-two")
    today = json.loads((out / "today" / "summary.json").read_text())["settings"]["policy"]
    assert (today["dispatcher"], today["predictor"]) == ("easy", "wall-time")


def test_replay_starts_from_a_named_policy_and_options_override_it(small_trace, tmp_path):
    out = tmp_path / "r"
    done = cpsched(
        "replay",
        small_trace,
        "--out",
        out,
        "--policy",
        "easy++",
        "--overrun",
        "ladder",
        "--no-plots",
    )
    assert done.returncode == 0, done.stderr
    policy = json.loads((out / "summary.json").read_text())["settings"]["policy"]
    assert (policy["predictor"], policy["overrun"]) == ("last-two", "ladder")
    done = cpsched("replay", small_trace, "--out", tmp_path / "x", "--policy", "tomorrow")
    assert done.returncode == 2
    assert "unknown policy 'tomorrow': choose one of today, conservative, easy++" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--dispatcher", "lottery"],
            "'lottery' is not one of 'fcfs', 'sjf', 'ljf', 'easy', 'hcp3', 'pcp3', 'pcp20'",
        ),
        (["--allocator", "worst-fit"], "choose one of: balanced, best-fit, first-fit"),
        (["--predictor", "crystal-ball"], "'crystal-ball' is not one of 'wall-time', 'last-two'"),
    ],
)
def test_a_wrong_policy_name_is_a_clear_error(small_trace, tmp_path, args, message):
    done = cpsched("replay", small_trace, "--out", tmp_path / "o", *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_header_without_the_machine_asks_for_a_system_file(tmp_path):
    trace = tmp_path / "bare.swf"
    trace.write_text("1 0 -1 10 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n")
    done = cpsched("replay", trace, "--out", tmp_path / "o")
    assert done.returncode == 2
    assert "--system" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_system_file_replaces_the_header(small_trace, tmp_path):
    system = tmp_path / "tiny.toml"
    system.write_text('name = "tiny"\n[[nodes]]\ngroup = "t"\ncount = 2\ncpu = 4\n')
    out = tmp_path / "o"
    done = cpsched("replay", small_trace, "--out", out, "--system", system, "--no-plots")
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["nodes"] == 2


def test_a_missing_trace_is_refused_without_a_traceback(tmp_path):
    done = cpsched("replay", tmp_path / "nope.swf", "--out", tmp_path / "o")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_every_policy_setting_is_an_option_of_replay_and_http_check():
    from cpsched.runtime.policy import Policy

    for command in ("replay", "http-check"):
        done = cpsched(command, "--help")
        assert done.returncode == 0, done.stderr
        for field in Policy.model_fields:
            assert f"--{field.replace('_', '-')}" in done.stdout, (command, field)


@pytest.mark.parametrize("command", ["replay", "compare", "predict-eval"])
def test_an_out_that_cannot_be_a_directory_is_one_line_before_any_work(
    small_trace, tmp_path, command
):
    taken = tmp_path / "taken"
    taken.write_text("not a directory")
    for out, message in [(taken, "is a file"), (taken / "sub", "cannot be written")]:
        done = cpsched(command, small_trace, "--out", out)
        assert done.returncode == 2
        assert message in done.stderr
        assert "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_system_file_declaring_too_many_nodes_is_refused_not_built(small_trace, tmp_path):
    system = tmp_path / "huge.toml"
    system.write_text('name = "huge"\n[[nodes]]\ngroup = "t"\ncount = 100000000\ncpu = 4\n')
    done = cpsched("replay", small_trace, "--out", tmp_path / "o", "--system", system)
    assert done.returncode == 2
    assert "100,000,000 nodes" in done.stderr
    assert "Traceback" not in done.stderr
