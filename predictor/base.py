"""The interface every run-time predictor implements.

Predictors follow scikit-learn's conventions: hyperparameters in ``__init__``, learned
state in attributes, ``observe`` is the only method that changes state. They never read
a clock: the prediction time ``t`` is an argument, and they learn only from jobs whose
``end`` is at or before it, which callers guarantee by observing in time order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from cpsched.core.problem import Job


@dataclass(frozen=True, slots=True)
class FinishedJob:
    job: Job
    start: int
    end: int

    @property
    def run_time(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Memory:
    """Which finished jobs a predictor's state depends on, so that a service can rebuild
    it after a restart from a bounded read of its history: each user's ``per_user``
    newest and the ``recent`` newest overall (``None``: every one).

    ``exact``: the state rebuilt from those jobs is the one the whole history gives
    (last-two: each user's two newest). Otherwise older jobs are forgotten by design.
    """

    per_user: int | None = 0
    recent: int | None = 0
    exact: bool = True


EVERYTHING = Memory(per_user=None, recent=None)
"""A predictor that needs its whole history (rebuilding it reads every stored job)."""


@runtime_checkable
class Explaining(Protocol):
    """A predictor that can say what a prediction rests on (the job page shows it)."""

    def basis(self, job: Job, t: int) -> str:
        """In words, what ``predict(job, t)`` answers from right now: which history,
        which model (the same state ``predict`` reads; no clock, no side effect)."""
        ...


@runtime_checkable
class Bounding(Protocol):
    """A predictor with an upper estimate beside its central one (``predict``): how long a
    job may run, on the safe side. The runtime plans running jobs with it, queued ones with
    the central estimate (:class:`cpsched.runtime.durations.DurationBook`)."""

    def upper(self, job: Job, t: int) -> int:
        """Seconds ``job`` may run, within ``[predict(job, t), job.time_limit]``."""
        ...

    def upper_basis(self, job: Job, t: int) -> str:
        """In words, what ``upper(job, t)`` rests on (as :meth:`Explaining.basis`)."""
        ...


@runtime_checkable
class Persisting(Protocol):
    """A predictor whose fitted model outlives the process: the service stores each new
    one and, after a restart, loads it back rather than fitting again (minutes of work
    on a long history, and predictions from the fallback meanwhile)."""

    @property
    def model_name(self) -> str:
        """The name its models are stored under: the learned predictor's own, whatever
        wraps it (a margin or an upper estimate changes no model)."""
        ...

    def fitted_model(self) -> object | None:
        """The model predictions come from now (a new object after every fit), or None."""
        ...

    def dump_model(self, model: Any) -> bytes:
        """``model`` (a :meth:`fitted_model`) as bytes to store."""
        ...

    def load_model(self, data: bytes) -> bool:
        """Predict with the stored ``data`` from now on; False, with nothing changed, when
        it does not suit this predictor (other settings, unreadable)."""
        ...


class Predictor(Protocol):
    name: str

    @property
    def memory(self) -> Memory:
        """The finished jobs its state depends on (:class:`Memory`)."""
        ...

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
