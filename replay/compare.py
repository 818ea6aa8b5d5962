"""Several dispatchers on one trace, in parallel processes, tabulated against EASY."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from cpsched.replay.compare_table import comparison_rows, to_markdown, write_csv
from cpsched.replay.outputs import atomic_target
from cpsched.replay.runner import ReplaySettings, run_replay

BASELINE = "easy"


def compare_dispatchers(base: ReplaySettings, names: list[str], *, workers: int = 2) -> str:
    """Replay ``base.trace`` with each dispatcher into ``base.out/<name>``; write
    ``comparison.md`` and ``comparison.csv`` there and return the Markdown table.

    EASY is always among the runs: it is what Slurm and PBS essentially do, and every
    ratio in the table is to it.
    """
    if BASELINE not in names:
        names = [*names, BASELINE]
    # Each policy is validated now: a typo fails before other replays have run.
    runs = [
        replace(base, policy=base.policy.but(dispatcher=name), out=base.out / name)
        for name in names
    ]
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(runs)))) as pool:
        summaries = dict(zip(names, pool.map(run_replay, runs), strict=True))
    rows = comparison_rows(summaries, baseline=BASELINE)
    markdown = (
        f"Trace {base.trace.name}, allocator {base.policy.allocator}, "
        f"predictor {base.policy.predictor}; "
        f"first {base.warmup_fraction:.0%} of jobs excluded as warm-up; ratios are to EASY.\n\n"
        + to_markdown(rows)
    )
    base.out.mkdir(parents=True, exist_ok=True)
    with atomic_target(base.out / "comparison.md") as tmp:
        tmp.write_text(markdown)
    write_csv(rows, base.out / "comparison.csv")
    return markdown
