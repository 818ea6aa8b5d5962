"""The Gantt chart's layout: which bar goes in which lane of which row, over what window.

One row per node holding a running or starting job (idle nodes are only counted: a
cluster has thousands); jobs sharing a node get lanes of their own. Jobs the plan starts
later have no nodes yet, so they get rows of their own below, packed in lanes by time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from markupsafe import Markup, escape

from cpsched.service.ui.fmt import clock
from cpsched.service.ui.live import LiveView
from cpsched.service.ui.svg import BOTTOM, RIGHT, TOP, WIDTH, Scale, svg_open, time_axis

MAX_NODE_ROWS = 200
MAX_PLANNED = 150
MIN_AHEAD_S = 3600
MAX_AHEAD_S = 7 * 86400

BarKind = Literal["running", "overdue", "starting", "planned"]


@dataclass(frozen=True, slots=True)
class Bar:
    job_id: str
    start: int
    end: int
    """What is drawn: the job's time clipped to the window."""
    kind: BarKind
    units: int = 0
    """Units on this node (0 for planned jobs, which have no node yet)."""
    began: int = 0
    predicted_end: int = 0
    """The job's own (planned) start and predicted end, for its label."""


@dataclass(frozen=True, slots=True)
class Row:
    label: str
    lanes: list[list[Bar]]


@dataclass
class Gantt:
    now: int
    t0: int
    t1: int
    rows: list[Row] = field(default_factory=list)
    planned: list[list[Bar]] = field(default_factory=list)
    idle_nodes: int = 0
    hidden_nodes: int = 0
    hidden_planned: int = 0
    """Planned jobs not drawn: beyond the window, or past :data:`MAX_PLANNED`."""


def pack(bars: Iterable[Bar]) -> list[list[Bar]]:
    """Bars in lanes, none overlapping another in its lane (first fit by start time)."""
    lanes: list[list[Bar]] = []
    for bar in sorted(bars, key=lambda b: (b.start, b.end, b.job_id)):
        for lane in lanes:
            if lane[-1].end <= bar.start:
                lane.append(bar)
                break
        else:
            lanes.append([bar])
    return lanes


def window(now: int, ends: Iterable[int]) -> tuple[int, int]:
    """From a quarter of the span before ``now`` to the last predicted end (at least an
    hour ahead, at most a week)."""
    ahead = min(MAX_AHEAD_S, max(MIN_AHEAD_S, max((e - now for e in ends), default=0)))
    return now - ahead // 4, now + ahead


def layout(view: LiveView) -> Gantt:
    now = view.time
    ends = [p.predicted_end for p in view.placed]
    ends += [p.predicted_end for p in view.planned if p.start < now + MAX_AHEAD_S]
    t0, t1 = window(now, ends)
    by_node: dict[str, list[Bar]] = {}
    for job in view.placed:
        if job.starting:
            kind: BarKind = "starting"
            end = job.predicted_end
        elif job.predicted_end <= now:
            kind, end = "overdue", now
        else:
            kind, end = "running", job.predicted_end
        for node, units in job.nodes.items():
            bar = Bar(
                job.job_id,
                max(job.start, t0),
                min(end, t1),
                kind,
                units,
                job.start,
                job.predicted_end,
            )
            by_node.setdefault(node, []).append(bar)
    busy = [name for name in view.nodes if name in by_node]
    gantt = Gantt(now=now, t0=t0, t1=t1, idle_nodes=len(view.nodes) - len(busy))
    gantt.rows = [Row(name, pack(by_node[name])) for name in busy[:MAX_NODE_ROWS]]
    gantt.hidden_nodes = max(0, len(busy) - MAX_NODE_ROWS)
    shown = [p for p in view.planned if p.start < t1][:MAX_PLANNED]
    gantt.hidden_planned = len(view.planned) - len(shown)
    gantt.planned = pack(
        Bar(
            p.job_id,
            max(p.start, t0),
            min(max(p.predicted_end, p.start + 1), t1),
            "planned",
            began=p.start,
            predicted_end=p.predicted_end,
        )
        for p in shown
    )
    return gantt


