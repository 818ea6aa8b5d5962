"""Feature rows for :class:`predictor.adaboost.AdaBoost`, as of a given time.

A training row must look like what ``predict`` saw when the job was submitted, so every
history feature is computed from the jobs that had *ended* by a time ``before``: the
job's submit time for a training row, "everything observed" for a prediction (observed
jobs have all ended by the prediction time). Only the newest ``_KEPT`` jobs per user are
kept; a training row whose job waited and ran while more than that many of the user's
jobs ended sees fewer recent jobs than were known at its submission, a rare and small
difference.

Features (:data:`FEATURES`):

* ``user``, ``queue``, ``name``: integer codes in order of first appearance (a name is
  coded by its :func:`~predictor.profile.name_stem`); a value not yet observed gets the
  next unused code, since ``predict`` must not assign any;
* ``cores`` and ``mem``: the job's whole request of the types named ``cpu`` and ``mem``
  (0 when it has none, or its types are not named),
  ``time_limit`` (requested seconds), ``log_time_limit``, ``hour`` (of day) and
  ``weekday`` of the submit time;
* the user's recent run times: ``last``, ``last_two`` (mean of the last two), and over
  the last ``recent`` jobs ``recent_mean``, ``recent_median``, ``recent_min``,
  ``recent_max``, and ``recent_ratio`` (requested time × the mean of their run /
  requested ratios: a user who uses a tenth of what they ask keeps doing so);
* ``profile``: the job-profile heuristic's answer (median of the newest matches under
  the first of rules 1-5 that finds one, else the user's last-two mean) and
  ``profile_rule`` (1-6, which rule answered: how much to trust ``profile``).

A history feature of a user with no finished job is the requested time (the wall-time
prediction), ``profile_rule`` is then 6.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence

from cpsched.core.problem import Job
from cpsched.predictor.base import FinishedJob
from cpsched.predictor.profile import JobProfile, name_stem

FEATURES: tuple[str, ...] = (
    "user", "cores", "mem", "time_limit", "queue", "name", "hour", "last_two",
    "log_time_limit", "weekday", "last", "recent_mean", "recent_median", "recent_min",
    "recent_max", "recent_ratio", "profile", "profile_rule",
)  # fmt: skip
_CODED = ("user", "queue", "name")
_KEPT = 16
"""Finished jobs kept per user (and per profile key beyond ``profile_matches``), enough to
look back from a job's submit time past the jobs that ended while it waited and ran."""
_NOW: int | None = None
"""``before`` for a prediction: every observed job counts."""

_Entry = tuple[int, int, int, int]
"""``(end, observation number, run time, requested time)``: tuple order is recency order."""


class FeatureState:
    """What the features need to remember of the finished jobs, and the rows they make."""

    def __init__(
        self,
        features: Sequence[str],
        *,
        recent: int,
        profile_matches: int,
    ) -> None:
        self.features = tuple(features)
        self.recent = recent
        self.codes_: dict[str, dict[str, int]] = {kind: {} for kind in _CODED}
        self.recent_: dict[str, list[_Entry]] = {}
        """User -> up to ``_KEPT`` newest finished jobs, ascending."""
        needs_profile = {"profile", "profile_rule"} & set(self.features)
        self.profile_ = JobProfile(matches=profile_matches, late=_KEPT) if needs_profile else None

    def observe(self, finished: FinishedJob, observation: int) -> None:
        """Remember ``finished``. Call after its training row was built (see :meth:`row`)."""
        job = finished.job
        # Codes are assigned after the row is built, so a first-seen value gets the same
        # "next unused" code in training that it gets at prediction time.
        for kind, value in zip(_CODED, (job.user, job.queue, name_stem(job.name)), strict=True):
            self.codes_[kind].setdefault(value, len(self.codes_[kind]))
        recent = self.recent_.setdefault(job.user, [])
        bisect.insort(recent, (finished.end, observation, finished.run_time, job.time_limit))
        if len(recent) > _KEPT:
            del recent[0]
        if self.profile_ is not None:
            self.profile_.observe(finished)

    def _code(self, kind: str, value: str) -> int:
        codes = self.codes_[kind]
        return codes.get(value, len(codes))

    def _ended(self, user: str, before: int | None) -> list[_Entry]:
        """The user's kept jobs that had ended by ``before`` (all if None), newest first."""
        kept = self.recent_.get(user, [])
        if before is None:
            return kept[::-1]
        return [entry for entry in reversed(kept) if entry[0] <= before]

    def recent_runs(self, user: str) -> list[int]:
        """The run times of ``user``'s ``recent`` newest finished jobs, newest first."""
        return [entry[2] for entry in self._ended(user, _NOW)[: self.recent]]

    def row(self, job: Job, before: int | None = _NOW) -> list[float]:
        """``job``'s feature row, from the jobs that had ended by ``before``."""
        limit = job.time_limit
        ended = self._ended(job.user, before)
        runs = [entry[2] for entry in ended[: self.recent]]
        two = [entry[2] for entry in ended[:2]]
        last_two = sum(two) / len(two) if two else float(limit)
        values: dict[str, float] = {}
        row: list[float] = []
        for feature in self.features:
            if feature == "user":
                row.append(self._code("user", job.user))
            elif feature == "queue":
                row.append(self._code("queue", job.queue))
            elif feature == "name":
                row.append(self._code("name", name_stem(job.name)))
            elif feature == "cores":
                row.append(job.amount("cpu"))
            elif feature == "mem":
                row.append(job.amount("mem"))
            elif feature == "time_limit":
                row.append(limit)
            elif feature == "log_time_limit":
                row.append(math.log(limit))
            elif feature == "hour":
                row.append(job.submit % 86_400 // 3_600)
            elif feature == "weekday":
                row.append(job.submit // 86_400 % 7)
            elif feature == "last_two":
                row.append(last_two)
            elif feature.startswith("recent_") or feature == "last":
                row.append(_recent_feature(feature, runs, ended[: self.recent], limit))
            else:  # profile, profile_rule
                if not values:
                    values.update(self._profile(job, before, last_two))
                row.append(values[feature])
        return row

    def _profile(self, job: Job, before: int | None, last_two: float) -> dict[str, float]:
        assert self.profile_ is not None
        rule, runs = self.profile_.matched(job, before)
        value = statistics.median(runs) if runs else last_two
        return {"profile": value, "profile_rule": rule}


def _recent_feature(feature: str, runs: list[int], ended: list[_Entry], limit: int) -> float:
    if not runs:
        return float(limit)
    if feature == "last":
        return runs[0]
    if feature == "recent_mean":
        return sum(runs) / len(runs)
    if feature == "recent_median":
        return statistics.median(runs)
    if feature == "recent_min":
        return min(runs)
    if feature == "recent_max":
        return max(runs)
    # recent_ratio
    return limit * sum(run / requested for _, _, run, requested in ended) / len(ended)
