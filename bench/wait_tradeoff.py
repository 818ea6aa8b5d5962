"""What a wait bound trades: the mean bounded slowdown against the longest waits, as a curve.

    python bench/wait_tradeoff.py --out bench-out/tradeoff --trace kth \\
        [--runs unbounded,1h,3h,6h,12h,1d,6h+today3h] [--jobs N] [--skip-jobs K] \\
        [--parallel 2] [--plot docs/img/wait-tradeoff-kth.png]

The wait-bound targets (docs/wait-bound.md) ask for the mean gain and a tail no worse than
today's at once; where no setting gives both, what a site can choose between is the curve
the settings trace.
Each run is ``today``, ``default``, ``unbounded`` (the default without a bound), or the
default with a bound written ``AFTER[/DEPTH][+todayW][+qQ][+trialS]``: a guarantee once a job has
waited ``AFTER`` (``3h``, ``1d``, ``90m``; ``unbounded`` for none), at most ``DEPTH``
held at once (the default's 1 unless given), ``+todayW`` a job owed today's reservation
and start after waiting ``W`` (``wait_bound_today``), ``+qQ`` the overdue quantile
(``wait_overdue_quantile``), ``+trialS`` trial runs of ``S`` (``trial_run``,
docs/trial-runs.md). Every run replays the same jobs (the trace's first
``--jobs`` after ``--skip-jobs``), ``--parallel`` at a time (replays are deterministic:
the load changes only their times); a run whose ``summary.json`` exists under ``--out``
with the same policy is not replayed again.

Prints per run the mean bounded slowdown, p99 and max wait, long-job (> 5 h) mean wait
(p99 and max of the jobs after the warm-up), their ratios to ``today``, which of the
targets (≤ 0.75 / ≤ 1 / ≤ 1.25 / ≤ 1) the run meets, and the replay's CPU seconds; with
``--plot``, the runs as points of max wait and p99 wait against mean bounded slowdown,
both as ratios to today's, the target region shaded.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rank_predictors import figures as bsld_p99_max
from rank_predictors import replay_unless_made
from value_over_today import TRACE_FILES, TRACES, fmt

from cpsched.replay.plots import save_png
from cpsched.runtime.policy import Policy

TARGETS = {"bsld": 0.75, "p99": 1.0, "max": 1.25, "long": 1.0}
"""The wait-bound targets (docs/wait-bound.md), each a ratio to today's: the most a run
may have."""
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
BOUND = re.compile(r"^(?P<after>unbounded|\d+[smhd])(?:/(?P<depth>\d+))?$")


def seconds(text: str) -> int:
    """``90m``, ``3h``, ``1d``: in seconds."""
    found = re.fullmatch(r"(\d+)([smhd])", text)
    if found is None:
        raise ValueError(f"{text!r}: a duration is a number and s, m, h or d (3h, 90m, 1d)")
    return int(found[1]) * UNITS[found[2]]


def policy_of(run: str) -> Policy:
    """The policy a run's name stands for (see the module's docstring)."""
    if run in ("today", "default", "unbounded"):
        return Policy.named(run)
    first, *extras = run.split("+")
    bound = BOUND.match(first)
    if bound is None:
        raise ValueError(f"{run!r}: a run is today, default, unbounded or AFTER[/DEPTH][+...]")
    changes: dict[str, Any] = {}
    if bound["after"] == "unbounded":
        changes.update(wait_bound=0, wait_bound_depth=0)
    else:
        changes["wait_bound"] = seconds(bound["after"])
    if bound["depth"] is not None:
        changes["wait_bound_depth"] = int(bound["depth"])
    for extra in extras:
        if extra.startswith("today"):
            changes["wait_bound_today"] = seconds(extra.removeprefix("today"))
        elif extra.startswith("q"):
            changes["wait_overdue_quantile"] = float(extra.removeprefix("q"))
        elif extra.startswith("trial"):
            changes["trial_run"] = seconds(extra.removeprefix("trial"))
        else:
            raise ValueError(f"{run!r}: after + comes todayW, qQ or trialS, not {extra!r}")
    return Policy.named("default", **changes)


def replay(trace: str, run: str, where: Path, traces: Path, jobs: int | None, skip: int) -> Path:
    """The directory of ``run``'s replay, replayed unless it is there already."""
    began, cpu = time.perf_counter(), time.process_time()
    if replay_unless_made(trace, policy_of(run), where, traces, jobs, skip):
        used = time.process_time() - cpu
        (where / "cpu.json").write_text(json.dumps({"cpu_s": used}))
        took = time.perf_counter() - began
        print(f"  {trace} · {run}: {took:.0f} s, {used:.0f} s CPU", flush=True)
    return where


def figures(where: Path) -> dict[str, float]:
    """Mean bounded slowdown, p99 and max wait (rank_predictors'), long-job mean wait."""
    summary = json.loads((where / "summary.json").read_text())
    long_wait = summary["by_length_class"]["long"]["mean_wait_s"]
    return {**bsld_p99_max(where), "long": float(long_wait or 0.0)}


def cpu_seconds(where: Path) -> float | None:
    try:
        return float(json.loads((where / "cpu.json").read_text())["cpu_s"])
    except (OSError, ValueError, KeyError):
        return None


