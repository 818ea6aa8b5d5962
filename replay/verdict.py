"""One sentence per policy against today: what it gains and what it costs, in words and
human units, for the top of ``cpsched compare``'s output."""

from __future__ import annotations

from collections.abc import Mapping

from cpsched.replay.compare_table import lookup


def human_duration(seconds: float | None) -> str:
    """``seconds`` as a person reads it: 38 s, 12 min, 4 h 12 min, 2 d 21 h."""
    if seconds is None:
        return "n/a"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        hours, minutes = divmod(s // 60, 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(s // 3600, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def _change(value: float | int | None, base: float | int | None) -> str:
    """``-28%`` (lower), ``+11%`` (higher), or ``the same``."""
    if value is None or not base:
        return "n/a"
    change = (value / base - 1) * 100
    return "the same" if round(change) == 0 else f"{change:+.0f}%"


def _share(value: object) -> str:
    return f"{value * 100:.0f}%" if isinstance(value, float) else "n/a"


def verdict(
    label: str,
    summary: Mapping[str, object],
    today: Mapping[str, object],
    by_job: Mapping[str, object],
) -> str:
    """One sentence on ``label`` against today: mean bounded slowdown and mean wait, the
    shares of jobs starting earlier and later (and later by more than a day), the
    longest wait."""
    bsld, base_bsld = (
        lookup(summary, "mean_bounded_slowdown"),
        lookup(today, "mean_bounded_slowdown"),
    )
    wait, base_wait = lookup(summary, "mean_wait_s"), lookup(today, "mean_wait_s")
    longest, base_longest = lookup(summary, "max_wait_s"), lookup(today, "max_wait_s")
    ratio = f"{longest / base_longest:.2f}×" if longest is not None and base_longest else "n/a"
    bsld_text = (
        "n/a" if bsld is None or base_bsld is None else f"{bsld:.1f} against {base_bsld:.1f}"
    )
    return (
        f"{label}: mean bounded slowdown {_change(bsld, base_bsld)} ({bsld_text}), mean wait "
        f"{_change(wait, base_wait)} ({human_duration(wait)} against "
        f"{human_duration(base_wait)}); {_share(by_job.get('earlier'))} of jobs start earlier "
        f"than today, {_share(by_job.get('later'))} later ({_share(by_job.get('later_1d'))} "
        f"by more than a day); the longest wait {human_duration(longest)} against "
        f"{human_duration(base_longest)} ({ratio} today's)."
    )
