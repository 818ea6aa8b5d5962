"""Last-two (Tsafrir, Etsion, Feitelson 2007): a user's next job runs like their last two."""

from __future__ import annotations

from cpsched.core.problem import Job
from cpsched.predictor.base import FinishedJob, Memory, clamp

_Entry = tuple[int, int, int]
"""``(end, observation number, run time)``: ordered by recency, later observation wins ties."""


class LastTwo:
    """Mean run time of the same user's two most recently finished jobs.

    "Most recent" is by end time, ties broken by observation order (the later observed is
    the more recent), so observing in a slightly different order than end order still keeps
    the right two. One past job gives its run time; none gives the requested time.
    Observe and predict are O(1): only the two newest entries per user are kept.
    """

    name = "last-two"
    memory = Memory(per_user=2)

    def __init__(self) -> None:
        self.recent_: dict[str, tuple[_Entry, _Entry | None]] = {}
        """User -> (newest, second newest or None)."""
        self.observed_: int = 0

    def observe(self, finished: FinishedJob) -> None:
        entry = (finished.end, self.observed_, finished.run_time)
        self.observed_ += 1
        user = finished.job.user
        kept = self.recent_.get(user)
        if kept is None:
            self.recent_[user] = (entry, None)
            return
        first, second = kept
        if entry > first:
            self.recent_[user] = (entry, first)
        elif second is None or entry > second:
            self.recent_[user] = (first, entry)

    def mean(self, user: str) -> float | None:
        """Unclamped last-two mean of ``user``, or None when they have no finished job."""
        kept = self.recent_.get(user)
        if kept is None:
            return None
        first, second = kept
        if second is None:
            return float(first[2])
        return (first[2] + second[2]) / 2

    def basis(self, job: Job, t: int) -> str:
        kept = self.recent_.get(job.user)
        if kept is None:
            return "the requested time: the user has no finished job yet"
        first, second = kept
        if second is None:
            return f"the run time of the user's one finished job ({first[2]} s)"
        return (
            f"the mean run time of the user's two latest finished jobs ({first[2]} s and "
            f"{second[2]} s)"
        )

    def predict(self, job: Job, t: int) -> int:
        value = self.mean(job.user)
        return clamp(job.time_limit if value is None else value, job)