def ratios(figs: dict[str, float], today: dict[str, float]) -> dict[str, float]:
    return {key: figs[key] / today[key] if today[key] else float("nan") for key in TARGETS}


def table(label: str, figs: dict[str, dict[str, float]], cpu: dict[str, float | None]) -> str:
    today = figs["today"]
    lines = [
        f"### {label}",
        "",
        "| run | mean bsld | p99 wait s | max wait s | long-job wait s "
        "| vs today: bsld / p99 / max / long | targets met | CPU s |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for run, f in figs.items():
        r = ratios(f, today)
        met = "–" if run == "today" else f"{sum(r[k] <= TARGETS[k] for k in TARGETS)} of 4"
        shown = " / ".join(f"{r[key]:.2f}" for key in TARGETS)
        lines.append(
            f"| {run} | {fmt(f['bsld'])} | {fmt(f['p99'])} | {fmt(f['max'])} | "
            f"{fmt(f['long'])} | {shown} | {met} | {fmt(cpu[run])} |"
        )
    return "\n".join(lines) + "\n"


def trigger_line(runs: list[str]) -> list[str]:
    """The runs that differ only in when a guarantee is given (``AFTER`` alone, depth 1,
    no bound last), in that order: the curve the trigger traces."""
    plain = [run for run in runs if run == "unbounded" or re.fullmatch(r"\d+[smhd]", run)]
    return sorted(plain, key=lambda run: policy_of(run).wait_bound or float("inf"))


def plot(label: str, figs: dict[str, dict[str, float]], path: Path) -> Path:
    """Max and p99 wait against mean bounded slowdown, each as a ratio to today's: each
    run a numbered point (the key beside), the plain triggers joined into a line."""
    from matplotlib.figure import Figure

    today = figs["today"]
    points = {run: ratios(f, today) for run, f in figs.items()}
    default = [run for run in figs if run != "today" and policy_of(run) == Policy.named("default")]
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    axes = fig.subplots(1, 3, width_ratios=(4, 4, 1.6))
    panels = (("max", "longest wait"), ("p99", "99th percentile of the wait"))
    for ax, (key, title) in zip(axes, panels, strict=False):
        ax.fill_between([0, TARGETS["bsld"]], 0, TARGETS[key], color="tab:green", alpha=0.12,
                        label="the targets")  # fmt: skip
        line = trigger_line(list(figs))
        ax.plot([points[r]["bsld"] for r in line], [points[r][key] for r in line],
                color="tab:blue", lw=0.8, alpha=0.6, label="trigger alone")  # fmt: skip
        for number, (run, r) in enumerate(points.items()):
            colour = "black" if run == "today" else "tab:orange" if run in default else "tab:blue"
            ax.scatter(r["bsld"], r[key], color=colour, s=22, zorder=3)
            ax.annotate(str(number), (r["bsld"], r[key]), textcoords="offset points",
                        xytext=(3, 3), fontsize=8)  # fmt: skip
        xs = [r["bsld"] for r in points.values()]
        ys = [r[key] for r in points.values()]
        ax.set(
            xlim=(min(0.3, min(xs) - 0.05), max(1.05, max(xs) + 0.05)),
            ylim=(min(0.8, min(ys) - 0.05), max(1.4, max(ys) + 0.1)),
            xlabel="mean bounded slowdown / today's (lower is better)",
            ylabel=f"{title} / today's",
            title=f"{label}: {title}",
        )
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    key_ax = axes[2]
    key_ax.axis("off")
    names = [f"{n}  {run}{' (default)' if run in default else ''}" for n, run in enumerate(points)]
    key_ax.text(0, 1, "\n".join(names), va="top", fontsize=8, family="monospace")
    return save_png(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trace", default="kth", choices=sorted(TRACE_FILES))
    parser.add_argument("--runs", default="unbounded,1h,3h,6h,12h,1d,6h+today3h")
    parser.add_argument("--jobs", type=int, default=None, help="the trace's first N jobs")
    parser.add_argument("--skip-jobs", type=int, default=0, help="after leaving out K")
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--plot", type=Path, default=None, help="a PNG of the curve")
    parser.add_argument("--trace-dir", type=Path, default=TRACES)
    args = parser.parse_args()
    runs = ["today", *(r for r in args.runs.split(",") if r and r != "today")]
    try:
        for run in runs:
            policy_of(run)  # a wrong name fails here, before any replay
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    jobs = args.jobs or TRACE_FILES[args.trace][2]  # Curie's first 50,000 unless told
    slice_ = f"{args.skip_jobs + 1}-{args.skip_jobs + jobs}" if jobs else "whole"
    base = args.out / f"{args.trace}-{slice_}"
    with ProcessPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        futures = {
            run: pool.submit(
                replay, args.trace, run, base / run, args.trace_dir, args.jobs, args.skip_jobs
            )
            for run in runs
        }
        found = {run: future.result() for run, future in futures.items()}
    figs = {run: figures(where) for run, where in found.items()}
    label = f"{args.trace}, jobs {slice_}" if jobs else f"{args.trace}, whole trace"
    print(table(label, figs, {run: cpu_seconds(where) for run, where in found.items()}))
    if args.plot is not None:
        print(f"→ {plot(label, figs, args.plot)}")


if __name__ == "__main__":
    main()
