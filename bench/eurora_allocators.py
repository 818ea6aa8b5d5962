"""Allocators on Eurora-like months: EASY and SJF with each allocator (issue 7).

    nice -n 19 python bench/eurora_allocators.py [--jobs 40000] [--seeds 1,2,3,4,5]
        [--schedulers easy,sjf] [--allocators first-fit,...] [--predictor wall-time]
        [--out out/eurora_allocators]

For each seed: generate a month with the built-in Eurora-like profile (as ``cpsched
generate`` does), replay it on ``systems/eurora.toml`` once per scheduler and
allocator. One generated month is one draw of a very variable process (a single heavy
user's long GPU family can make a month ten times more congested than the next), so
allocators are compared *within* each month, as ratios to first-fit under the same
scheduler, and the ratios are summarised over the months by their geometric mean.

Writes under ``--out``: ``results.csv`` (every replay), ``results.md`` (the tables) and
``allocators.png`` (ratios to first-fit, one dot per month). Statistics leave out the
first 1% of jobs (warm-up), as every replay does.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from cpsched.core.allocators import ALLOCATORS
from cpsched.replay.generate import GeneratedJob, generate_jobs, write_trace
from cpsched.replay.generate_params import WorkloadParams
from cpsched.replay.metrics import job_metrics, summarise, warmup_count
from cpsched.replay.results import ReplayResult
from cpsched.replay.runner import ReplaySettings, simulate
from cpsched.replay.system import load_system
from cpsched.runtime.policy import NO_WAIT_BOUND, Policy

REPO = Path(__file__).resolve().parents[1]
SYSTEM = REPO / "systems" / "eurora.toml"
METRICS = (
    ("mean_slowdown", "mean slowdown"),
    ("mean_wait_s", "mean wait s"),
    ("mean_queue_length", "mean queue length"),
    ("mean_allocation_efficiency", "mean alloc. efficiency"),
)
CLASSES = ("gpu", "cpu", "mic")


def class_slowdowns(result: ReplayResult, classes: dict[str, str]) -> dict[str, float]:
    """Mean slowdown per job class (after warm-up), from the per-job records."""
    jobs = result.jobs
    skip = warmup_count(len(jobs), 0.01)
    slowdown = job_metrics(jobs).slowdown[skip:]
    names = np.array([classes[str(i)] for i in jobs.job_id[skip:]])
    return {
        f"{name}_mean_slowdown": float(slowdown[names == name].mean())
        for name in CLASSES
        if (names == name).any()
    }


def replay_month(
    seed: int, jobs: int, schedulers: list[str], allocators: list[str], predictor: str, out: Path
) -> list[dict[str, object]]:
    system = load_system(SYSTEM)
    params = WorkloadParams()
    made: list[GeneratedJob] = generate_jobs(params, system, jobs, seed)
    trace = out / f"eurora-{jobs}-s{seed}.swf"
    write_trace(trace, made, params, system, seed)
    classes = {str(j.number): j.job_class for j in made}
    days = (made[-1].submit - made[0].submit) / 86400
    print(f"seed {seed}: {len(made)} jobs over {days:.1f} days → {trace}", flush=True)
    rows: list[dict[str, object]] = []
    for scheduler in schedulers:
        for allocator in allocators:
            began = time.perf_counter()
            settings = ReplaySettings(
                trace=trace,
                out=out,
                system=SYSTEM,
                policy=Policy.parse(
                    {
                        "dispatcher": scheduler,
                        "allocator": allocator,
                        "predictor": predictor,
                        **NO_WAIT_BOUND,  # the allocators compared as measured, unbounded
                    }
                ),
                plots=False,
            )
            result = simulate(settings)
            summary = summarise(result)
            row: dict[str, object] = {"seed": seed, "scheduler": scheduler, "allocator": allocator}
            row.update({key: summary[key] for key, _ in METRICS})
            row.update(class_slowdowns(result, classes))
            row["utilisation_gpu"] = summary["utilisation"]["gpu"]  # type: ignore[index]
            row["seconds"] = round(time.perf_counter() - began, 1)
            rows.append(row)
            print("  " + ", ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return rows


def value(rows: list[dict[str, object]], key: str, **match: object) -> float:
    (row,) = [r for r in rows if all(r[k] == v for k, v in match.items())]
    return float(row[key])  # type: ignore[arg-type]


def ratio(rows: list[dict[str, object]], key: str, seed: int, scheduler: str, alloc: str) -> float:
    base = value(rows, key, seed=seed, scheduler=scheduler, allocator="first-fit")
    return value(rows, key, seed=seed, scheduler=scheduler, allocator=alloc) / base


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def tables(
    rows: list[dict[str, object]],
    seeds: list[int],
    schedulers: list[str],
    allocators: list[str],
    header: str,
) -> str:
    lines = [header, ""]
    lines += [
        "Mean over the months (arithmetic) of each replay's figure:",
        "",
        "| scheduler | allocator | " + " | ".join(label for _, label in METRICS) + " | "
        "GPU jobs slowdown | CPU-only slowdown | MIC jobs slowdown |",
        "|---|---|" + "---:|" * (len(METRICS) + 3),
    ]
    for scheduler in schedulers:
        for alloc in allocators:
            cells = []
            for key in [k for k, _ in METRICS] + [f"{c}_mean_slowdown" for c in CLASSES]:
                mean = sum(
                    value(rows, key, seed=s, scheduler=scheduler, allocator=alloc) for s in seeds
                )
                mean /= len(seeds)
                cells.append(f"{mean:.3f}" if "efficiency" in key else f"{mean:.1f}")
            lines.append(f"| {scheduler.upper()} | {alloc} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Ratio to first-fit under the same scheduler, geometric mean over the months "
        "(below 1: better than first-fit; range over the months in brackets):",
        "",
        "| scheduler | allocator | " + " | ".join(label for _, label in METRICS) + " |",
        "|---|---|" + "---:|" * len(METRICS),
    ]
    for scheduler in schedulers:
        for alloc in allocators:
            cells = []
            for key, _ in METRICS:
                ratios = [ratio(rows, key, s, scheduler, alloc) for s in seeds]
                cells.append(f"{geometric_mean(ratios):.3f} [{min(ratios):.2f}–{max(ratios):.2f}]")
            lines.append(f"| {scheduler.upper()} | {alloc} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Mean slowdown per month:",
        "",
        "| scheduler | allocator | " + " | ".join(f"seed {s}" for s in seeds) + " |",
        "|---|---|" + "---:|" * len(seeds),
    ]
    for scheduler in schedulers:
        for alloc in allocators:
            cells = [
                f"{value(rows, 'mean_slowdown', seed=s, scheduler=scheduler, allocator=alloc):.1f}"
                for s in seeds
            ]
            lines.append(f"| {scheduler.upper()} | {alloc} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(
    rows: list[dict[str, object]],
    seeds: list[int],
    schedulers: list[str],
    allocators: list[str],
    out: Path,
) -> None:
    fig = Figure(figsize=(4.4 * len(METRICS), 4.4))
    axes = fig.subplots(1, len(METRICS))
    width = 0.8 / len(schedulers)
    x = np.arange(len(allocators))
    for ax, (key, label) in zip(axes, METRICS, strict=True):
        for i, scheduler in enumerate(schedulers):
            offset = x + (i - (len(schedulers) - 1) / 2) * width
            per_seed = [[ratio(rows, key, s, scheduler, a) for s in seeds] for a in allocators]
            ax.bar(offset, [geometric_mean(r) for r in per_seed], width, label=scheduler.upper())
            for xi, ratios in zip(offset, per_seed, strict=True):
                ax.plot([xi] * len(ratios), ratios, "k.", markersize=3)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_title(f"{label} / first-fit")
        ax.set_xticks(x, allocators, rotation=35, ha="right")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend()
    fig.suptitle(
        f"Eurora-like months ({len(seeds)} seeds): allocators under EASY and SJF, "
        "geometric mean of the ratio to first-fit (dots: single months)"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=40000)
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--schedulers", default="easy,sjf")
    parser.add_argument("--allocators", default=",".join(ALLOCATORS))
    parser.add_argument("--predictor", default="wall-time")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "eurora_allocators")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    schedulers = args.schedulers.split(",")
    allocators = args.allocators.split(",")
    if "first-fit" not in allocators:
        allocators.insert(0, "first-fit")  # the reference of every ratio
    args.out.mkdir(parents=True, exist_ok=True)

    rows: list[dict[str, object]] = []
    for seed in seeds:
        rows += replay_month(seed, args.jobs, schedulers, allocators, args.predictor, args.out)

    keys = list(rows[0])
    for row in rows:
        keys += [k for k in row if k not in keys]
    with (args.out / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    header = (
        f"Eurora-like workload: {len(seeds)} generated months of {args.jobs} jobs "
        f"(seeds {', '.join(map(str, seeds))}), systems/eurora.toml, predictor "
        f"{args.predictor}; the first 1% of each month's jobs left out."
    )
    text = tables(rows, seeds, schedulers, allocators, header)
    (args.out / "results.md").write_text(text, encoding="utf-8")
    plot(rows, seeds, schedulers, allocators, args.out / "allocators.png")
    print(text)
    print(f"→ {args.out / 'results.md'}, {args.out / 'allocators.png'}")


if __name__ == "__main__":
    main()
