"""Predictor accuracy on a trace, without scheduling: every job predicted at its submission.

The jobs ended when the trace says they did: each starts at ``submit + wait`` (the
wait the log recorded, 0 where it has none) and ends ``run_time`` later. Jobs are taken
in submit order (stable for equal submits); before job ``i`` is predicted at its submit
time ``t``, the predictor observes, in end order, every job with ``end <= t`` (the same
convention as the replay, which releases finished jobs before dispatching). A job never
sees itself, since it ends at least 1 s after it is submitted.

Measured: mean and median absolute error in seconds, the under-estimation rate
(predicted < real; a tight limit would kill these jobs without correction), the
over-estimation rate, the exact rate, the mean size of each kind of error, an
asymmetric loss, and ``A = real / predicted`` per job (A > 1: underestimate) for the
distribution plot.

The error a scheduler pays for is not symmetric: an under-estimate breaks the plan (a
reservation made on it comes too late, the longest waits grow), an over-estimate only
loses a backfill chance. ``pinball_loss_s`` weighs them so: the quantile (pinball) loss
at :data:`UNDER_WEIGHT`, an under-estimate by ``d`` seconds costing ``0.9 d`` and an
over-estimate ``0.1 d`` (the loss a predictor of the run time's 90th percentile
minimises). It ranks predictors as a scheduler would rather than as MAE does.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from cpsched.core.problem import Job
from cpsched.predictor.base import FinishedJob, Predictor

RATIO_QUANTILES = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
UNDER_WEIGHT = 0.9
"""The pinball loss's quantile: the weight of an under-estimate (an over-estimate's is
1 - this)."""


class TraceJobLike(Protocol):
    """What :func:`evaluate` needs of a trace job (``replay.swf.TraceJob`` fits)."""

    @property
    def job(self) -> Job: ...

    @property
    def run_time(self) -> int: ...

    @property
    def wait(self) -> int: ...


def evaluate(trace_jobs: Sequence[TraceJobLike], predictor: Predictor) -> dict[str, Any]:
    """Predict every job at its submit time, learning only from jobs already finished.

    Returns ``predictor`` (its name), ``jobs``, ``predictions`` and ``ratios`` (numpy
    arrays aligned with ``trace_jobs``), ``mae_s``, ``median_ae_s``, ``under_rate``,
    ``over_rate`` and ``exact_rate``. Rates and errors are None for an empty trace.
    """
    count = len(trace_jobs)
    order = sorted(range(count), key=lambda i: trace_jobs[i].job.submit)
    predictions = np.zeros(count, dtype=np.int64)
    real = np.fromiter((tj.run_time for tj in trace_jobs), dtype=np.int64, count=count)
    pending: list[tuple[int, int]] = []  # (end, submit position): ties finish in submit order
    for position, i in enumerate(order):
        tj = trace_jobs[i]
        t = tj.job.submit
        while pending and pending[0][0] <= t:
            end, done_position = heapq.heappop(pending)
            done = trace_jobs[order[done_position]]
            predictor.observe(FinishedJob(done.job, end - done.run_time, end))
        predictions[i] = predictor.predict(tj.job, t)
        heapq.heappush(pending, (t + tj.wait + tj.run_time, position))
    return summarize(getattr(predictor, "name", type(predictor).__name__), real, predictions)


def summarize(name: str, real: np.ndarray, predictions: np.ndarray) -> dict[str, Any]:
    """Accuracy figures of ``predictions`` against ``real`` run times (seconds)."""
    result: dict[str, Any] = {"predictor": name, "jobs": len(real), "predictions": predictions}
    if len(real) == 0:
        result.update(
            ratios=np.zeros(0),
            mae_s=None,
            median_ae_s=None,
            under_rate=None,
            over_rate=None,
            exact_rate=None,
            mean_under_s=None,
            mean_over_s=None,
            pinball_loss_s=None,
        )
        return result
    error = np.abs(predictions - real)
    result.update(
        ratios=real / predictions,
        mae_s=float(error.mean()),
        median_ae_s=float(np.median(error)),
        under_rate=float((predictions < real).mean()),
        over_rate=float((predictions > real).mean()),
        exact_rate=float((predictions == real).mean()),
        **asymmetric(real, predictions),
    )
    return result


def asymmetric(real: np.ndarray, predictions: np.ndarray) -> dict[str, float | None]:
    """The mean size of the under- and over-estimates (None when there is none) and the
    pinball loss at :data:`UNDER_WEIGHT` (module docstring)."""
    short = real - predictions  # > 0: under-estimated by that much
    under, over = short[short > 0], -short[short < 0]
    loss = np.where(short > 0, UNDER_WEIGHT * short, (UNDER_WEIGHT - 1) * short)
    return {
        "mean_under_s": float(under.mean()) if len(under) else None,
        "mean_over_s": float(over.mean()) if len(over) else None,
        "pinball_loss_s": float(loss.mean()),
    }


def write_accuracy(result: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """Write ``accuracy.json`` (scalars and ratio quantiles) and ``ratio_distribution.png``.

    The per-job arrays are left out of the JSON: they are as long as the trace, and the
    quantiles and the plot are what people read.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    ratios = np.asarray(result["ratios"], dtype=float)
    summary = {k: v for k, v in result.items() if not isinstance(v, np.ndarray)}
    summary["predictions"] = len(result["predictions"])
    summary["ratio_quantiles"] = (
        {f"p{round(q * 100):02d}": float(np.quantile(ratios, q)) for q in RATIO_QUANTILES}
        if len(ratios)
        else {}
    )
    json_path = out_dir / "accuracy.json"
    json_path.write_text(json.dumps(summary, sort_keys=True, indent=2) + "\n")
    png_path = out_dir / "ratio_distribution.png"
    _plot_ratios(ratios, str(result.get("predictor", "")), png_path)
    return json_path, png_path


def _plot_ratios(ratios: np.ndarray, name: str, path: Path) -> None:
    # Imported here (matplotlib is slow to import and only reports need it); an Agg canvas
    # driven directly leaves the process-wide backend alone.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if len(ratios):
        ax.hist(np.log10(ratios), bins=80, color="#4c72b0")
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set(
        title=f"Prediction accuracy: {name}" if name else "Prediction accuracy",
        xlabel="log10(real / predicted)   (> 0: underestimate)",
        ylabel="jobs",
    )
    fig.savefig(path, format="png", dpi=100)
