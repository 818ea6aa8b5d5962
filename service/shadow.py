"""Shadow mode's verdict on one job: would cpsched's dry runs have started it earlier than
the workload manager did, at about the same time, or later?"""

from __future__ import annotations

from typing import Literal

SHADOW_TOLERANCE_S = 60
"""Starts this close count as the same (a bridge's cycle is typically 10-60 s)."""

Verdict = Literal["earlier", "same", "later", "not started"]


def shadow_verdict(would_start: int | None, started: int | None, tolerance_s: int) -> Verdict:
    """``would_start``: the first dry run that would have started the job (None: none
    would have before the workload manager did, which counts as later); ``started``:
    when the workload manager did (None: not yet)."""
    if started is None:
        return "not started"
    if would_start is None or would_start > started + tolerance_s:
        return "later"
    if would_start < started - tolerance_s:
        return "earlier"
    return "same"
