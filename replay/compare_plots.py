"""The charts of ``cpsched compare``: every policy on one chart, so they can be told apart.

* ``compare_wait_cdf.png``: the wait-time distributions (warm-up jobs left out);
* ``compare_bsld_by_class.png``: mean bounded slowdown by job-length class, grouped bars;
* ``compare_queue_length.png``: queue length over time, smoothed (a moving average over
  :data:`SMOOTH_BINS` of the curve's bins), and below it each policy's queue minus
  today's, where a policy's gain or cost shows as a line above or below zero instead of
  four spiky curves drawn over one another.

A policy keeps its colour on every chart. The queue curve is binned in the replay's
worker process (:func:`queue_curve`), so only a few thousand points cross back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from cpsched.replay.metrics import LENGTH_CLASSES
from cpsched.replay.plots import binned, new_figure, save_png, time_axis, wait_axes, wait_cdf
from cpsched.replay.results import TimeSeries

QUEUE_BINS = 1000
SMOOTH_BINS = 25
"""The queue chart's moving average, in bins of :data:`QUEUE_BINS`: 2.5 % of the run."""
CLASS_LABELS = {"short": "short (< 1 h)", "medium": "medium (1–5 h)", "long": "long (> 5 h)"}
CHARTS = {
    "compare_wait_cdf.png": "Wait time distribution of every policy",
    "compare_bsld_by_class.png": "Mean bounded slowdown by job length",
    "compare_queue_length.png": "Queue length over time",
}
"""File name → what it shows (the Markdown links' text)."""


@dataclass(frozen=True, slots=True)
class QueueCurve:
    """Time-weighted mean queue length per bin, at the bins' centres (trace time, s)."""

    time: np.ndarray
    mean: np.ndarray


def queue_curve(series: TimeSeries, bins: int = QUEUE_BINS) -> QueueCurve:
    if not len(series):
        return QueueCurve(np.empty(0), np.empty(0))
    centres, mean, _ = binned(series.time, series.queue_length, bins)
    return QueueCurve(np.asarray(centres, dtype=np.float64), np.asarray(mean, dtype=np.float64))


def smoothed(values: np.ndarray, window: int = SMOOTH_BINS) -> np.ndarray:
    """The centred moving average of ``values`` over ``window`` bins (fewer at the ends;
    NaN left out of each mean)."""
    if not values.size:
        return values.astype(np.float64)
    window = max(1, min(window, values.size - (1 - values.size % 2)))  # odd, at most the size
    valid = ~np.isnan(values)
    kernel = np.ones(window)
    total = np.convolve(np.where(valid, values, 0.0), kernel, mode="same")
    count = np.convolve(valid.astype(np.float64), kernel, mode="same")
    return np.divide(total, count, out=np.full(values.shape, np.nan), where=count > 0)


def against_baseline(curve: QueueCurve, baseline: QueueCurve) -> np.ndarray:
    """``curve`` smoothed, minus ``baseline`` smoothed, at the baseline's bin centres
    (NaN where ``curve``'s run had ended or not begun)."""
    if not curve.time.size or not baseline.time.size:
        return np.full(baseline.time.shape, np.nan)
    at = np.interp(baseline.time, curve.time, smoothed(curve.mean), left=np.nan, right=np.nan)
    return np.asarray(at - smoothed(baseline.mean), dtype=np.float64)


def _waits(run_dir: Path) -> np.ndarray:
    """The waits of a run's jobs after warm-up, from its ``jobs.parquet``."""
    table = pq.read_table(run_dir / "jobs.parquet", columns=["wait", "warmup"])
    wait = table.column("wait").to_numpy()
    return np.asarray(wait[~table.column("warmup").to_numpy()], dtype=np.float64)


