"""A predictor's answers times a margin: what the plan assumes of a job, on the safe side.

An under-estimate costs a schedule more than an over-estimate: a running job predicted to
end soon that runs on breaks the plan built on its nodes (and, with the ``request``
overrun rule, is then planned to its limit), where one predicted long only loses a
backfill chance. :class:`Margin` makes every prediction ``factor`` times longer, never past
the request; the policy applies it to queued and running jobs alike, so that a job keeps
its place in the plan when it starts (measured on replays in docs/results/predictors.md).
An inner predictor's upper estimate, which running jobs are planned with, is scaled too.
"""

from __future__ import annotations

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor._wrapping import Wrapping
from cpsched.predictor.base import Bounding, Predictor, clamp


class Margin(Wrapping):
    """``inner``'s prediction times ``factor``, within ``[1 s, requested time]``."""

    def __init__(self, inner: Predictor, factor: float) -> None:
        if not factor > 0:
            raise ConfigError(f"a prediction margin must be > 0, got {factor}")
        super().__init__(inner)
        self.factor = factor
        self.name = f"{inner.name}x{factor:g}"

    def predict(self, job: Job, t: int) -> int:
        return clamp(self.inner.predict(job, t) * self.factor, job)

    def basis(self, job: Job, t: int) -> str:
        return f"{self.factor:g} times {self.inner_basis(job, t)}, at most the requested time"

    def upper(self, job: Job, t: int) -> int:
        """The inner upper estimate times ``factor`` (its prediction where it has none)."""
        inner = self.inner
        value = inner.upper(job, t) if isinstance(inner, Bounding) else inner.predict(job, t)
        return clamp(value * self.factor, job)

    def upper_basis(self, job: Job, t: int) -> str:
        inner = self.inner
        said = (
            inner.upper_basis(job, t) if isinstance(inner, Bounding) else self.inner_basis(job, t)
        )
        return f"{self.factor:g} times {said}, at most the requested time"
