"""What a predictor that wraps another forwards to it: learning, rebuilds, refits, shutdown."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from cpsched.core.problem import Job
from cpsched.predictor.base import Explaining, FinishedJob, Memory, Predictor


class Wrapping:
    """A predictor built on ``inner``: learns through it and passes on the hooks a learned
    predictor has (a rebuild's single fit, an owed background refit, its thread's shutdown)."""

    def __init__(self, inner: Predictor) -> None:
        self.inner = inner

    @property
    def memory(self) -> Memory:
        return self.inner.memory

    def observe(self, finished: FinishedJob) -> None:
        self.inner.observe(finished)

    def inner_basis(self, job: Job, t: int) -> str:
        """What the inner predictor's answer rests on, or its name where it cannot say."""
        inner = self.inner
        return inner.basis(job, t) if isinstance(inner, Explaining) else inner.name

    @contextmanager
    def rebuilding(self, count: int) -> Iterator[None]:
        """The inner predictor's rebuild of ``count`` jobs (a learned predictor fits once,
        at its end), where it has one."""
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