def _colours(labels: list[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    palette = colormaps["tab10"]
    return {label: palette(i % 10) for i, label in enumerate(labels)}


def _plot_wait_cdfs(out: Path, labels: list[str], colour: dict[str, Any]) -> Path:
    fig, ax = new_figure()
    jobs = 0
    for label in labels:
        waits = _waits(out / label)
        jobs = max(jobs, waits.size)
        if waits.size:
            mean = f"mean {waits.mean() / 60:.0f} min"
            wait_cdf(ax, waits, color=colour[label], label=f"{label} ({mean})")
    wait_axes(ax, f"Wait time distribution ({jobs} jobs after warm-up)")
    ax.legend(loc="lower right")
    return save_png(fig, out / "compare_wait_cdf.png")


def _plot_bsld_by_class(
    out: Path, summaries: Mapping[str, Mapping[str, Any]], colour: dict[str, Any]
) -> Path:
    fig, ax = new_figure()
    labels = list(summaries)
    width = 0.8 / max(1, len(labels))
    positions = np.arange(len(LENGTH_CLASSES))
    drawn: list[float] = []
    for i, label in enumerate(labels):
        by_class = summaries[label].get("by_length_class") or {}
        values = [(by_class.get(c) or {}).get("mean_bounded_slowdown") for c in LENGTH_CLASSES]
        heights = [np.nan if v is None else float(v) for v in values]
        drawn += [h for h in heights if h > 0]
        bars = ax.bar(positions + (i - (len(labels) - 1) / 2) * width, heights, width * 0.95,
                      color=colour[label], label=label)  # fmt: skip
        ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=1)
    first = summaries[labels[0]].get("by_length_class") or {} if labels else {}
    ax.set_xticks(
        positions,
        [f"{CLASS_LABELS[c]}\n{(first.get(c) or {}).get('jobs', 0)} jobs" for c in LENGTH_CLASSES],
    )
    # Short jobs' slowdowns can be a hundred times the long ones': a log axis keeps every
    # bar readable (a bounded slowdown is at least 1).
    log = bool(drawn) and max(drawn) > 20 * min(drawn)
    if log:
        ax.set_yscale("log")
    ax.set(
        title="Mean bounded slowdown by job length (τ = 10 s; lower is better)",
        ylabel="mean bounded slowdown" + (" (log scale)" if log else ""),
    )
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper right")
    return save_png(fig, out / "compare_bsld_by_class.png")


def _plot_queues(
    out: Path, curves: Mapping[str, QueueCurve], colour: dict[str, Any], baseline: str
) -> Path:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 7), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    starts = [float(c.time[0]) for c in curves.values() if c.time.size]
    origin = min(starts, default=0.0)
    label_x = "time since first call (s)"
    today = curves.get(baseline)
    for label, curve in curves.items():
        if not curve.time.size:
            continue
        x, label_x = time_axis(curve.time, origin)
        top.plot(x, smoothed(curve.mean), lw=1.2, color=colour[label], label=label)
        if today is not None and label != baseline and today.time.size:
            tx, _ = time_axis(today.time, origin)
            bottom.plot(tx, against_baseline(curve, today), lw=1.2, color=colour[label],
                        label=label)  # fmt: skip
    share = SMOOTH_BINS / QUEUE_BINS
    top.set(
        title=f"Queue length over time (moving average over {share:.1%} of the run)",
        ylabel="queued jobs",
    )
    top.grid(True, alpha=0.3)
    top.legend(loc="upper right")
    bottom.axhline(0, color=colour.get(baseline, "black"), lw=1.2, label=f"{baseline} (0)")
    bottom.set(
        title=f"Queue length minus {baseline}'s (below 0: a shorter queue than {baseline})",
        xlabel=label_x,
        ylabel=f"queued jobs − {baseline}",
    )
    bottom.grid(True, alpha=0.3)
    bottom.legend(loc="upper right")
    return save_png(fig, out / "compare_queue_length.png")


def write_comparison_plots(
    out: Path,
    summaries: Mapping[str, Mapping[str, Any]],
    curves: Mapping[str, QueueCurve],
    baseline: str = "today",
) -> list[Path]:
    """The three charts of the runs in ``out/<label>/`` (labels in ``summaries``' order;
    the queue's drawn against ``baseline``'s as well)."""
    labels = list(summaries)
    colour = _colours(labels)
    return [
        _plot_wait_cdfs(out, labels, colour),
        _plot_bsld_by_class(out, summaries, colour),
        _plot_queues(out, {label: curves[label] for label in labels}, colour, baseline),
    ]


def charts_markdown(paths: list[Path]) -> str:
    """The charts' section of ``comparison.md``: a link and the image of each."""
    lines = ["", "## Charts", ""]
    for path in paths:
        title = CHARTS[path.name]
        lines += [f"* [{title}]({path.name})", "", f"  ![{title}]({path.name})", ""]
    return "\n".join(lines)
