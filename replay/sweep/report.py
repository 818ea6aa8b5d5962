"""The sweep's report (``DIR/report.md``): per trace slice, the policies ranked by mean
bounded slowdown, every metric with its ratio to ``today`` (the table ``cpsched compare``
writes, from the same code), a chart of the ratios, and the cells that failed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cpsched.replay.compare import BASELINE, describe
from cpsched.replay.compare_table import RATIO_SUFFIX, comparison_rows, to_markdown
from cpsched.replay.outputs import atomic_target
from cpsched.replay.plots import save_png
from cpsched.replay.sweep.plan import SweepPlan, TraceSlice, slug
from cpsched.replay.sweep.store import CellStore

RANK_KEY = "mean_bounded_slowdown"
CHART_KEYS = ("mean_bounded_slowdown", "mean_wait_s", "p95_wait_s")
"""The ratios the charts draw, one panel each."""


def ranked(rows: Sequence[Mapping[str, object]]) -> list[Mapping[str, object]]:
    """``rows`` best first by mean bounded slowdown; rows without it last."""

    def key(row: Mapping[str, object]) -> tuple[bool, float]:
        value = row.get(RANK_KEY)
        return (
            not isinstance(value, int | float),
            float(value) if isinstance(value, int | float) else 0.0,
        )

    return sorted(rows, key=key)


def write_report(plan: SweepPlan, store: CellStore) -> Path:
    """Write ``report.md`` and its charts (``charts/<trace>.png``); return the report."""
    out = store.out
    cells = plan.cells()
    done = sum(store.finished(cell) for cell in cells)
    sections = [
        f"# Policy sweep: {plan.source.name}\n",
        f"{len(cells)} cells ({len(plan.traces)} trace slices × {len(plan.policies)} "
        f"policies): {done} finished. Per trace slice, the policies best first by mean "
        f"bounded slowdown; each cell is `value (×ratio to {BASELINE})`, {BASELINE} being "
        "EASY backfilling on the users' requested times. The first "
        f"{plan.warmup:.0%} of each slice's jobs are left out as warm-up. Every row of "
        "`results.parquet` has all the metrics; `cells/<cell>/cell.json` has the "
        "`cpsched replay` command that gives the same summary.\n",
    ]
    for trace in plan.traces:
        sections.append(_section(plan, store, trace, out))
    sections.append("## Policies\n")
    sections += [f"* {p.label}: {describe(p.policy)}" for p in plan.policies]
    path = out / "report.md"
    with atomic_target(path) as tmp:
        tmp.write_text("\n".join(sections) + "\n", encoding="utf-8")
    return path


def _section(plan: SweepPlan, store: CellStore, trace: TraceSlice, out: Path) -> str:
    summaries: dict[str, dict[str, Any]] = {}
    failed: list[str] = []
    for cell in plan.cells():
        if cell.trace != trace:
            continue
        stored = store.load(cell)
        if stored is not None and stored.summary is not None:
            summaries[cell.policy.label] = {**stored.summary, **stored.timings}
        elif stored is not None:
            failed.append(f"* {cell.policy.label} failed: {stored.error}")
        else:
            failed.append(f"* {cell.policy.label}: not run yet")
    lines = [f"## {trace.label}\n", f"`{trace.path.name}`; machine: {trace.system.source}.\n"]
    if summaries:
        rows = ranked(comparison_rows(summaries, baseline=BASELINE))
        chart = _chart(trace.label, rows, out / "charts" / f"{slug(trace.label)}.png")
        lines += [to_markdown(rows), f"![{trace.label}]({chart.relative_to(out).as_posix()})\n"]
    return "\n".join([*lines, *failed, ""])


def _chart(title: str, rows: Sequence[Mapping[str, object]], path: Path) -> Path:
    """Horizontal bars of each policy's ratios to today, one panel per metric; best
    policy on top; a line at 1 (today)."""
    from matplotlib.figure import Figure

    labels = [str(row["run"]) for row in rows]
    fig = Figure(figsize=(11, 1.2 + 0.35 * len(rows)), layout="constrained")
    axes = fig.subplots(1, len(CHART_KEYS), sharey=True, squeeze=False)[0]
    for ax, key in zip(axes, CHART_KEYS, strict=True):
        ratios = [row.get(key + RATIO_SUFFIX) for row in rows]
        values = [r if isinstance(r, float) else 0.0 for r in ratios]
        colours = ["tab:green" if v < 1 else "tab:red" if v > 1 else "tab:gray" for v in values]
        bars = ax.barh(range(len(rows)), values, color=colours)
        ax.bar_label(
            bars,
            [f"{v:.2f}" if isinstance(v, float) else "n/a" for v in ratios],
            padding=2,
            fontsize=8,
        )
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set(title=f"{key} ÷ {BASELINE}", yticks=range(len(rows)), yticklabels=labels)
        ax.grid(True, axis="x", alpha=0.3)
    axes[0].invert_yaxis()  # the axes share y: once inverts them all
    fig.suptitle(f"{title}: ratios to {BASELINE} (below 1 is better)")
    return save_png(fig, path)
