"""The numbers behind the dashboard's charts, from rows the store returns.

Times are the cluster's clock (the snapshots' time), so a window of "the last 6 hours"
ends at the newest decision: on a live cluster that is now, on a replay fed over HTTP it
is the replay's own time.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cpsched.runtime.length_class import LENGTH_CLASSES, length_class
from cpsched.service.shadow import shadow_verdict
from cpsched.service.store.dashboard import DecisionPoint, FinishedWait, Outcome, ShadowRecord


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (sorted or not), linear between order statistics."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True, slots=True)
class Bin:
    start: int
    end: int
    count: int
    p50: float
    p95: float
    peak: float
    fallback_rate: float
    """Share of the bin's answers given by the fallback (NaN when the bin is empty)."""
    queued: float = math.nan
    """The most queued jobs a snapshot of the bin had (NaN when the bin is empty)."""
    running: float = math.nan
    """The most running jobs a snapshot of the bin had."""
    longest_wait: float = math.nan
    """The longest current wait a snapshot of the bin had, s (NaN: none recorded)."""
    utilisation: dict[str, float] = field(default_factory=dict)
    """Mean share of each resource type in use over the bin's snapshots."""


@dataclass
class LatencyFigures:
    start: int
    end: int
    bins: list[Bin]
    decisions: int = 0
    fallbacks: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    p50: float = math.nan
    p95: float = math.nan
    peak: float = math.nan


def latency_figures(
    points: Sequence[DecisionPoint], hours: float, bins: int = 48
) -> LatencyFigures:
    """Latency quantiles and fallback rate per bin over the ``hours`` before the newest
    answer, with the totals of that window."""
    if not points:
        return LatencyFigures(0, 0, [])
    end = max(p.time for p in points) + 1
    start = end - max(1, int(hours * 3600))
    inside = [p for p in points if p.time >= start]
    width = (end - start) / bins
    grouped: list[list[DecisionPoint]] = [[] for _ in range(bins)]
    for p in inside:
        grouped[min(bins - 1, int((p.time - start) / width))].append(p)
    out = LatencyFigures(start, end, [])
    for i, group in enumerate(grouped):
        ms = [p.wall_ms for p in group]
        out.bins.append(
            Bin(
                start=int(start + i * width),
                end=int(start + (i + 1) * width),
                count=len(group),
                p50=quantile(ms, 0.5),
                p95=quantile(ms, 0.95),
                peak=max(ms, default=math.nan),
                fallback_rate=(sum(p.fallback for p in group) / len(group) if group else math.nan),
                queued=max((p.queued for p in group), default=math.nan),
                running=max((p.running for p in group), default=math.nan),
                longest_wait=max(
                    (p.longest_wait_s for p in group if p.longest_wait_s is not None),
                    default=math.nan,
                ),
                utilisation=_mean_shares(group),
            )
        )
    all_ms = [p.wall_ms for p in inside]
    out.decisions = len(inside)
    out.fallbacks = sum(p.fallback for p in inside)
    out.reasons = dict(Counter(p.reason or "unnamed" for p in inside if p.fallback).most_common())
    out.p50, out.p95, out.peak = quantile(all_ms, 0.5), quantile(all_ms, 0.95), max(all_ms)
    return out


@dataclass(frozen=True, slots=True)
class ClassWaits:
    start: int
    end: int
    mean_wait: dict[str, float]
    """Each length class's mean wait over the jobs that started in the bin (NaN: none)."""
    jobs: int


def waits_by_class(
    jobs: Sequence[FinishedWait], start: int, end: int, bins: int = 48
) -> list[ClassWaits]:
    """The mean wait of each length class (short, medium, long run time) by when the jobs
    started, over ``start``-``end`` (the latency charts' window): finished jobs only."""
    if end <= start:
        return []
    width = (end - start) / bins
    sums = [{name: [0, 0] for name in LENGTH_CLASSES} for _ in range(bins)]
    for job in jobs:
        if start <= job.start < end:
            acc = sums[min(bins - 1, int((job.start - start) / width))][length_class(job.run)]
            acc[0] += job.wait
            acc[1] += 1
    return [
        ClassWaits(
            start=int(start + i * width),
            end=int(start + (i + 1) * width),
            mean_wait={name: total / n if n else math.nan for name, (total, n) in acc.items()},
            jobs=sum(n for _, n in acc.values()),
        )
        for i, acc in enumerate(sums)
    ]


