"""Several policies on one trace, in parallel processes, tabulated against ``today``."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from cpsched.replay.compare_table import comparison_rows, to_markdown, write_csv
from cpsched.replay.outputs import atomic_target
from cpsched.replay.runner import ReplaySettings, run_replay
from cpsched.runtime.policy import Policy

BASELINE = "today"
DEFAULT_RUNS = ("today", "easy++", "default", "oracle")
"""What ``cpsched compare`` shows unless told otherwise: what a site runs now, EASY++,
what cpsched recommends, and the bound a perfect predictor would give it."""


def compare_policies(
    base: ReplaySettings, policies: Mapping[str, Policy], *, workers: int = 2
) -> str:
    """Replay ``base.trace`` with each policy into ``base.out/<label>``; write
    ``comparison.md`` and ``comparison.csv`` there and return the Markdown table.

    ``today`` (EASY on the users' requested times: what Slurm and PBS essentially do) is
    always among the runs, and every ratio in the table is to it.
    """
    runs = dict(policies)
    runs.setdefault(BASELINE, Policy.named(BASELINE))
    settings = [
        replace(base, policy=policy, out=base.out / label) for label, policy in runs.items()
    ]
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(settings)))) as pool:
        summaries = dict(zip(runs, pool.map(run_replay, settings), strict=True))
    rows = comparison_rows(summaries, baseline=BASELINE)
    markdown = (
        f"Trace {base.trace.name}; "
        f"first {base.warmup_fraction:.0%} of jobs excluded as warm-up; ratios are to today "
        "(EASY on the users' requested times).\n\n"
        + to_markdown(rows)
        + "\n"
        + "\n".join(f"* {label}: {describe(policy)}" for label, policy in runs.items())
        + "\n"
    )
    base.out.mkdir(parents=True, exist_ok=True)
    with atomic_target(base.out / "comparison.md") as tmp:
        tmp.write_text(markdown)
    write_csv(rows, base.out / "comparison.csv")
    return markdown


def describe(policy: Policy) -> str:
    """The settings that make ``policy`` differ from the default one."""
    default = Policy()
    changed = {k: v for k, v in policy.model_dump().items() if getattr(default, k) != v}
    return ", ".join(f"{k}={v}" for k, v in changed.items()) or "the default policy"
