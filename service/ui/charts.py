"""Each dashboard chart: its figures drawn with :mod:`cpsched.service.ui.svg`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup

from cpsched.runtime.length_class import LENGTH_CLASSES
from cpsched.service.store.dashboard import Outcome
from cpsched.service.ui.figures import ClassWaits, ErrorBin, LatencyFigures, ShadowFigures
from cpsched.service.ui.fmt import span
from cpsched.service.ui.plots import Series, line_chart, scatter_loglog, shares

SCATTER_POINTS = 2000
"""The newest jobs drawn in the scatter (more would only blacken it)."""


def _mid(start: int, end: int) -> float:
    return (start + end) / 2


def latency_chart(f: LatencyFigures, deadline_ms: float) -> Markup:
    times = [_mid(b.start, b.end) for b in f.bins]
    return line_chart(
        title="Decision latency",
        desc=(
            f"Median, 95th percentile and maximum answer time per bin, {f.decisions} "
            f"decisions; the policy's deadline is {deadline_ms:.0f} ms"
        ),
        times=times,
        t0=f.start,
        t1=f.end,
        series=[
            Series("max", "s-max", [b.peak for b in f.bins]),
            Series("p95", "s-p95", [b.p95 for b in f.bins]),
            Series("median", "s-p50", [b.p50 for b in f.bins]),
        ],
        y_title="answer time (ms)",
        marks=[(f"deadline {deadline_ms:.0f} ms", deadline_ms)],
    )


def fallback_chart(f: LatencyFigures) -> Markup:
    return line_chart(
        title="Fallback rate",
        desc=f"Share of answers given by the fallback heuristic per bin: {f.fallbacks} of "
        f"{f.decisions} in the window",
        times=[_mid(b.start, b.end) for b in f.bins],
        t0=f.start,
        t1=f.end,
        series=[Series("fallback share", "s-fallback", [100 * b.fallback_rate for b in f.bins])],
        y_title="answers by the fallback (%)",
        y_max=100,
        height=200,
    )


def queue_chart(f: LatencyFigures) -> Markup:
    return line_chart(
        title="Queue and running jobs",
        desc="The most queued and running jobs a snapshot had, per bin: a queue that keeps "
        "growing while few jobs run is the first sign of starving jobs",
        times=[_mid(b.start, b.end) for b in f.bins],
        t0=f.start,
        t1=f.end,
        series=[
            Series("queued", "s-max", [b.queued for b in f.bins]),
            Series("running", "s-p50", [b.running for b in f.bins]),
        ],
        y_title="jobs",
        height=220,
    )


_SHARE_CLASSES = ("s-p50", "s-p95", "s-max", "s-fallback")
"""The colours of the utilisation chart's lines: one resource type each, at most four."""


def utilisation_chart(f: LatencyFigures) -> Markup | None:
    """Each resource type's share in use over time (None: no row recorded it)."""
    names = list(dict.fromkeys(name for b in f.bins for name in b.utilisation))
    if not names:
        return None
    return line_chart(
        title="Utilisation",
        desc="Mean share of each resource type's capacity the running jobs held, per bin: "
        "a queue that grows while this stays low means jobs wait for something else than "
        "room (a rule, a reservation, the plan)",
        times=[_mid(b.start, b.end) for b in f.bins],
        t0=f.start,
        t1=f.end,
        series=[
            Series(name, cls, [100 * b.utilisation.get(name, math.nan) for b in f.bins])
            for name, cls in zip(names, _SHARE_CLASSES, strict=False)
        ],
        y_title="capacity in use (%)",
        y_max=100,
        height=220,
    )


def longest_wait_chart(f: LatencyFigures) -> Markup | None:
    """The longest current wait over time (None: no row recorded it)."""
    if all(math.isnan(b.longest_wait) for b in f.bins):
        return None
    return line_chart(
        title="Longest current wait",
        desc="The longest a queued job cpsched may start had waited, per bin (the most of "
        "the bin's snapshots): a line that keeps climbing is a job starving",
        times=[_mid(b.start, b.end) for b in f.bins],
        t0=f.start,
        t1=f.end,
        series=[Series("longest wait", "s-max", [b.longest_wait for b in f.bins])],
        y_title="waited so far",
        y_label=span,
        y_durations=True,
        height=220,
    )


def class_wait_chart(bins: Sequence[ClassWaits], t0: int, t1: int) -> Markup | None:
    """Mean wait by length class over time (None: no finished job started in the window)."""
    if not any(b.jobs for b in bins):
        return None
    return line_chart(
        title="Waits by job length",
        desc="Mean wait of the finished jobs that started in each bin, by how long they ran "
        "(short < 1 h, medium 1-5 h, long > 5 h): a class whose line climbs is the one the "
        "policy makes wait",
        times=[_mid(b.start, b.end) for b in bins],
        t0=t0,
        t1=t1,
        series=[
            Series(name, cls, [b.mean_wait[name] for b in bins])
            for name, cls in zip(LENGTH_CLASSES, _SHARE_CLASSES, strict=False)
        ],
        y_title="mean wait",
        y_label=span,
        y_durations=True,
        height=220,
    )


def prediction_scatter(outcomes: Sequence[Outcome]) -> Markup:
    shown = outcomes[-SCATTER_POINTS:]
    return scatter_loglog(
        title="Predicted and real run times",
        desc=f"The newest {len(shown)} finished jobs: the run time predicted at their start "
        "against the time they really ran",
        points=[(o.predicted, o.actual) for o in shown],
        x_title="predicted at start",
        y_title="real run time",
    )


def error_chart(bins: Sequence[ErrorBin]) -> Markup:
    return line_chart(
        title="Prediction error over time",
        desc="Median and 90th percentile of |real − predicted| run time, by when jobs started",
        times=[_mid(b.start, b.end) for b in bins],
        t0=bins[0].start,
        t1=bins[-1].end,
        series=[
            Series("90th percentile", "s-p95", [b.p90_ae_s for b in bins]),
            Series("median", "s-p50", [b.median_ae_s for b in bins]),
        ],
        y_title="|real − predicted|",
        y_label=span,
        y_durations=True,
    )


def shadow_chart(s: ShadowFigures) -> Markup:
    return shares(
        title="cpsched against the workload manager",
        desc=(
            f"Of {len(s.jobs)} jobs: cpsched would have started {s.counts['earlier']} earlier, "
            f"{s.counts['same']} at about the same time and {s.counts['later']} later"
        ),
        parts=[
            ("earlier", "sh-earlier", s.counts["earlier"]),
            ("same", "sh-same", s.counts["same"]),
            ("later", "sh-later", s.counts["later"]),
        ],
    )
