"""What a predictor that wraps another forwards to it: learning, rebuilds, refits, its
stored model, shutdown."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

from cpsched.core.problem import Job
from cpsched.predictor.base import Explaining, FinishedJob, Memory, Persisting, Predictor


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
    def rebuilding(self, count: int, users: Mapping[str, int] | None = None) -> Iterator[None]:
        """The inner predictor's rebuild of ``count`` jobs (a learned predictor fits once,
        at its end), where it has one; ``users``: how many of them each user has."""
        inner = getattr(self.inner, "rebuilding", None)
        with inner(count, users) if inner is not None else nullcontext():
            yield

    def retrain_if_owed(self) -> None:
        """The inner predictor's owed refit (a learned predictor's), where it has one."""
        retrain = getattr(self.inner, "retrain_if_owed", None)
        if retrain is not None:
            retrain()

    @property
    def model_name(self) -> str:
        inner = self.inner
        return inner.model_name if isinstance(inner, Persisting) else inner.name

    def fitted_model(self) -> object | None:
        """The inner predictor's fitted model, where it keeps one."""
        inner = self.inner
        return inner.fitted_model() if isinstance(inner, Persisting) else None

    def dump_model(self, model: Any) -> bytes:
        if not isinstance(self.inner, Persisting):
            raise TypeError(f"{self.inner.name} keeps no model")
        return self.inner.dump_model(model)

    def load_model(self, data: bytes) -> bool:
        inner = self.inner
        return inner.load_model(data) if isinstance(inner, Persisting) else False

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
