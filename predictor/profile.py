"""Job-profile heuristic (Galleguillos et al. 2017; Netti 2017, section 3).

A job's profile is (user, name, queue, requested time, requested resources). Jobs with
the same profile tend to run alike for a while (temporal locality), so a new job gets
the run time of the newest finished job of the same user that matches under the first
of these rules that finds one:

1. the whole profile is equal;
2. equal, except that the names only share a prefix;
3. equal, except the requested resources;
4. relaxations 2 and 3 together;
5. only the name, or its prefix, matches;
6. no match: the requested time.

**Name prefix rule.** Users number similar jobs incrementally (``run_1``, ``run_2``,
``sim-07.b``...), so a name's *stem* is the name with its trailing run of digits and the
separators ``_``, ``-``, ``.`` removed: ``run_1`` and ``run_2`` share ``run``. A name made
only of digits and separators keeps itself as its stem: in SWF traces the name is the
executable number, an identifier rather than a counter, so ``12`` must not match ``13``.
Two names "share a prefix" when their stems are equal. An empty name has the empty stem:
it can match another empty name only where the rest of the profile is compared too
(rules 1 to 4), and never under rule 5, where a name alone must carry the information.

**Newest.** By end time, ties broken by observation order, as in :mod:`predictor.lasttwo`.

**Cost.** One dict per rule maps the rule's key (user included) to the newest matching
job, so observe is five dict updates and predict at most five lookups, whatever the
length of the history. The newest match among jobs whose stems are equal is the newest
match under the relaxed rule, because an equal name implies an equal stem.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

from predictor.base import FinishedJob, clamp
from service.dispatch.problem import Job

_TRAILING_COUNTER = re.compile(r"[0-9_.\-]+$")

_Entry = tuple[int, int, int]
"""``(end, observation number, run time)``: tuple order is recency order."""

RULES: dict[int, str] = {
    1: "whole profile equal",
    2: "equal except the names only share a prefix",
    3: "equal except the requested resources",
    4: "names share a prefix and requested resources differ",
    5: "only the name (or its prefix) matches",
    6: "no match: requested time",
}


def name_stem(name: str) -> str:
    """The part of ``name`` that numbered variants share (see the module docstring)."""
    stem = _TRAILING_COUNTER.sub("", name)
    return stem if stem else name


def _keys(job: Job) -> tuple[Hashable | None, ...]:
    """The lookup key of rules 1 to 5 for ``job``; None where a rule cannot apply."""
    stem = name_stem(job.name)
    user, queue, limit = job.user, job.queue, job.time_limit
    return (
        (user, job.name, queue, limit, job.request),
        (user, stem, queue, limit, job.request),
        (user, job.name, queue, limit),
        (user, stem, queue, limit),
        (user, stem) if stem else None,
    )


class JobProfile:
    name = "profile"

    def __init__(self) -> None:
        self.tables_: tuple[dict[Hashable, _Entry], ...] = tuple({} for _ in range(5))
        """Rule r (1-5) -> its key -> the newest finished job with that key."""
        self.observed_: int = 0

    def observe(self, finished: FinishedJob) -> None:
        entry = (finished.end, self.observed_, finished.run_time)
        self.observed_ += 1
        for table, key in zip(self.tables_, _keys(finished.job), strict=True):
            if key is None:
                continue
            kept = table.get(key)
            if kept is None or entry > kept:
                table[key] = entry

    def explain(self, job: Job) -> tuple[int, int]:
        """``(rule number 1-6, unclamped run time it gives)`` for ``job``."""
        for rule, (table, key) in enumerate(zip(self.tables_, _keys(job), strict=True), 1):
            if key is None:
                continue
            found = table.get(key)
            if found is not None:
                return rule, found[2]
        return 6, job.time_limit

    def predict(self, job: Job, t: int) -> int:
        return clamp(self.explain(job)[1], job)
