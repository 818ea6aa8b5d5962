"""Rank run-time predictors by the schedule they make, not by their error alone.

    python bench/rank_predictors.py --out bench-out/rank [--traces kth,ctc] \\
        [--predictors last-two,quantile-boost,quantile-boost*2,quantile-boost^0.9] [--jobs N]

replays each trace with ``today`` (EASY on the users' requests), the default policy with
each predictor, and the default policy with the trace's real run times (``oracle``: what
perfect predictions would give), one replay at a time, and prints per trace the mean
bounded slowdown, p99 and max wait, and the share of the last-two → oracle gap in mean
bounded slowdown that each predictor closes:
``(bsld(last-two) − bsld(p)) / (bsld(last-two) − bsld(oracle))``. A run whose
``summary.json`` made with the same policy exists under ``--out`` is not run again (delete
its directory to; one kept from an earlier sitting with other settings, such as a
default changed since, is replayed again). Replays
of the default are deterministic (the CP search is limited by solver work), so what else
runs on the machine changes only the replay times. ``--jobs N`` replays each trace's first
N jobs (Curie's first 50,000 at most, as bench/value_over_today.py). ``NAME*K`` is the
predictor ``NAME`` with ``prediction_margin = K``, ``NAME^Q`` with
``prediction_upper_quantile = Q`` (both: ``NAME*K^Q``); ``NAME+trialS`` with trial runs of
``S`` seconds (``trial_run``, docs/trial-runs.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
from value_over_today import REPO, TRACE_FILES, TRACES, fmt, made_with

from cpsched.predictor.registry import PREDICTORS
from cpsched.replay.job_by_job import Waits
from cpsched.replay.runner import ReplaySettings, run_replay
from cpsched.runtime.policy import Policy

BASELINE = "last-two"
"""The default policy's predictor: the gap is measured from it."""


def policy_of(run: str) -> Policy:
    if run == "today":
        return Policy.named("today")
    run, _, trial = run.partition("+trial")
    run, _, upper = run.partition("^")
    name, _, margin = run.partition("*")
    return Policy.named(
        "default",
        predictor=name,
        prediction_margin=float(margin or 1),
        prediction_upper_quantile=float(upper or 0),
        trial_run=int(trial or 0),
    )


def replay(trace: str, run: str, out: Path, traces: Path, jobs: int | None) -> Path:
    """The directory of ``run``'s replay of ``trace``, replayed unless it is there."""
    target = out / trace / run
    began = time.perf_counter()
    if replay_unless_made(trace, policy_of(run), target, traces, jobs):
        print(f"  {trace} · {run}: {time.perf_counter() - began:.0f} s", flush=True)
    return target


def replay_unless_made(
    trace: str, policy: Policy, target: Path, traces: Path, jobs: int | None, skip: int = 0
) -> bool:
    """Replay ``policy`` on ``trace`` (its first ``jobs`` after ``skip``) into ``target``
    unless a replay made with it is there; whether it replayed."""
    if made_with(target, policy):
        return False
    settings = replay_settings(trace, target, policy, traces, jobs)
    run_replay(dataclasses.replace(settings, skip_jobs=skip))
    return True


def replay_settings(
    trace: str, target: Path, policy: Policy, traces: Path, jobs: int | None
) -> ReplaySettings:
    """``policy``'s replay of ``trace`` (its first ``jobs``) into ``target``, no plots."""
    file, system, most = TRACE_FILES[trace]
    return ReplaySettings(
        trace=traces / file,
        out=target,
        policy=policy,
        system=REPO / "systems" / system,
        jobs=min(jobs, most) if jobs and most else (jobs or most),
        plots=False,
        timings=False,
    )


def figures(where: Path) -> dict[str, float]:
    summary = json.loads((where / "summary.json").read_text())
    waits = Waits.read(where / "jobs.parquet").wait
    return {
        "bsld": float(summary["mean_bounded_slowdown"]),
        "p99": float(np.percentile(waits, 99)) if len(waits) else 0.0,
        "max": float(waits.max()) if len(waits) else 0.0,
    }


def gap_closed(bsld: float, baseline: float, oracle: float) -> float | None:
    """The share of the baseline → oracle gap closed (negative: worse than the baseline)."""
    return (baseline - bsld) / (baseline - oracle) if baseline > oracle else None


def table(trace: str, rows: dict[str, dict[str, float]]) -> str:
    today = rows["today"]
    head = "| run | mean bsld | p99 wait s | max wait s | vs today: bsld / p99 / max | gap closed |"
    lines = [f"### {trace}", "", head, "|---|---:|---:|---:|---|---:|"]
    for run, f in rows.items():
        ratios = " / ".join(f"{f[k] / today[k]:.2f}" if today[k] else "–" for k in f)
        closed = None
        if run not in ("today", "oracle") and BASELINE in rows and "oracle" in rows:
            closed = gap_closed(f["bsld"], rows[BASELINE]["bsld"], rows["oracle"]["bsld"])
        shown = "–" if closed is None else f"{closed * 100:+.0f}%"
        lines.append(
            f"| {run} | {fmt(f['bsld'])} | {fmt(f['p99'])} | {fmt(f['max'])} | {ratios} | {shown} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--traces", default=",".join(TRACE_FILES))
    parser.add_argument(
        "--predictors", default="last-two,profile,adaboost,quantile-boost,quantile-boost^0.9"
    )
    parser.add_argument("--jobs", type=int, default=None, help="each trace's first N jobs")
    parser.add_argument("--trace-dir", type=Path, default=TRACES)
    args = parser.parse_args()
    traces = [t for t in args.traces.split(",") if t]
    predictors = [p for p in args.predictors.split(",") if p and p != "oracle"]
    unknown = [t for t in traces if t not in TRACE_FILES]
    unknown += [p for p in predictors if p.partition("^")[0].partition("*")[0] not in PREDICTORS]
    if unknown:
        raise SystemExit(f"unknown trace or predictor: {', '.join(unknown)}")
    if BASELINE not in predictors:
        predictors.insert(0, BASELINE)
    for trace in traces:
        rows = {
            run: figures(replay(trace, run, args.out, args.trace_dir, args.jobs))
            for run in ("today", *predictors, "oracle")
        }
        print(table(trace, rows), flush=True)


if __name__ == "__main__":
    main()
