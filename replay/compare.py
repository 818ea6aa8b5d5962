"""Several policies on one trace, in parallel processes, tabulated against ``today`` and
drawn on shared charts (:mod:`cpsched.replay.compare_plots`)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from cpsched.replay.compare_plots import (
    QueueCurve,
    charts_markdown,
    queue_curve,
    write_comparison_plots,
)
from cpsched.replay.compare_table import comparison_rows, to_markdown, write_csv
from cpsched.replay.job_by_job import Waits, job_by_job
from cpsched.replay.job_by_job import to_markdown as job_by_job_markdown
from cpsched.replay.outputs import atomic_target, output_directory, write_json
from cpsched.replay.runner import ReplaySettings, simulate, write_replay
from cpsched.replay.verdict import verdict
from cpsched.runtime.policy import Policy

BASELINE = "today"
DEFAULT_RUNS = ("today", "easy++", "default", "oracle")
"""What ``cpsched compare`` shows unless told otherwise: what a site runs now, EASY++,
what cpsched recommends, and the bound a perfect predictor would give it."""


def compare_policies(
    base: ReplaySettings, policies: Mapping[str, Policy], *, workers: int = 2
) -> str:
    """Replay ``base.trace`` with each policy into ``base.out/<label>``; write
    ``comparison.md``, ``comparison.csv`` and ``job_by_job.json`` (each run against
    ``today`` job by job: :mod:`cpsched.replay.job_by_job`) there and return the Markdown.

    ``today`` (EASY on the users' requested times: what Slurm and PBS essentially do) is
    always among the runs, and every ratio in the table is to it.
    """
    output_directory(base.out)
    runs = with_baseline(policies)
    settings = [
        replace(base, policy=policy, out=base.out / label) for label, policy in runs.items()
    ]
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(settings)))) as pool:
        results = dict(zip(runs, pool.map(replay_with_queue, settings), strict=True))
    summaries = {label: summary for label, (summary, _) in results.items()}
    rows = comparison_rows(summaries, baseline=BASELINE)
    baseline = Waits.read(base.out / BASELINE / "jobs.parquet")
    against_today = {
        label: job_by_job(Waits.read(base.out / label / "jobs.parquet"), baseline)
        for label in runs
        if label != BASELINE
    }
    charts = ""
    if base.plots:
        curves = {label: curve for label, (_, curve) in results.items()}
        paths = write_comparison_plots(base.out, summaries, curves, baseline=BASELINE)
        charts = charts_markdown(paths)
    verdicts = [
        verdict(label, summaries[label], summaries[BASELINE], by_job)
        for label, by_job in against_today.items()
    ]
    markdown = (
        "".join(f"* {line}\n" for line in verdicts)
        + ("\n" if verdicts else "")
        + f"Trace {base.trace.name}; "
        f"first {base.warmup_fraction:.0%} of jobs excluded as warm-up; ratios are to today "
        "(EASY on the users' requested times).\n\n"
        + to_markdown(rows)
        + "\n"
        + job_by_job_markdown(against_today, BASELINE)
        + "\n"
        + "\n".join(f"* {label}: {describe(policy)}" for label, policy in runs.items())
        + "\n"
        + charts
    )
    base.out.mkdir(parents=True, exist_ok=True)
    with atomic_target(base.out / "comparison.md") as tmp:
        tmp.write_text(markdown)
    write_csv(rows, base.out / "comparison.csv")
    write_json(against_today, base.out / "job_by_job.json")
    return markdown


def replay_with_queue(settings: ReplaySettings) -> tuple[dict[str, object], QueueCurve]:
    """One run of a comparison (in a worker process): its outputs written, its summary
    and its queue-length curve for the shared chart."""
    result = simulate(settings)
    curve = queue_curve(result.series)
    return write_replay(result, settings), curve


def with_baseline(runs: Mapping[str, Policy]) -> dict[str, Policy]:
    """``runs`` with ``today`` among them, added last when no run has that label: every
    ratio of a comparison (``compare``, ``sweep``) is to it."""
    with_today = dict(runs)
    with_today.setdefault(BASELINE, Policy.named(BASELINE))
    return with_today


def describe(policy: Policy) -> str:
    """The settings that make ``policy`` differ from the default one."""
    default = Policy()
    changed = {k: v for k, v in policy.model_dump().items() if getattr(default, k) != v}
    return ", ".join(f"{k}={v}" for k, v in changed.items()) or "the default policy"
