"""How the dashboard writes times, durations and numbers (also its Jinja filters)."""

from __future__ import annotations

import math
from datetime import UTC, datetime


def clock(t: float | None, *, seconds: bool = True) -> str:
    """An epoch time on the cluster's clock, in UTC: ``2024-05-01 13:04:05``."""
    if t is None:
        return "–"
    return datetime.fromtimestamp(t, UTC).strftime(
        "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    )


def span(s: float | None) -> str:
    """A duration in seconds, short: ``45 s``, ``12 min``, ``3 h 05``, ``2 d 4 h``."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "–"
    sign, s = ("−" if s < 0 else ""), abs(round(s))
    if s < 120:
        return f"{sign}{s} s"
    if s < 3600:
        return f"{sign}{s // 60} min"
    if s < 86400:
        return f"{sign}{s // 3600} h {s % 3600 // 60:02d}"
    return f"{sign}{s // 86400} d {s % 86400 // 3600} h"


def number(x: float | None, digits: int = 1) -> str:
    """A number for a table: ``–`` for missing, grouped thousands."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, int) or (float(x).is_integer() and abs(x) >= 100):
        return f"{int(x):,}"
    return f"{x:,.{digits}f}"


def percent(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "–"
    return f"{100 * x:.1f} %"


FALLBACK_REASONS = {
    "deadline": "the dispatcher had not answered by the deadline",
    "model too large": "the model would have been too large to build and solve in time",
    "invalid": "the dispatcher's decision broke a rule, and the validator refused it",
    "error": "the dispatcher failed (the service log has the error)",
    "solver": "the solver found no solution within its limits",
}


def fallback_reason(reason: str | None) -> str:
    """Why the fallback answered, in words."""
    if not reason:
        return "no reason given"
    if reason.startswith("no time left for "):
        return f"the deadline came before the {reason.removeprefix('no time left for ')} phase"
    if reason.startswith("no CP solution"):
        return (
            f"the solver found no solution in time {reason.removeprefix('no CP solution').strip()}"
        )
    return FALLBACK_REASONS.get(reason, reason)


def phases(notes: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """The phase times a CP call noted (``phases ms: fallback 0.4, prepare 0.3, ...``), as
    (phase, milliseconds) pairs; none for a heuristic."""
    for note in notes:
        if note.startswith("phases ms: "):
            pairs = (part.rsplit(" ", 1) for part in note.removeprefix("phases ms: ").split(", "))
            return [(name, ms) for name, ms in (p for p in pairs if len(p) == 2)]
    return []


FILTERS = {
    "clock": clock,
    "span": span,
    "number": number,
    "percent": percent,
    "fallback_reason": fallback_reason,
    "phases": phases,
}
