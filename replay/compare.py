"""Several policies on one trace, in parallel processes, tabulated against ``today`` and
drawn on shared charts (:mod:`cpsched.replay.compare_plots`)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

from cpsched.replay.compare_plots import (
    QueueCurve,
    charts_markdown,
    queue_curve,
    write_comparison_plots,
)
from cpsched.replay.compare_table import comparison_rows, human_duration, to_markdown, write_csv
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


@dataclass(frozen=True, slots=True)
class Comparison:
    """A comparison's results: ``comparison.md``'s text, and its parts for a terminal."""

    markdown: str
    verdicts: list[str]
    """One sentence per run against today (:func:`cpsched.replay.verdict.verdict`)."""
    rows: list[dict[str, object]]
    """Each run's values and ratios to today (:func:`comparison_rows`)."""
    descriptions: dict[str, str]
    """What each run is, in words (:func:`describe`)."""


def compare_policies(
    base: ReplaySettings, policies: Mapping[str, Policy], *, workers: int = 2
) -> Comparison:
    """Replay ``base.trace`` with each policy into ``base.out/<label>``; write
    ``comparison.md``, ``comparison.csv`` and ``job_by_job.json`` (each run against
    ``today`` job by job: :mod:`cpsched.replay.job_by_job`) there and return them.

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
    descriptions = {label: describe(policy) for label, policy in runs.items()}
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
        + "\n".join(f"* {label}: {words}" for label, words in descriptions.items())
        + "\n"
        + charts
    )
    base.out.mkdir(parents=True, exist_ok=True)
    with atomic_target(base.out / "comparison.md") as tmp:
        tmp.write_text(markdown)
    write_csv(rows, base.out / "comparison.csv")
    write_json(against_today, base.out / "job_by_job.json")
    return Comparison(markdown, verdicts, rows, descriptions)


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


DISPATCHER_NAMES = {
    "fcfs": "FCFS",
    "sjf": "shortest job first",
    "ljf": "longest job first",
    "easy": "EASY backfilling",
    "hcp3": "HCP3 (constraint programming)",
    "pcp3": "PCP3 (constraint programming)",
    "pcp20": "PCP'20 (constraint programming)",
}
PREDICTOR_NAMES = {
    "wall-time": "the users' requested times",
    "last-two": "the users' last two run times",
    "profile": "job profiles",
    "adaboost": "AdaBoost",
    "quantile-boost": "quantile boosting (the median run time of jobs like it)",
    "short-jobs": "the users' last two run times, with a learned test for very short jobs",
    "oracle": "the trace's real run times",
}
OVERRUN_NAMES = {
    "one-second": "a job past its prediction expected to end within a second",
    "request": "a job past its prediction expected to run to its limit",
    "ladder": "a job past its prediction expected to run to the next usual request "
    "(1, 5, 15, 30 min, 1, 2, 5 h, ...)",
    "doubling": "a job past its prediction expected to run twice as long",
}
SAID = {
    "overrun",
    "dispatcher",
    "prediction_margin",
    "prediction_upper_quantile",
    "predictor",
    "backfill_order",
    "backfill_depth",
    "wait_bound",
    "wait_bound_depth",
    "wait_overdue_quantile",
    "wait_bound_today",
    "trial_run",
}
"""Settings :func:`describe` puts in words; the others it lists as ``name=value``."""


def describe(policy: Policy) -> str:
    """What ``policy`` is, in words: its dispatcher, what it plans with, how it
    backfills and bounds waits, then any other setting that differs from the default's
    (``unbounded``: "HCP3 (constraint programming) on the users' last two run times")."""
    dispatcher = DISPATCHER_NAMES.get(policy.dispatcher, policy.dispatcher)
    if policy.dispatcher == "easy" and policy.backfill_depth > 1:
        dispatcher = f"conservative backfilling ({policy.backfill_depth} reservations)"
    words = f"{dispatcher} on {PREDICTOR_NAMES.get(policy.predictor, policy.predictor)}"
    if policy.prediction_margin != 1 and policy.predictor != "oracle":
        words += f", planned {policy.prediction_margin:g} times as long"
    if policy.prediction_upper_quantile and policy.predictor != "oracle":
        words += (
            f", running jobs planned to the {policy.prediction_upper_quantile:g} quantile "
            "of the user's errors"
        )
    if policy.dispatcher == "easy" and policy.backfill_order == "shortest":
        words += ", the shortest predicted job backfilled first"
    if policy.wait_bound:
        depth = f", {policy.wait_bound_depth} at a time" if policy.wait_bound_depth else ""
        words += (
            f", a start guarantee once a job has waited {human_duration(policy.wait_bound)}{depth}"
        )
        if policy.wait_overdue_quantile:
            share = f"{policy.wait_overdue_quantile:.0%}"
            words += f", a job waiting longer than {share} of recent jobs did started first"
    if policy.wait_bound_today:
        words += (
            f", after {human_duration(policy.wait_bound_today)} a job is given what today's "
            "scheduler would have given it"
        )
    if policy.trial_run:
        words += (
            f", jobs predicted longer tried for {human_duration(policy.trial_run)} on what "
            "is left idle"
        )
    default = Policy()
    # A job can only outlive a prediction that is not its limit or its real run time.
    guessed = policy.predictor not in ("wall-time", "oracle")
    if guessed and policy.overrun != default.overrun:
        words += f"; {OVERRUN_NAMES.get(policy.overrun, policy.overrun)}"
    others = {
        k: v for k, v in policy.model_dump().items() if k not in SAID and getattr(default, k) != v
    }
    return words + "".join(f"; {k}={v}" for k, v in others.items())