def _mean_shares(group: Sequence[DecisionPoint]) -> dict[str, float]:
    """Each resource type's mean share in use over the snapshots that recorded it."""
    sums: dict[str, list[float]] = {}
    for p in group:
        for name, share in p.utilisation.items():
            sums.setdefault(name, []).append(share)
    return {name: sum(shares) / len(shares) for name, shares in sums.items()}


@dataclass(frozen=True, slots=True)
class PredictorAccuracy:
    predictor: str
    jobs: int
    mae_s: float
    median_ae_s: float
    under_rate: float
    """Share of jobs that ran longer than predicted (plans made with them were late)."""


@dataclass(frozen=True, slots=True)
class ErrorBin:
    start: int
    end: int
    count: int
    median_ae_s: float
    p90_ae_s: float


def accuracy(outcomes: Sequence[Outcome]) -> list[PredictorAccuracy]:
    """Per predictor: mean and median absolute error, and how often it under-predicted."""
    by_predictor: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_predictor.setdefault(o.predictor, []).append(o)
    return [
        PredictorAccuracy(
            predictor=name,
            jobs=len(group),
            mae_s=sum(abs(o.actual - o.predicted) for o in group) / len(group),
            median_ae_s=quantile([abs(o.actual - o.predicted) for o in group], 0.5),
            under_rate=sum(o.actual > o.predicted for o in group) / len(group),
        )
        for name, group in sorted(by_predictor.items())
    ]


def error_over_time(outcomes: Sequence[Outcome], bins: int = 40) -> list[ErrorBin]:
    """Median and 90th percentile of |real - predicted| per bin of start time."""
    if not outcomes:
        return []
    start = min(o.made_at for o in outcomes)
    end = max(o.made_at for o in outcomes) + 1
    width = (end - start) / bins
    grouped: list[list[int]] = [[] for _ in range(bins)]
    for o in outcomes:
        grouped[min(bins - 1, int((o.made_at - start) / width))].append(abs(o.actual - o.predicted))
    return [
        ErrorBin(
            int(start + i * width),
            int(start + (i + 1) * width),
            len(errors),
            quantile(errors, 0.5),
            quantile(errors, 0.9),
        )
        for i, errors in enumerate(grouped)
    ]


@dataclass(frozen=True, slots=True)
class ShadowJob:
    job_id: str
    cpsched_start: int | None
    """The first dry run that would have started it (None: the workload manager started
    it before any dry run would have)."""
    real_start: int
    verdict: str
    """``earlier``, ``same`` or ``later``: when cpsched would have started it, compared
    with the real start."""

    @property
    def delta_s(self) -> int | None:
        return None if self.cpsched_start is None else self.cpsched_start - self.real_start


@dataclass
class ShadowFigures:
    jobs: list[ShadowJob]
    counts: dict[str, int]
    tolerance_s: int
    mean_delta_s: float
    total_delta_s: int
    """The start differences added up (negative: the waiting cpsched would have saved),
    over the jobs whose cpsched start is known."""
    first: int | None
    last: int | None
    waiting: int
    """Jobs cpsched would have started that the workload manager has not started yet."""


def shadow_figures(
    record: ShadowRecord, running_starts: dict[str, int], tolerance_s: int
) -> ShadowFigures:
    """Each job that shadow mode saw and the workload manager started: would cpsched have
    started it earlier, at about the same time (within ``tolerance_s``), or later?

    A job started by the workload manager before any dry run would have started it counts
    as ``later``: every dry run while it waited left it waiting."""
    real = {**running_starts, **record.slurm_start}
    jobs: list[ShadowJob] = []
    for job_id in sorted(set(record.would_start) | set(record.seen_queued)):
        started = real.get(job_id)
        if started is None:
            continue
        mine = record.would_start.get(job_id)
        jobs.append(ShadowJob(job_id, mine, started, shadow_verdict(mine, started, tolerance_s)))
    deltas = [d for d in (j.delta_s for j in jobs) if d is not None]
    counts = Counter(j.verdict for j in jobs)
    return ShadowFigures(
        jobs=sorted(jobs, key=lambda j: j.real_start),
        counts={k: counts.get(k, 0) for k in ("earlier", "same", "later")},
        tolerance_s=tolerance_s,
        mean_delta_s=sum(deltas) / len(deltas) if deltas else math.nan,
        total_delta_s=sum(deltas),
        first=record.first,
        last=record.last,
        waiting=sum(1 for j in record.would_start if j not in real),
    )
