"""Is a site's schedule better with cpsched than with what it runs today? Whole traces.

    python bench/value_over_today.py --out bench-out/value [--traces kth,ctc] [--runs today,default]

replays each trace with each run, one replay at a time (say what else ran on the
machine), and prints one Markdown table: mean wait, mean bounded slowdown (τ = 10 s),
p95 and max wait, long-job (> 5 h) mean wait, killed jobs, fallbacks, the replay's wall
time, and the ratios to ``today`` (EASY on the users' requested times). A replay whose
``summary.json`` made with the same policy exists under ``--out`` is not run again, so a
long table can be built over several sittings; delete a run's directory to run it again
(one of other settings is run again). ``--cached`` runs nothing
and tabulates what is there ("not run" for the rest). A second table compares each run
with ``today`` job by job (``cpsched.replay.job_by_job``): the share of jobs starting
earlier, at the same time and later (by more than 1 h, 1 day), p99 and max wait.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

from cpsched.replay.job_by_job import Waits, job_by_job
from cpsched.replay.job_by_job import to_markdown as job_by_job_markdown
from cpsched.replay.runner import ReplaySettings, run_replay
from cpsched.runtime.policy import Policy

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "data" / "traces"

# name -> (file, system file, jobs replayed: None for the whole trace)
TRACE_FILES: dict[str, tuple[str, str, int | None]] = {
    "kth": ("KTH-SP2-1996-2.1-cln.swf.gz", "kth.toml", None),
    "ctc": ("CTC-SP2-1996-3.1-cln.swf.gz", "ctc.toml", None),
    "hpc2n": ("HPC2N-2002-2.2-cln.swf.gz", "hpc2n.toml", None),
    "metacentrum": ("METACENTRUM-2009-2.swf.gz", "metacentrum.toml", None),
    "curie": ("CEA-Curie-2011-2.1-cln.swf.gz", "curie.toml", 50_000),
}

CP_ROW = {
    "predictor": "last-two",
    "overrun": "request",
    "deadline": 0.2,
    "cp_limit": 0.02,
    "cp_patience": 1,
}
"""The CP rows: the CP models with easy++'s predictions and correction and no wait bound, at
the settings of docs/results/cp-dispatchers.md's whole-trace table (a 0.2 s deadline:
wall-clock limited, so a replay differs a little from run to run)."""

RUNS: dict[str, Callable[[], Policy]] = {
    "today": lambda: Policy.named("today"),
    "conservative": lambda: Policy.named("conservative"),
    "easy++": lambda: Policy.named("easy++"),
    "easy+oracle": lambda: Policy.named("today", predictor="oracle"),
    "hcp3": lambda: Policy.named("unbounded", dispatcher="hcp3", **CP_ROW),
    "pcp3": lambda: Policy.named("unbounded", dispatcher="pcp3", **CP_ROW),
    "pcp20": lambda: Policy.named("unbounded", dispatcher="pcp20", **CP_ROW),
    "unbounded": lambda: Policy.named("unbounded"),
    "default": lambda: Policy.named("default"),
}

COLUMNS = (
    ("mean wait s", "mean_wait_s"),
    ("mean bsld", "mean_bounded_slowdown"),
    ("p95 wait s", "p95_wait_s"),
    ("max wait s", "max_wait_s"),
    ("long-job wait s", "by_length_class.long.mean_wait_s"),
    ("killed", "killed_jobs"),
    ("fallbacks", "fallbacks"),
    ("replay s", "replay_wall_s"),
)
RATIOS = (
    ("bsld", "mean_bounded_slowdown"),
    ("wait", "mean_wait_s"),
    ("long wait", "by_length_class.long.mean_wait_s"),
)


def value(summary: dict[str, object] | None, key: str) -> float | None:
    node: object = summary
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, int | float) else None


def made_with(directory: Path, policy: Policy) -> bool:
    """Whether the replay in ``directory`` was made with ``policy``: a run kept from an
    earlier sitting under the same name may be of other settings (a default changed
    since), and is then replayed again."""
    try:
        summary = json.loads((directory / "summary.json").read_text())
        return Policy.model_validate(summary["settings"]["policy"]) == policy
    except (OSError, ValueError, KeyError, TypeError):
        return False


def run_directory(trace: str, run: str, out: Path) -> Path | None:
    """Where ``run``'s replay of ``trace`` is under ``out``: its own directory, or that of
    a run with the same policy (a heuristic replay is deterministic); None if not run."""
    policy = RUNS[run]()
    for other in (run, *RUNS):
        twin = out / trace / other
        if made_with(twin, policy):
            return twin
    return None


def replay(
    trace: str, run: str, out: Path, traces: Path, *, cached: bool = False
) -> dict[str, object] | None:
    target = out / trace / run
    done = run_directory(trace, run, out)
    if done is not None:
        if done != target:
            print(f"  {trace} · {run}: the same policy as {done.name}", flush=True)
        return json.loads((done / "summary.json").read_text())
    policy = RUNS[run]()
    if cached:
        return None
    file, system, jobs = TRACE_FILES[trace]
    settings = ReplaySettings(
        trace=traces / file,
        out=target,
        policy=policy,
        system=REPO / "systems" / system,
        jobs=jobs,
        plots=False,
    )
    began = time.perf_counter()
    summary = run_replay(settings)
    print(f"  {trace} · {run}: {time.perf_counter() - began:.0f} s", flush=True)
    return summary


def fmt(x: float | None) -> str:
    if x is None:
        return "–"
    if isinstance(x, int) or abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.2f}"


def table(results: dict[str, dict[str, dict[str, object] | None]]) -> str:
    head = ["trace", "run", *(c for c, _ in COLUMNS), *(f"{r} vs today" for r, _ in RATIOS)]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for trace, runs in results.items():
        base = runs.get("today")
        for run, summary in runs.items():
            if summary is None:
                lines.append(f"| {trace} | {run} | not run |" + " |" * (len(head) - 3))
                continue
            cells = [fmt(value(summary, key)) for _, key in COLUMNS]
            for _, key in RATIOS:
                v, b = value(summary, key), None if base is None else value(base, key)
                cells.append("–" if v is None or not b else f"{(v / b - 1) * 100:+.0f}%")
            lines.append(f"| {trace} | {run} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--traces", default=",".join(TRACE_FILES))
    parser.add_argument("--runs", default=",".join(RUNS))
    parser.add_argument("--trace-dir", type=Path, default=TRACES)
    parser.add_argument(
        "--cached", action="store_true", help="run nothing: tabulate the runs already in --out"
    )
    args = parser.parse_args()
    traces = [t for t in args.traces.split(",") if t]
    runs = [r for r in args.runs.split(",") if r]
    unknown = [t for t in traces if t not in TRACE_FILES] + [r for r in runs if r not in RUNS]
    if unknown:
        raise SystemExit(f"unknown trace or run: {', '.join(unknown)}")
    if "today" not in runs:
        runs.insert(0, "today")
    results: dict[str, dict[str, dict[str, object] | None]] = {}
    for trace in traces:
        results[trace] = {
            run: replay(trace, run, args.out, args.trace_dir, cached=args.cached) for run in runs
        }
    print(table(results))
    for trace in traces:
        today = run_directory(trace, "today", args.out)
        others = {run: run_directory(trace, run, args.out) for run in runs if run != "today"}
        if today is None:
            continue
        baseline = Waits.read(today / "jobs.parquet")
        by_job = {
            run: job_by_job(Waits.read(where / "jobs.parquet"), baseline)
            for run, where in others.items()
            if where is not None
        }
        print(f"\n### {trace}\n\n" + job_by_job_markdown(by_job))


if __name__ == "__main__":
    main()
