"""The oracle (replay only): the run time the trace says the job had.

It bounds what any predictor could achieve; it cannot exist in the service, where the
future is unknown, so it is built from a mapping the replay supplies.
"""

from __future__ import annotations

from collections.abc import Mapping

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor.base import FinishedJob, Memory, clamp


class Oracle:
    name = "oracle"
    memory = Memory()  # nothing: the answers are given

    def __init__(self, run_times: Mapping[str, int]) -> None:
        self.run_times = run_times
        """Job id -> real run time in seconds."""

    def observe(self, finished: FinishedJob) -> None:
        """Nothing to learn: the answer is known in advance."""

    def predict(self, job: Job, t: int) -> int:
        try:
            real = self.run_times[job.id]
        except KeyError:
            # A job outside the replayed trace means the oracle was wired to the wrong data.
            raise ConfigError(f"oracle has no run time for job {job.id!r}") from None
        return clamp(real, job)

    def basis(self, job: Job, t: int) -> str:
        return "the trace's real run time"
