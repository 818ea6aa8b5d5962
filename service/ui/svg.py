"""Server-rendered SVG, the parts: scales, ticks for times and durations, axes, and the
opening of a chart with its title and description for screen readers.

Charts are inline in the page and styled by the page's stylesheet (classes, no inline
styles: the dashboard's Content-Security-Policy forbids them). Every text that came from
a cluster (job ids, node names) is escaped. The charts: :mod:`cpsched.service.ui.plots`
and :mod:`cpsched.service.ui.gantt`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import count

from markupsafe import escape

WIDTH = 960
LEFT, RIGHT, TOP, BOTTOM = 72, 16, 12, 44
TIME_STEPS = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400)
_ids = count(1)


def uid(prefix: str) -> str:
    """An element id unique within the process (charts of one page must not clash)."""
    return f"{prefix}-{next(_ids)}"


@dataclass(frozen=True, slots=True)
class Scale:
    """A linear map from data to pixels."""

    lo: float
    hi: float
    p0: float
    p1: float

    def __call__(self, v: float) -> float:
        if self.hi == self.lo:
            return self.p0
        return self.p0 + (v - self.lo) * (self.p1 - self.p0) / (self.hi - self.lo)


def time_ticks(t0: float, t1: float, most: int = 8) -> list[int]:
    step = next((s for s in TIME_STEPS if (t1 - t0) / s <= most), 30 * 86400)
    first = math.ceil(t0 / step) * step
    return list(range(int(first), int(t1) + 1, step))


def time_label(t: float, t0: float, t1: float) -> str:
    fmt = "%m-%d %H:%M" if t1 - t0 > 2 * 86400 else "%H:%M"
    return datetime.fromtimestamp(t, UTC).strftime(fmt)


DURATION_STEPS = (
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
    3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400, 30 * 86400,
)  # fmt: skip
"""Round durations (seconds), for the steps of an axis in seconds."""
DURATION_DECADES = (1, 10, 60, 600, 3600, 86400, 864000, 8640000)
"""Round durations spaced about tenfold (a day after an hour), for the ticks of a log axis."""


def nice_ticks(hi: float, most: int = 6, *, durations: bool = False) -> list[float]:
    """0 and round steps up to at least ``hi``: 1, 2, 5 × 10^k, or with ``durations``
    round durations (30 s, 15 min, 6 h...)."""
    if not hi > 0 or math.isnan(hi):
        return [0.0, 1.0]
    raw = hi / most
    if durations and raw <= DURATION_STEPS[-1]:
        step = float(next(s for s in DURATION_STEPS if s >= raw))
    else:
        power = 10 ** math.floor(math.log10(raw))
        step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(hi / step - 1e-9) + 1)]


def duration_decades(lo: float, hi: float) -> list[float]:
    """The round durations of :data:`DURATION_DECADES` that frame [lo, hi], and those
    between (``lo`` at least 1 s)."""
    below = [d for d in DURATION_DECADES if d <= max(lo, 1)]
    above = [d for d in DURATION_DECADES if d >= hi] or [DURATION_DECADES[-1]]
    return [float(d) for d in DURATION_DECADES if below[-1] <= d <= above[0]]


def svg_open(title: str, desc: str, height: float, cls: str) -> str:
    """The opening of a chart: its size, role, title and description."""
    ident = uid("chart")
    head = (
        f'<svg class="chart {cls}" viewBox="0 0 {WIDTH} {height:.0f}" role="img" '
        f'aria-labelledby="{ident}-t {ident}-d" preserveAspectRatio="xMinYMin meet">'
        f'<title id="{ident}-t">{escape(title)}</title><desc id="{ident}-d">{escape(desc)}</desc>'
    )
    return head


def time_axis(x: Scale, y_base: float, y_top: float, t0: float, t1: float) -> str:
    parts = []
    for t in time_ticks(t0, t1):
        px = x(t)
        parts.append(
            f'<line class="grid" x1="{px:.1f}" x2="{px:.1f}" y1="{y_top:.1f}" y2="{y_base:.1f}"/>'
            f'<text class="tick" x="{px:.1f}" y="{y_base + 16:.1f}" text-anchor="middle">'
            f"{time_label(t, t0, t1)}</text>"
        )
    parts.append(
        f'<text class="axis-label" x="{(x.p0 + x.p1) / 2:.1f}" y="{y_base + 34:.1f}" '
        'text-anchor="middle">cluster time (UTC)</text>'
    )
    return "".join(parts)


def value_axis(
    y: Scale,
    ticks: Sequence[float],
    x0: float,
    x1: float,
    label: Callable[[float], str],
    title: str,
) -> str:
    parts = []
    for v in ticks:
        py = y(v)
        parts.append(
            f'<line class="grid" x1="{x0:.1f}" x2="{x1:.1f}" y1="{py:.1f}" y2="{py:.1f}"/>'
            f'<text class="tick" x="{x0 - 6:.1f}" y="{py + 4:.1f}" text-anchor="end">'
            f"{escape(label(v))}</text>"
        )
    mid = (y.p0 + y.p1) / 2
    parts.append(
        f'<text class="axis-label" x="14" y="{mid:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {mid:.1f})">{escape(title)}</text>'
    )
    return "".join(parts)
