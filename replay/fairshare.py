"""A site's priority for replays: Slurm-like multifactor with fair share and age.

A trace records no priorities, so a replay under ``priority = "site"`` gives each queued
job the priority a site with Slurm's multifactor plugin would: a fair-share factor
``F = 2^(-U/S)`` (U: the user's share of the decayed usage of all users, S: an equal
share, 1 / users seen so far) and an age factor (time waited over ``max_age``, at most
1), weighted as sites commonly do (fair share 10,000, age 1,000). Usage is processor-
seconds, charged when a job ends and halved every ``half_life`` (Slurm's
PriorityDecayHalfLife, 7 days by default). Time is the simulated clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpsched.core.problem import Job

DAY = 86400


@dataclass(slots=True)
class FairShare:
    half_life: int = 7 * DAY
    max_age: int = 7 * DAY
    weight_fairshare: int = 10_000
    weight_age: int = 1_000
    _usage: dict[str, float] = field(default_factory=dict)
    _total: float = 0.0
    _at: int = 0

    def _decay_to(self, t: int) -> None:
        if t <= self._at:
            return
        factor = 0.5 ** ((t - self._at) / self.half_life)
        self._total *= factor
        for user in self._usage:
            self._usage[user] *= factor
        self._at = t

    def charge(self, job: Job, start: int, end: int) -> None:
        """Count a finished job's processor-seconds against its user."""
        self._decay_to(end)
        used = float(job.request[0]) * max(0, end - start)
        self._usage[job.user] = self._usage.get(job.user, 0.0) + used
        self._total += used

    def seen(self, job: Job) -> None:
        """A user with no usage yet still counts for the equal shares."""
        self._usage.setdefault(job.user, 0.0)

    def priority(self, job: Job, now: int) -> int:
        self._decay_to(now)
        share = 1.0 / max(1, len(self._usage))
        usage = self._usage.get(job.user, 0.0) / self._total if self._total > 0 else 0.0
        fairshare = 2.0 ** (-usage / share)
        age = min(1.0, max(0, now - job.submit) / self.max_age)
        return round(self.weight_fairshare * fairshare + self.weight_age * age)
