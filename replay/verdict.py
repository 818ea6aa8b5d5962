"""One sentence per policy against today: what it gains and what it costs, in words and
human units, for the top of ``cpsched compare``'s output."""

from __future__ import annotations

from collections.abc import Mapping

from cpsched.replay.compare_table import human, human_duration, lookup


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
        f"{human_duration(base_longest)} ({ratio} today's)" + _costs(summary, today) + "."
    )


def _costs(summary: Mapping[str, object], today: Mapping[str, object]) -> str:
    """What the run's decisions and replay took against today's, where both were timed
    (a replay with ``--no-timings`` keeps them out of its summary)."""
    decision, base_decision = (
        lookup(summary, "dispatch_ms_p99"),
        lookup(today, "dispatch_ms_p99"),
    )
    replay, base_replay = lookup(summary, "replay_wall_s"), lookup(today, "replay_wall_s")
    if decision is None or base_decision is None or replay is None or base_replay is None:
        return ""
    return (
        f"; a decision takes {human('dispatch_ms_p99', decision)} at p99 (today "
        f"{human('dispatch_ms_p99', base_decision)}), the replay {human_duration(replay)} "
        f"(today {human_duration(base_replay)})"
    )
