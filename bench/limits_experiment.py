"""The COARE-style experiment: tight (predicted) limits with and without correction.

    python bench/limits_experiment.py TRACE [--predictor last-two] [--jobs N] [--system F]

Replays TRACE with EASY under ``--limits requested`` and under ``--limits predicted`` with
correction off, simple and power (in parallel processes), and prints killed jobs, mean
wait and mean bounded slowdown side by side, each with its ratio to the requested-limit
run.

Measured (full HPC2N, header machine 240 × 1 cpu, EASY with the replay's default
first-fit allocator, ``--predictor adaboost`` with its defaults; 27 min of wall time and
2,253 s of CPU for the four runs, two at a time):

| run | killed jobs | extensions | mean wait s | mean bounded slowdown |
|---|---:|---:|---:|---:|
| requested | 0 | 0 | 10,680 | 100.5 |
| predicted, off | 197,462 | 0 | 0 | 1.0 |
| predicted, simple | 0 | 514,611 | 10,722 (×1.004) | 99.0 (×0.986) |
| predicted, power | 0 | 294,182 | 10,748 (×1.006) | 97.4 (×0.970) |

Without correction nearly every job is killed (97% of the 202,871): a job is killed
at its prediction, so an on-line predictor never sees a run longer than what it
predicted (a killed job's run time is censored and not shown to it; showing the
censored time instead gave the same 97% on the first 20,000 jobs with last-two, since
that time is the prediction itself). Its predictions can only drift down. The
replay's last-two under-rate was 0.97 there, against about 0.5 in ``predict-eval``. With
correction nobody is killed, and mean bounded slowdown drops 1.4% (simple) and 3.0%
(power) for a wait within 1% of the requested-limit run. The COARE study's much larger
gains came from its own trace and an off-line model.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from cpsched.replay.metrics import summarise
from cpsched.replay.runner import ReplaySettings, simulate
from cpsched.runtime.policy import NO_WAIT_BOUND, Policy

RUNS = {
    "requested": {"limits": "requested", "correction": "off"},
    "predicted, off": {"limits": "predicted", "correction": "off"},
    "predicted, simple": {"limits": "predicted", "correction": "simple"},
    "predicted, power": {"limits": "predicted", "correction": "power"},
}
KEYS = ("killed_jobs", "extensions", "mean_wait_s", "mean_bounded_slowdown")


def run(settings: ReplaySettings) -> dict[str, object]:
    return summarise(simulate(settings))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace", type=Path)
    parser.add_argument("--predictor", default="last-two")
    parser.add_argument("--dispatcher", default="easy")
    parser.add_argument("--system", type=Path)
    parser.add_argument("--jobs", type=int)
    args = parser.parse_args()
    base = ReplaySettings(
        trace=args.trace,
        out=Path("unused"),
        system=args.system,
        policy=Policy.parse(
            {"dispatcher": args.dispatcher, "predictor": args.predictor, **NO_WAIT_BOUND}
        ),
        jobs=args.jobs,
    )
    runs = [replace(base, policy=base.policy.but(**options)) for options in RUNS.values()]
    with ProcessPoolExecutor(max_workers=2) as pool:
        summaries = dict(zip(RUNS, pool.map(run, runs), strict=True))
    reference = summaries["requested"]
    print(f"{args.trace.name}: {args.dispatcher} with {args.predictor} predictions")
    print("| run | " + " | ".join(KEYS) + " |")
    print("|---|" + "---:|" * len(KEYS))
    for name, summary in summaries.items():
        cells = []
        for key in KEYS:
            value, ref = summary[key], reference[key]
            ratio = f" (×{value / ref:.3f})" if isinstance(value, float) and ref else ""
            cells.append(f"{value:.1f}{ratio}" if isinstance(value, float) else f"{value}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
