"""PNG plots of a replay: wait and slowdown distributions, queue length, utilisation.

Every curve is reduced to a few thousand points before drawing (quantiles for the
distributions, time bins for the series), so plotting 300k jobs and 600k samples takes
about as long as plotting 300. Matplotlib is imported only here, inside
:func:`write_plots`, and drives an Agg canvas directly so no global backend is touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cpsched.replay.metrics import job_metrics, warmup_count
from cpsched.replay.outputs import atomic_target
from cpsched.replay.results import ReplayResult, TimeSeries

ECDF_POINTS = 4000
TIME_BINS = 2500
"""Bins of the time-series plots; with a max line beside the mean that is ~5000 points."""
DPI = 110


def ecdf_points(values: np.ndarray, points: int = ECDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``points`` (x, F(x)) pairs of the empirical distribution of ``values``."""
    x = np.sort(values)
    n = x.size
    if n == 0:
        return x, np.empty(0)
    idx = np.unique(np.linspace(0, n - 1, min(n, points)).astype(np.int64))
    return x[idx], (idx + 1) / n


def binned(
    time: np.ndarray, values: np.ndarray, bins: int = TIME_BINS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bin centres, time-weighted mean and max per bin of a step series over its span.

    ``values`` may be 1-D or ``[samples, k]``. The mean is exact: the integral of a step
    function is piecewise linear between samples, so interpolating it at the bin edges
    loses nothing.
    """
    # Of samples sharing a time only the last one is ever in force.
    last = np.r_[time[1:] != time[:-1], True]
    t, kept = time[last].astype(np.float64), values[last].astype(np.float64)
    if t.size < 2 or t[-1] == t[0]:
        return t, kept, kept
    v = kept.reshape(t.size, -1)
    integral = np.zeros_like(v)
    np.cumsum(v[:-1] * np.diff(t)[:, None], axis=0, out=integral[1:])
    edges = np.linspace(t[0], t[-1], min(bins, t.size) + 1)
    at_edges = np.stack([np.interp(edges, t, integral[:, j]) for j in range(v.shape[1])], 1)
    mean = np.diff(at_edges, axis=0) / np.diff(edges)[:, None]
    bin_of = np.minimum(np.searchsorted(edges, t, side="right") - 1, len(edges) - 2)
    occupied, first = np.unique(bin_of, return_index=True)
    peak = mean.copy()
    peak[occupied] = np.maximum(np.maximum.reduceat(v, first, axis=0), mean[occupied])
    if values.ndim == 1:
        mean, peak = mean[:, 0], peak[:, 0]
    return (edges[:-1] + edges[1:]) / 2, mean, peak


def time_axis(seconds: np.ndarray, origin: float) -> tuple[np.ndarray, str]:
    span = float(seconds[-1] - origin) if seconds.size else 0.0
    if span > 3 * 86400:
        return (seconds - origin) / 86400, "time since first call (days)"
    if span > 3 * 3600:
        return (seconds - origin) / 3600, "time since first call (hours)"
    return seconds - origin, "time since first call (s)"


def save_png(fig: Any, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    with atomic_target(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)
    return path


def new_figure() -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5), layout="constrained")
    return fig, fig.add_subplot()


def _no_data(ax: Any) -> None:
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def wait_cdf(ax: Any, waits: np.ndarray, **style: Any) -> None:
    """The empirical distribution of ``waits`` on a log axis. A log axis has no 0: zero
    waits (often most jobs) sit at 1 s, as :func:`wait_axes`' label says."""
    x, y = ecdf_points(np.maximum(waits, 1))
    ax.step(x, y, where="post", **style)
    ax.set_xscale("log")


def wait_axes(ax: Any, title: str) -> None:
    ax.set(
        title=title,
        xlabel="wait (s, log scale; waits < 1 s drawn at 1 s)",
        ylabel="fraction of jobs with wait ≤ x",
        ylim=(0, 1.02),
    )
    ax.grid(True, which="major", alpha=0.3)


def _plot_waits(waits: np.ndarray, path: Path, note: str) -> Path:
    fig, ax = new_figure()
    if waits.size:
        wait_cdf(ax, waits)
        zero = float(np.mean(waits == 0))
        ax.text(0.98, 0.05, f"{zero:.1%} of jobs waited 0 s", ha="right", transform=ax.transAxes)
    else:
        _no_data(ax)
    wait_axes(ax, f"Wait time distribution{note}")
    return save_png(fig, path)


def _plot_slowdowns(bsld: np.ndarray, path: Path, note: str) -> Path:
    fig, ax = new_figure()
    if bsld.size:
        x, y = ecdf_points(bsld)
        ax.step(x, y, where="post")
        ax.set_xscale("log")
    else:
        _no_data(ax)
    ax.set(
        title=f"Bounded slowdown distribution (τ = 10 s){note}",
        xlabel="bounded slowdown (ratio, log scale)",
        ylabel="fraction of jobs with bounded slowdown ≤ x",
        ylim=(0, 1.02),
    )
    ax.grid(True, which="major", alpha=0.3)
    return save_png(fig, path)


def _plot_queue(series: TimeSeries, path: Path) -> Path:
    fig, ax = new_figure()
    if len(series):
        centres, mean, peak = binned(series.time, series.queue_length)
        x, label = time_axis(centres, float(series.time[0]))
        ax.plot(x, peak, lw=0.6, alpha=0.5, drawstyle="steps-mid", label="max per bin")
        ax.plot(x, mean, lw=1.0, drawstyle="steps-mid", label="time-weighted mean per bin")
        ax.legend(loc="upper right")
    else:
        label = "time since first call (s)"
        _no_data(ax)
    ax.set(title="Queue length over time", xlabel=label, ylabel="queued jobs")
    ax.grid(True, alpha=0.3)
    return save_png(fig, path)


def _plot_utilisation(series: TimeSeries, path: Path) -> Path:
    fig, ax = new_figure()
    if len(series):
        centres, mean, _ = binned(series.time, series.used)
        x, label = time_axis(centres, float(series.time[0]))
        cap = np.asarray(series.capacity, dtype=np.float64)
        share = np.divide(mean, cap, out=np.zeros_like(mean), where=cap > 0)
        for j, name in enumerate(series.resource_names):
            ax.plot(x, share[:, j], lw=0.8, drawstyle="steps-mid", label=name)
        ax.legend(loc="lower right")
    else:
        label = "time since first call (s)"
        _no_data(ax)
    ax.set(
        title="Utilisation over time (time-weighted mean per bin)",
        xlabel=label,
        ylabel="used / capacity",
        ylim=(0, 1.05),
    )
    ax.grid(True, alpha=0.3)
    return save_png(fig, path)


def write_plots(result: ReplayResult, out: Path, warmup_fraction: float) -> list[Path]:
    """Write the four PNGs into ``out`` and return their paths. The distributions leave
    out the warm-up jobs, like the summary; the time series show the whole run."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    m = job_metrics(result.jobs)
    skip = warmup_count(len(result.jobs), warmup_fraction)
    note = f" ({len(result.jobs) - skip} jobs after warm-up)"
    return [
        _plot_waits(m.wait[skip:], out / "wait_distribution.png", note),
        _plot_slowdowns(m.bounded_slowdown[skip:], out / "slowdown_distribution.png", note),
        _plot_queue(result.series, out / "queue_length.png"),
        _plot_utilisation(result.series, out / "utilisation.png"),
    ]
