"""Durations the models use, in one place for every dispatcher."""

from __future__ import annotations

from collections.abc import Mapping

from cpsched.core.problem import RunningJob

Durations = Mapping[str, int]
"""``d_i`` in seconds for every queued and running job, by job id."""


def remaining(running: RunningJob, duration: int, now: int) -> int:
    """Seconds a running job is still expected to run: ``max(1, s + d - t)``.

    The floor of one second is the underestimation fix of PCP2/HCP2: a job that has
    outlived its prediction still needs *some* time, so plans never end in the past.
    """
    left = running.start + duration - now
    return left if left > 1 else 1


def expected_end(running: RunningJob, duration: int, now: int) -> int:
    return now + remaining(running, duration, now)
