"""Job-profile heuristic (Galleguillos et al. 2017; Netti 2017, section 3).

A job's profile is (user, name, queue, requested time, requested resources). Jobs with
the same profile tend to run alike for a while (temporal locality), so a new job gets
the run time of the newest finished jobs of the same user that match under the first of
these rules that finds one (the median of the newest few, see "What a match predicts"):

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

**What a match predicts** (``matches``, default 11). The paper takes the run time of the
single newest match. A job profile holds the same program with the same request, whose
run times still scatter (inputs, failures, early exits); the median of the ``matches``
newest jobs that match under the rule that fired is the best constant guess for an
absolute error and lets one outlier not steer the next prediction. ``matches=1`` is the
paper's rule. Measured with :func:`predictor.accuracy.evaluate` on the five full traces
(MAE relative to ``matches=1``): 3 → -0.5 to -10.5%, 5 → -1 to -8%, 11 → -1 to -11%
(KTH -5.5%, CTC -3.8%, HPC2N -10.7%, Curie -8.3%, MetaCentrum -2.3%), 15 about as 11.
Odd, so the median is one of the observed run times once enough matches exist.

**No match** (``fallback``). Rule 6 gives the requested time (``"requested"``, the
default, as the job-profile method states it). ``"last-two"`` gives the user's last-two
mean instead (the requested time still when the user has no finished job): with ``matches=11`` it
lowers the MAE on CTC by 13%, HPC2N 13%, Curie 3% and MetaCentrum 58% (whose requested
times are all 30 days) but raises it on KTH by 5%. It departs from the paper's rule 6,
so it is an option, not the default.

**Cost.** One dict per rule maps the rule's key (user included) to the newest
``matches`` matching jobs (``late`` more when asked), so observe is five small
sorted-list inserts and predict at most five lookups and one median of at most
``matches`` values, whatever the length of the history. The newest matches among jobs
whose stems are equal are the newest matches under the relaxed rule, because an equal
name implies an equal stem.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections.abc import Hashable
from itertools import islice
from typing import Literal, get_args

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor.base import FinishedJob, Memory, clamp
from cpsched.predictor.lasttwo import LastTwo

_TRAILING_COUNTER = re.compile(r"[0-9_.\-]+$")

_Entry = tuple[int, int, int]
"""``(end, observation number, run time)``: tuple order is recency order."""

RULES: dict[int, str] = {
    1: "whole profile equal",
    2: "equal except the names only share a prefix",
    3: "equal except the requested resources",
    4: "names share a prefix and requested resources differ",
    5: "only the name (or its prefix) matches",
    6: "no match: requested time (or the user's last-two mean, if so configured)",
}
Fallback = Literal["requested", "last-two"]

PER_USER_MEMORY = 32
"""Each user's newest jobs a rebuild after a restart reads (see :class:`Memory`): at
least the matches AdaBoost's profile feature keeps per key (11 + 16). With 300, 2,000
users made a rebuild of 650,000 jobs."""
RECENT_MEMORY = 50_000
"""The newest jobs overall a rebuild after a restart reads besides."""


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

    def __init__(
        self, *, matches: int = 11, fallback: Fallback = "requested", late: int = 0
    ) -> None:
        if matches < 1 or late < 0:
            raise ConfigError(f"profile matches must be >= 1 and late >= 0, got {matches}, {late}")
        if fallback not in get_args(Fallback):
            raise ConfigError(f"profile fallback must be one of {get_args(Fallback)}")
        self.matches = matches
        self.fallback = fallback
        self.late = late
        """Extra newest jobs kept per key, so that :meth:`matched` with ``before`` still
        finds ``matches`` jobs that had ended by an earlier time (AdaBoost builds its
        training rows as of each job's submit time)."""
        self.memory = Memory(
            per_user=max(PER_USER_MEMORY, matches + late), recent=RECENT_MEMORY, exact=False
        )
        """A rebuild reads each user's newest 32 jobs (at least the matches kept per key)
        and the newest 50,000: a profile key (user included) seen only before both is
        forgotten."""
        self.tables_: tuple[dict[Hashable, list[_Entry]], ...] = tuple({} for _ in range(5))
        """Rule r (1-5) -> its key -> the newest ``matches + late`` jobs with that key,
        ascending."""
        self.last_two_ = LastTwo()
        self.observed_: int = 0

    def observe(self, finished: FinishedJob) -> None:
        entry = (finished.end, self.observed_, finished.run_time)
        self.observed_ += 1
        self.last_two_.observe(finished)
        kept_per_key = self.matches + self.late
        for table, key in zip(self.tables_, _keys(finished.job), strict=True):
            if key is None:
                continue
            kept = table.setdefault(key, [])
            bisect.insort(kept, entry)
            if len(kept) > kept_per_key:
                del kept[0]

    def matched(self, job: Job, before: int | None = None) -> tuple[int, list[int]]:
        """``(rule 1-5, run times of its newest matches)``, or ``(6, [])`` for no match.

        With ``before``, only jobs that had ended by then count. Run times come newest
        first, at most ``matches`` of them.
        """
        for rule, (table, key) in enumerate(zip(self.tables_, _keys(job), strict=True), 1):
            if key is None:
                continue
            found = table.get(key)
            if not found:
                continue
            if before is None:
                runs = [run for _, _, run in reversed(found[-self.matches :])]
            else:
                ended = (run for end, _, run in reversed(found) if end <= before)
                runs = list(islice(ended, self.matches))
            if runs:
                return rule, runs
        return 6, []

    def explain(self, job: Job) -> tuple[int, float]:
        """``(rule number 1-6, unclamped run time it gives)`` for ``job``."""
        rule, runs = self.matched(job)
        if runs:
            return rule, statistics.median(runs)
        if self.fallback == "last-two":
            mean = self.last_two_.mean(job.user)
            if mean is not None:
                return 6, mean
        return 6, job.time_limit

    def predict(self, job: Job, t: int) -> int:
        return clamp(self.explain(job)[1], job)

    def basis(self, job: Job, t: int) -> str:
        rule, runs = self.matched(job)
        if runs:
            jobs = "job" if len(runs) == 1 else f"{len(runs)} jobs"
            matching = f"rule {rule}: {RULES[rule]}"
            return f"the median run time of the user's newest matching {jobs} ({matching})"
        if self.fallback == "last-two" and self.last_two_.mean(job.user) is not None:
            return f"no matching job: {self.last_two_.basis(job, t)}"
        return "no matching job: the requested time"
