"""The COARE-style experiment: tight (predicted) limits with and without correction.

    python bench/limits_experiment.py TRACE [--predictor last-two] [--jobs N] [--system F]

Replays TRACE with EASY under ``--limits requested`` and under ``--limits predicted`` with
correction off, simple and power (in parallel processes), and prints killed jobs, mean
wait and mean bounded slowdown side by side, each with its ratio to the requested-limit
run.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from replay.metrics import summarise
from replay.runner import ReplaySettings, simulate

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
        dispatcher=args.dispatcher,
        predictor=args.predictor,
        jobs=args.jobs,
    )
    runs = [replace(base, **options) for options in RUNS.values()]  # type: ignore[arg-type]
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
