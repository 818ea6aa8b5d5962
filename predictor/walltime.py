"""The wall-time approach: a job runs for as long as its user asked for."""

from __future__ import annotations

from cpsched.core.problem import Job
from cpsched.predictor.base import FinishedJob, Memory


class WallTime:
    name = "wall-time"
    memory = Memory()  # nothing

    def observe(self, finished: FinishedJob) -> None:
        """Nothing to learn."""

    def predict(self, job: Job, t: int) -> int:
        return job.time_limit

    def basis(self, job: Job, t: int) -> str:
        return "the requested time"
