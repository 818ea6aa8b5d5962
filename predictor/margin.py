"""A predictor's answers times a margin: what the plan assumes of a job, on the safe side.

An under-estimate costs a schedule more than an over-estimate: a running job predicted to
end soon that runs on breaks the plan built on its nodes (and, with the ``request``
overrun rule, is then planned to its limit), where one predicted long only loses a
backfill chance. :class:`Margin` makes every prediction ``factor`` times longer, never past
the request; the policy applies it to queued and running jobs alike, so that a job keeps
its place in the plan when it starts (measured on replays in docs/results/predictors.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor.base import Explaining, FinishedJob, Memory, Predictor, clamp


class Margin:
    """``inner``'s prediction times ``factor``, within ``[1 s, requested time]``."""

    def __init__(self, inner: Predictor, factor: float) -> None:
        if not factor > 0:
            raise ConfigError(f"a prediction margin must be > 0, got {factor}")
        self.inner = inner
        self.factor = factor
        self.name = f"{inner.name}x{factor:g}"

    @property
    def memory(self) -> Memory:
        return self.inner.memory

    def observe(self, finished: FinishedJob) -> None:
        self.inner.observe(finished)

    def predict(self, job: Job, t: int) -> int:
        return clamp(self.inner.predict(job, t) * self.factor, job)

    def basis(self, job: Job, t: int) -> str:
        inner = self.inner
        said = inner.basis(job, t) if isinstance(inner, Explaining) else inner.name
        return f"{self.factor:g} times {said}, at most the requested time"

    @contextmanager
    def rebuilding(self, count: int) -> Iterator[None]:
        """The inner predictor's rebuild of ``count`` jobs (AdaBoost fits once, at its
        end), where it has one."""
        inner = getattr(self.inner, "rebuilding", None)
        with inner(count) if inner is not None else nullcontext():
            yield

    def retrain_if_owed(self) -> None:
        """The inner predictor's owed refit (a learned predictor's), where it has one."""
        retrain = getattr(self.inner, "retrain_if_owed", None)
        if retrain is not None:
            retrain()

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
