"""The interface every run-time predictor implements.

Predictors follow scikit-learn's conventions: hyperparameters in ``__init__``, learned
state in attributes, ``observe`` is the only method that changes state. They never read
a clock: the prediction time ``t`` is an argument, and they learn only from jobs whose
``end`` is at or before it, which callers guarantee by observing in time order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cpsched.core.problem import Job


@dataclass(frozen=True, slots=True)
class FinishedJob:
    job: Job
    start: int
    end: int

    @property
    def run_time(self) -> int:
        return self.end - self.start


class Predictor(Protocol):
    name: str

    def observe(self, finished: FinishedJob) -> None:
        """Learn from a job that has finished."""
        ...

    def predict(self, job: Job, t: int) -> int:
        """Seconds ``job`` is expected to run, within ``[1, job.time_limit]``."""
        ...


def clamp(seconds: float, job: Job) -> int:
    """A prediction within ``[1 s, requested time]``: a job is killed at its limit anyway."""
    value = round(seconds)
    if value < 1:
        return 1
    return min(value, job.time_limit)
