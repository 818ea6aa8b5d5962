"""Jobs by length, as the replay's tables and the service's wait metrics both count them."""

from __future__ import annotations

LENGTH_CLASSES = ("short", "medium", "long")
SHORT_BELOW_S = 3600
LONG_ABOVE_S = 5 * 3600
"""short: run < 1 h; medium: 1 h ≤ run ≤ 5 h; long: run > 5 h."""


def length_class(run_s: int) -> str:
    """The class of a job that ran ``run_s`` seconds."""
    return LENGTH_CLASSES[(run_s >= SHORT_BELOW_S) + (run_s > LONG_ABOVE_S)]
