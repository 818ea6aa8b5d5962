"""Summary statistics of a finished replay, as a JSON-ready dict.

Definitions, per job: wait = start − submit; run = end − start (what the job actually
ran, so a killed job counts up to its limit); slowdown = (wait + run) / run; bounded
slowdown = max((wait + run) / max(run, 10 s), 1). A zero run time (which a valid
replay does not produce) is counted as 1 s in the slowdown so it stays finite.

Warm-up: the first ``floor(warmup_fraction · jobs)`` jobs in submission order are left
out of the job statistics (waits, slowdowns, length classes, predictor error) because
the machine starts empty; whole-run quantities (killed jobs, utilisation, makespan,
queue length, dispatch counts) cover every job. The output states both.

Floats are rounded to 6 decimal places and undefined values are ``None`` (JSON null),
never NaN, so that the same replay always serialises to the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath

import numpy as np

from cpsched.replay.results import JobRecords, ReplayResult
from cpsched.runtime.length_class import LENGTH_CLASSES, LONG_ABOVE_S, SHORT_BELOW_S

BOUND_S = 10
"""τ of the bounded slowdown."""
DIGITS = 6
TIMING_PREFIX = "dispatch_ms_"
REPLAY_WALL = "replay_wall_s"
TIMING_KEYS = (TIMING_PREFIX, REPLAY_WALL)
"""Summary keys measured on the wall clock (by prefix): they differ from run to run."""


def pop_timings(summary: dict[str, object]) -> dict[str, object]:
    """Take the wall-clock keys out of ``summary`` and return them: what is left is the
    same, byte for byte, every time the same replay runs."""
    return {k: summary.pop(k) for k in list(summary) if k.startswith(TIMING_KEYS)}


@dataclass(eq=False)
class JobMetrics:
    """Per-job derived columns, aligned with :class:`JobRecords`."""

    wait: np.ndarray
    run: np.ndarray
    slowdown: np.ndarray
    bounded_slowdown: np.ndarray
    length_class: np.ndarray
    """int8 index into :data:`~cpsched.runtime.length_class.LENGTH_CLASSES`, by the
    trace's run time."""


def job_metrics(jobs: JobRecords) -> JobMetrics:
    wait = jobs.start - jobs.submit
    run = jobs.end - jobs.start
    response = (wait + run).astype(np.float64)
    slowdown = response / np.maximum(run, 1)
    bounded = np.maximum(response / np.maximum(run, BOUND_S), 1.0)
    length_class = (jobs.trace_run >= SHORT_BELOW_S).astype(np.int8) + (
        jobs.trace_run > LONG_ABOVE_S
    ).astype(np.int8)
    return JobMetrics(wait, run, slowdown, bounded, length_class)


def warmup_count(n_jobs: int, warmup_fraction: float) -> int:
    if not 0.0 <= warmup_fraction < 1.0:
        raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
    # The epsilon keeps e.g. 0.29 · 100 (= 28.999…96 in binary) from flooring to 28.
    return math.floor(warmup_fraction * n_jobs + 1e-9)


def rounded(x: float | np.number | None) -> float | None:
    """``x`` rounded to :data:`DIGITS` places; None for None or a non-finite value."""
    if x is None:
        return None
    value = float(x)
    return round(value, DIGITS) if math.isfinite(value) else None


def _int(x: int | np.integer | None) -> int | None:
    return None if x is None else int(x)


def _stats(values: np.ndarray, prefix: str, suffix: str = "") -> dict[str, float | None]:
    empty = values.size == 0
    return {
        f"mean_{prefix}{suffix}": None if empty else rounded(values.mean()),
        f"median_{prefix}{suffix}": None if empty else rounded(np.median(values)),
        f"p95_{prefix}{suffix}": None if empty else rounded(np.percentile(values, 95)),
        f"max_{prefix}{suffix}": None if empty else rounded(values.max()),
    }


def mean_or_none(values: np.ndarray) -> float | None:
    return None if values.size == 0 else rounded(values.mean())


def _step_integral(time: np.ndarray, values: np.ndarray, t0: int, t1: int) -> np.ndarray:
    """∫ over [t0, t1] of the step function holding ``values[k]`` from ``time[k]`` to the
    next sample (the last one to ``t1``); zero before the first sample."""
    edges = np.clip(np.append(time, t1), t0, t1)
    return np.diff(edges) @ values.astype(np.int64, copy=False)


def _window(result: ReplayResult) -> tuple[int, int]:
    """The span the whole-run quantities cover: first submit to last end, or the series'
    own span when there are no jobs."""
    jobs, series = result.jobs, result.series
    if len(jobs):
        return int(jobs.submit.min()), int(jobs.end.max())
    if len(series):
        return int(series.time[0]), int(series.time[-1])
    return 0, 0


def _machine(result: ReplayResult) -> dict[str, object]:
    series, jobs = result.series, result.jobs
    t0, t1 = _window(result)
    span = t1 - t0
    names = series.resource_names
    utilisation: dict[str, float | None] = dict.fromkeys(names)
    mean_queue = None
    if span > 0 and len(series):
        used = _step_integral(series.time, series.used, t0, t1)
        for name, cap, u in zip(names, series.capacity, used, strict=True):
            utilisation[name] = rounded(float(u) / (cap * span)) if cap > 0 else None
        mean_queue = rounded(float(_step_integral(series.time, series.queue_length, t0, t1)) / span)
    elif span > 0:
        utilisation = dict.fromkeys(names, 0.0)
        mean_queue = 0.0
    return {
        "makespan_s": span if len(jobs) else None,
        "utilisation": utilisation,
        "mean_queue_length": mean_queue,
        "max_queue_length": _int(series.queue_length.max()) if len(series) else None,
    }


