"""Server-rendered SVG charts: lines over time, a log-log scatter, a bar of shares."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from cpsched.service.ui.fmt import span
from cpsched.service.ui.svg import (
    BOTTOM,
    LEFT,
    RIGHT,
    TOP,
    WIDTH,
    Scale,
    duration_decades,
    nice_ticks,
    svg_open,
    time_axis,
    value_axis,
)


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    cls: str
    """CSS class of the line (its colour)."""
    values: Sequence[float]
    """One per x; NaN leaves a gap."""


def line_chart(
    *,
    title: str,
    desc: str,
    times: Sequence[float],
    t0: float,
    t1: float,
    series: Sequence[Series],
    y_title: str,
    y_label: Callable[[float], str] = lambda v: f"{v:g}",
    y_durations: bool = False,
    y_max: float | None = None,
    marks: Sequence[tuple[str, float]] = (),
    height: float = 260,
) -> Markup:
    """Lines over time; ``marks`` are labelled horizontal reference lines (a deadline),
    drawn when within twice the data's range, else named above the chart."""
    head = svg_open(title, desc, height, "line-chart")
    finite = [v for s in series for v in s.values if not math.isnan(v)]
    peak = max(finite, default=0.0)
    shown = [(label, v) for label, v in marks if y_max is not None or v <= 2 * peak]
    top = y_max if y_max is not None else max([peak, *(v for _, v in shown)]) * 1.05
    ticks = nice_ticks(top, durations=y_durations)
    x = Scale(t0, t1, LEFT, WIDTH - RIGHT)
    y = Scale(0, ticks[-1], height - BOTTOM, TOP)
    parts = [head, value_axis(y, ticks, LEFT, WIDTH - RIGHT, y_label, y_title)]
    parts.append(time_axis(x, height - BOTTOM, TOP, t0, t1))
    for label, value in marks:
        if (label, value) not in shown:
            parts.append(
                f'<text class="mark-label" x="{WIDTH - RIGHT - 4}" y="{TOP + 10}" '
                f'text-anchor="end">{escape(label)}: above the chart</text>'
            )
            continue
        py = y(value)
        parts.append(
            f'<line class="mark" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py:.1f}" y2="{py:.1f}"/>'
            f'<text class="mark-label" x="{WIDTH - RIGHT - 4}" y="{py - 4:.1f}" '
            f'text-anchor="end">{escape(label)}</text>'
        )
    for s in series:
        for run in _runs(times, s.values):
            points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in run)
            if len(run) == 1:
                ((t, v),) = run
                parts.append(
                    f'<circle class="dot {s.cls}" cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5"/>'
                )
            else:
                parts.append(f'<polyline class="line {s.cls}" points="{points}"/>')
    parts.append(_legend([(s.label, s.cls) for s in series], LEFT + 8, TOP + 14))
    parts.append("</svg>")
    return Markup("".join(parts))


def _runs(times: Sequence[float], values: Sequence[float]) -> list[list[tuple[float, float]]]:
    """The stretches of consecutive defined values (a NaN breaks the line)."""
    runs: list[list[tuple[float, float]]] = [[]]
    for t, v in zip(times, values, strict=True):
        if math.isnan(v):
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((t, v))
    return [r for r in runs if r]


def _legend(entries: Sequence[tuple[str, str]], x: float, y: float) -> str:
    parts = ['<g class="legend">']
    for label, cls in entries:
        parts.append(
            f'<rect class="swatch {cls}" x="{x:.1f}" y="{y - 9:.1f}" width="12" height="10"/>'
            f'<text x="{x + 16:.1f}" y="{y:.1f}">{escape(label)}</text>'
        )
        x += 24 + 7.5 * len(label)
    parts.append("</g>")
    return "".join(parts)


def scatter_loglog(
    *,
    title: str,
    desc: str,
    points: Sequence[tuple[float, float]],
    x_title: str,
    y_title: str,
    height: float = 420,
) -> Markup:
    """Predicted (x) against real (y) run times on log axes, with the diagonal y = x.
    Values below 1 s are drawn at 1 s."""
    head = svg_open(title, desc, height, "scatter")
    size = height - TOP - BOTTOM
    x0 = LEFT
    xs = [max(1.0, p[0]) for p in points] or [1.0]
    ys = [max(1.0, p[1]) for p in points] or [1.0]
    ticks = duration_decades(min(*xs, *ys), max(*xs, *ys, 10.0))
    lo, hi = math.log10(ticks[0]), math.log10(ticks[-1])
    x = Scale(lo, hi, x0, x0 + size)
    y = Scale(lo, hi, TOP + size, TOP)
    parts = [head]
    for v in ticks:
        lv = math.log10(v)
        parts.append(
            f'<line class="grid" x1="{x(lv):.1f}" x2="{x(lv):.1f}" y1="{TOP}" y2="{TOP + size}"/>'
            f'<line class="grid" x1="{x0}" x2="{x0 + size}" y1="{y(lv):.1f}" y2="{y(lv):.1f}"/>'
            f'<text class="tick" x="{x(lv):.1f}" y="{TOP + size + 16}" text-anchor="middle">'
            f"{span(v)}</text>"
            f'<text class="tick" x="{x0 - 6}" y="{y(lv) + 4:.1f}" text-anchor="end">'
            f"{span(v)}</text>"
        )
    parts.append(
        f'<line class="mark" x1="{x(lo):.1f}" y1="{y(lo):.1f}" x2="{x(hi):.1f}" y2="{y(hi):.1f}"/>'
        f'<text class="mark-label" x="{x(hi) - 4:.1f}" y="{y(hi) + 14:.1f}" text-anchor="end">'
        "real = predicted</text>"
    )
    for px, py in zip(xs, ys, strict=True):
        parts.append(
            f'<circle class="dot point" cx="{x(math.log10(px)):.1f}" '
            f'cy="{y(math.log10(py)):.1f}" r="2.2"/>'
        )
    parts.append(
        f'<text class="axis-label" x="{x0 + size / 2:.1f}" y="{TOP + size + 34}" '
        f'text-anchor="middle">{escape(x_title)}</text>'
        f'<text class="axis-label" x="14" y="{TOP + size / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + size / 2:.1f})">{escape(y_title)}</text>'
        f'<text class="note" x="{x0 + size + 24}" y="{TOP + 16}">above the diagonal: ran '
        "longer than predicted</text>"
        f'<text class="note" x="{x0 + size + 24}" y="{TOP + 34}">below: ended sooner</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))


def shares(*, title: str, desc: str, parts: Sequence[tuple[str, str, int]]) -> Markup:
    """One horizontal bar split into labelled shares: ``(label, css class, count)``."""
    head = svg_open(title, desc, 56, "shares")
    total = sum(n for _, _, n in parts) or 1
    out = [head]
    x = float(LEFT)
    width = WIDTH - LEFT - RIGHT
    for label, cls, n in parts:
        w = width * n / total
        if w > 0:
            out.append(
                f'<rect class="share {cls}" x="{x:.1f}" y="8" width="{w:.1f}" height="24">'
                f"<title>{escape(label)}: {n}</title></rect>"
            )
            if w > 60:
                out.append(
                    f'<text class="share-label" x="{x + w / 2:.1f}" y="25" '
                    f'text-anchor="middle">{escape(label)} {n}</text>'
                )
        x += w
    out.append("</svg>")
    return Markup("".join(out))
