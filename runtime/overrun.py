"""What a running job that outlived its prediction is expected to take now.

A prediction is only for planning: the job's limit (the user's request, or as extended)
is what kills it. When a job is still running at its predicted end, the prediction is
proven wrong and plans built on it promise capacity that is not free. The rules:

* ``one-second``: keep it; the core assumes the job ends one second from now (the
  papers' underestimation fix, PCP2/HCP2). Kept to reproduce them: on real traces every
  overrunning job makes reservations slip again and again.
* ``request``: expect the job to run to its limit (EASY++'s first choice, Tsafrir,
  Etsion and Feitelson, TPDS 2007).
* ``ladder``: the next rung above the time already run, of run times users typically
  ask for (1, 5, 15, 30 min, 1, 2, 5, 10, 20, 50, 100 h): an increasing sequence.
* ``doubling``: double the prediction until it exceeds the time already run: an
  estimate conditional on the time run, for heavy-tailed run times, where a job that has
  run for ``e`` seconds is as likely as not to run for ``e`` more.

Every rule is a pure function of the first prediction, the time already run and the
limit, and never goes past the limit: applied at every call or once when the prediction
is found wrong, it gives the same duration, so the replay (which follows events) and the
service (which rebuilds its durations from each snapshot) plan alike.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Literal, get_args

OverrunRule = Literal["one-second", "request", "ladder", "doubling"]
OVERRUN_RULES: tuple[str, ...] = get_args(OverrunRule)

LADDER: tuple[int, ...] = (
    60, 300, 900, 1800, 3600, 7200, 18_000, 36_000, 72_000, 180_000, 360_000
)  # fmt: skip
"""Seconds: 1, 5, 15 and 30 minutes, 1, 2, 5, 10, 20, 50 and 100 hours."""


def overrun_duration(rule: OverrunRule, duration: int, elapsed: int, limit: int) -> int:
    """The duration to plan with for a job predicted to run ``duration`` s that has run
    ``elapsed`` s and may run until ``limit`` s: ``duration`` while it is not overdue.
    A job already past its limit (a log's job may overrun its request) gets the limit, so
    it stays overdue and the core's one second applies."""
    if duration > elapsed or rule == "one-second":
        return duration
    if rule == "request":
        new = limit
    elif rule == "ladder":
        rung = bisect_right(LADDER, elapsed)
        new = LADDER[rung] if rung < len(LADDER) else limit
    else:  # doubling
        new = max(duration, 1)
        while new <= elapsed:
            new *= 2
    return min(new, limit)