LABEL_W = 120
LANE_H, LANE_GAP, ROW_GAP = 14, 2, 5
HEAD = 14
"""Room above the first row, for the "now" label."""


def render(g: Gantt) -> Markup:
    """The Gantt chart: node rows, then the planned jobs' rows; every bar focusable with
    a label saying what it is, so the chart can be read from the keyboard too."""
    rows: list[tuple[str, list[list[Bar]]]] = [(r.label, r.lanes) for r in g.rows]
    if g.planned:
        rows.append(("planned", g.planned))
    body = sum(len(lanes) * (LANE_H + LANE_GAP) + ROW_GAP for _, lanes in rows)
    height = TOP + HEAD + max(body, 24) + BOTTOM
    title = "Running and planned jobs over the nodes"
    desc = (
        f"{sum(len(r.lanes) for r in g.rows)} lanes over {len(g.rows)} busy nodes "
        f"({g.idle_nodes} idle), and {sum(len(lane) for lane in g.planned)} planned jobs; "
        "each bar is a job, from its start to its predicted end"
    )
    head = svg_open(title, desc, height, "gantt")
    x = Scale(g.t0, g.t1, LABEL_W, WIDTH - RIGHT)
    parts = [head, time_axis(x, height - BOTTOM, TOP, g.t0, g.t1)]
    y = float(TOP + HEAD)
    for label, lanes in rows:
        row_h = len(lanes) * (LANE_H + LANE_GAP)
        cls = "row-label planned-label" if label.startswith("planned") else "row-label"
        parts.append(
            f'<text class="{cls}" x="{LABEL_W - 6}" y="{y + min(row_h, LANE_H) - 3:.1f}" '
            f'text-anchor="end">{escape(label)}</text>'
            f'<line class="row-sep" x1="{LABEL_W}" x2="{WIDTH - RIGHT}" '
            f'y1="{y + row_h + ROW_GAP / 2:.1f}" y2="{y + row_h + ROW_GAP / 2:.1f}"/>'
        )
        for lane in lanes:
            parts.extend(_bar(bar, x, y, label) for bar in lane)
            y += LANE_H + LANE_GAP
        y += ROW_GAP
    now = x(g.now)
    parts.append(
        f'<line class="now" x1="{now:.1f}" x2="{now:.1f}" y1="{TOP - 4}" y2="{height - BOTTOM}"/>'
        f'<text class="now-label" x="{now + 4:.1f}" y="{TOP + 8}">now</text></svg>'
    )
    return Markup("".join(parts))


_WHAT = {
    "running": "running",
    "overdue": "running past its predicted end",
    "starting": "starting now",
    "planned": "planned",
}


def _bar(bar: Bar, x: Scale, y: float, row: str) -> str:
    x0, x1 = x(bar.start), max(x(bar.end), x(bar.start) + 2)
    where = f" on {row} ({bar.units} units)" if bar.units else ""
    label = (
        f"job {bar.job_id}{where}: {_WHAT[bar.kind]}, from {clock(bar.began)} "
        f"to {clock(bar.predicted_end)} (predicted)"
    )
    text = ""
    if x1 - x0 > 8 * len(bar.job_id) + 6:
        text = (
            f'<text class="bar-text" x="{x0 + 3:.1f}" y="{y + LANE_H - 3:.1f}">'
            f"{escape(bar.job_id)}</text>"
        )
    return (
        f'<g class="bar bar-{bar.kind}" tabindex="0" role="img" aria-label="{escape(label)}" '
        f'data-job="{escape(bar.job_id)}"><title>{escape(label)}</title>'
        f'<rect x="{x0:.1f}" y="{y:.1f}" width="{x1 - x0:.1f}" height="{LANE_H}" rx="2"/>{text}</g>'
    )
