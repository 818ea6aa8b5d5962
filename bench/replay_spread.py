"""How far a replay's figures move when the trace or the predictions barely change, and
whether a setting beats another beyond that.

    python bench/replay_spread.py --out bench-out/spread --trace kth \\
        --runs last-two,short-jobs[,last-two*1.01,short-jobs*1.01] [--skips 0,1,2,3] \\
        [--jobs N] [--parallel 2]

A replay of the default is deterministic, but not stable: its CP searches are cut by
solver work, so a small change can send them another way and move a whole trace's mean
bounded slowdown by several percent (docs/results/predictors.md, "Short jobs told
apart"). One replay per setting cannot tell a gain of that size from chance. This
replays each run (a predictor name as in bench/rank_predictors.py: ``NAME``, ``NAME*K``
for a margin ``K`` such as 1.01, ``NAME^Q``, or ``today``) on the trace with its first
0, 1, 2, ... jobs left out (``--skips``: the same jobs but a few, started on an empty
machine; a learned predictor's refits then fall on other jobs), and prints per run the
mean bounded slowdown, p99 and max wait of each replay, and per run after the first its
difference in mean bounded slowdown from the first run on the same jobs, with how many
of the replays it is lower in. Leaving out the first jobs may change little where they
are in the warm-up and the machine is idle then (KTH: last-two's mean moved by 0.15%);
``NAME*1.01`` and ``NAME*0.99`` (every prediction 1% longer or shorter) perturb the
searches themselves. ``--parallel`` replays run at once (replays are deterministic: the
load changes only their times). A replay whose ``summary.json`` exists under ``--out``
with the same policy is not replayed again.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rank_predictors import figures, policy_of, replay_unless_made
from value_over_today import TRACE_FILES, TRACES, fmt


def replay_skipping(
    trace: str, run: str, skip: int, out: Path, traces: Path, jobs: int | None
) -> Path:
    """The directory of ``run``'s replay of ``trace`` without its first ``skip`` jobs."""
    target = out / trace / run / f"skip-{skip}"
    began = time.perf_counter()
    if replay_unless_made(trace, policy_of(run), target, traces, jobs, skip):
        print(f"  {trace} · {run} · skip {skip}: {time.perf_counter() - began:.0f} s", flush=True)
    return target


def report(
    trace: str, runs: list[str], skips: list[int], found: dict[tuple[str, int], Path]
) -> str:
    figs = {key: figures(where) for key, where in found.items()}
    head = " | ".join(f"skip {s}" for s in skips)
    lines = [f"### {trace}: mean bsld (p99 / max wait s)", "", f"| run | {head} |"]
    lines.append("|---|" + "---:|" * len(skips))
    for run in runs:
        cells = [
            f"{fmt(figs[run, s]['bsld'])} ({fmt(figs[run, s]['p99'])} / {fmt(figs[run, s]['max'])})"
            for s in skips
        ]
        lines.append(f"| {run} | {' | '.join(cells)} |")
    first = runs[0]
    for run in runs[1:]:
        diffs = [figs[run, s]["bsld"] - figs[first, s]["bsld"] for s in skips]
        lower = sum(d < 0 for d in diffs)
        lines.append(
            f"\n{run} − {first}: {', '.join(f'{d:+.2f}' for d in diffs)} "
            f"(median {statistics.median(diffs):+.2f}; lower in {lower} of {len(diffs)})"
        )
    spread = [figs[first, s]["bsld"] for s in skips]
    lines.append(
        f"\n{first} alone: {min(spread):.2f} to {max(spread):.2f} "
        f"({(max(spread) - min(spread)) / statistics.median(spread):.0%} of its median)"
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trace", default="kth", choices=sorted(TRACE_FILES))
    parser.add_argument("--runs", default="last-two,short-jobs")
    parser.add_argument("--skips", default="0,1,2,3")
    parser.add_argument("--jobs", type=int, default=None, help="the trace's first N jobs")
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--trace-dir", type=Path, default=TRACES)
    args = parser.parse_args()
    runs = [r for r in args.runs.split(",") if r]
    skips = [int(s) for s in args.skips.split(",") if s]
    for run in runs:
        policy_of(run)  # an unknown predictor fails here, before any replay
    keys = [(run, skip) for run in runs for skip in skips]
    with ProcessPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        futures = {
            key: pool.submit(
                replay_skipping, args.trace, key[0], key[1], args.out, args.trace_dir, args.jobs
            )
            for key in keys
        }
        found = {key: future.result() for key, future in futures.items()}
    print(report(args.trace, runs, skips, found), flush=True)


if __name__ == "__main__":
    main()