def _dispatch(result: ReplayResult, include_timings: bool) -> dict[str, object]:
    d = result.dispatch
    out: dict[str, object] = {
        "dispatch_calls": len(d.wall_ms),
        "fallbacks": int(d.fallbacks),
        "fallback_reasons": {str(k): int(v) for k, v in sorted(d.fallback_reasons.items())},
        "extensions": int(d.extensions),
        "solver_status": {str(k): int(v) for k, v in sorted(d.solver_status.items())},
        "model_size": None
        if d.model_size is None
        else {
            name: {"mean": mean_or_none(v), "max": _int(v.max()) if v.size else None}
            for name, v in sorted(d.model_size.items())
        },
    }
    if d.trials is not None:
        out["trial_runs"] = {str(k): int(v) for k, v in d.trials.items()}
    if include_timings:
        ms = d.wall_ms
        some = ms.size > 0
        out[TIMING_PREFIX + "mean"] = rounded(ms.mean()) if some else None
        out[TIMING_PREFIX + "p50"] = rounded(np.percentile(ms, 50)) if some else None
        out[TIMING_PREFIX + "p99"] = rounded(np.percentile(ms, 99)) if some else None
        out[TIMING_PREFIX + "max"] = rounded(ms.max()) if some else None
        out[REPLAY_WALL] = None if d.run_s is None else round(d.run_s, 3)
    return out


def _by_class(m: JobMetrics, keep: slice) -> dict[str, dict[str, object]]:
    classes = m.length_class[keep]
    out: dict[str, dict[str, object]] = {}
    for code, name in enumerate(LENGTH_CLASSES):
        sel = classes == code
        wait = m.wait[keep][sel]
        out[name] = {
            "jobs": int(sel.sum()),
            "mean_wait_s": mean_or_none(wait),
            "max_wait_s": _int(wait.max()) if wait.size else None,
            "mean_slowdown": mean_or_none(m.slowdown[keep][sel]),
            "mean_bounded_slowdown": mean_or_none(m.bounded_slowdown[keep][sel]),
        }
    return out


def _predictor(jobs: JobRecords, keep: slice) -> dict[str, float | None]:
    actual, predicted = jobs.trace_run[keep], jobs.predicted[keep]
    if actual.size == 0:
        return {"mae_s": None, "under_rate": None, "over_rate": None}
    return {
        "mae_s": rounded(np.abs(actual - predicted).mean()),
        "under_rate": rounded((predicted < actual).mean()),
        "over_rate": rounded((predicted > actual).mean()),
    }


def jsonable(value: object) -> object:
    """A JSON-ready copy of ``value`` (settings may hold numpy scalars, paths, tuples)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((jsonable(v) for v in value), key=repr)
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, PurePath):
        return str(value)
    return str(value)


def summarise(
    result: ReplayResult, *, warmup_fraction: float = 0.01, include_timings: bool = True
) -> dict[str, object]:
    """The run's summary. With ``include_timings=False`` every wall-clock-derived
    key (``dispatch_ms_*``) is left out, so that two replays compare byte for byte."""
    jobs = result.jobs
    n = len(jobs)
    skip = warmup_count(n, warmup_fraction)
    keep = slice(skip, None)
    m = job_metrics(jobs)
    wait = m.wait[keep]
    summary: dict[str, object] = {
        "jobs": n - skip,
        "jobs_total": n,
        "warmup_fraction": warmup_fraction,
        "warmup_jobs_excluded": skip,
        **_stats(wait, "wait", "_s"),
        "max_wait_s": _int(wait.max()) if wait.size else None,
        **_stats(m.slowdown[keep], "slowdown"),
        "mean_bounded_slowdown": mean_or_none(m.bounded_slowdown[keep]),
        "killed_jobs": int(jobs.killed.sum()),
        "killed_jobs_after_warmup": int(jobs.killed[keep].sum()),
        "mean_allocation_efficiency": None
        if jobs.efficiency is None
        else mean_or_none(jobs.efficiency[keep]),
        **_machine(result),
        **_dispatch(result, include_timings),
        "by_length_class": _by_class(m, keep),
        "predictor": _predictor(jobs, keep),
        "notes": {
            "warmup": f"job statistics exclude the first {skip} of {n} jobs "
            f"(warmup_fraction={warmup_fraction}, by submission order)",
            "killed_jobs": "counted over all jobs, warm-up included",
            "whole_run": "utilisation, makespan, queue length and dispatch figures "
            "cover the whole run, warm-up included",
            "utilisation": "integral of the used capacity (sampled at every event) over "
            "[first submit, last end]",
            "length_class": "by trace run time: short < 1 h, medium 1-5 h, long > 5 h",
            "allocation_efficiency": "per job at its start, thesis eq. 2.7: its request over "
            "what its nodes had free, every type in units of the largest node's capacity",
        },
        "settings": jsonable(result.settings),
    }
    return summary
