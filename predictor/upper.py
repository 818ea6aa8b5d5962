"""An upper estimate beside the central one: a prediction's uncertainty, from its own errors.

A prediction says what a job will likely take; how far past it the job may run is what a
plan built around the job must survive. :class:`UpperQuantile` learns that from the
inner predictor's own errors, as split-conformal prediction does: for each finished job it
keeps the ratio of the job's run time to what the inner predictor says of it, per user
(the user's ``per_user`` latest) and overall (the ``recent`` latest). Its upper estimate
of a job is the central one times the ``quantile`` of the user's ratios, or of everyone's
while the user has fewer than ``min_user``; never below the central estimate, never past
the request.

``predict`` is the central estimate: queued jobs are ordered and planned with it. A job is
planned with ``upper`` from its start (:meth:`cpsched.runtime.durations.DurationBook.started`),
so that the running jobs' expected ends, which reservations and the CP models' plans rest
on, are on the safe side for users whose jobs the central estimate often under-estimates,
and unchanged for those it rarely does. Measured in docs/results/predictors.md.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor._wrapping import Wrapping
from cpsched.predictor.base import FinishedJob, Memory, Predictor, clamp

__all__ = ["UpperQuantile"]


class _Ratios:
    """The latest ``size`` ratios: in arrival order (to drop the oldest) and sorted (to
    read a quantile in O(1))."""

    __slots__ = ("arrived", "ordered", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.arrived: deque[float] = deque()
        self.ordered: list[float] = []

    def add(self, ratio: float) -> None:
        if len(self.arrived) == self.size:
            oldest = self.arrived.popleft()
            del self.ordered[bisect_left(self.ordered, oldest)]
        self.arrived.append(ratio)
        insort(self.ordered, ratio)

    def __len__(self) -> int:
        return len(self.arrived)

    def quantile(self, q: float) -> float:
        """The conformal ``q`` quantile: the ``⌈q (n + 1)⌉``-th smallest of ``n`` ratios
        (the largest when that is past ``n``)."""
        ordered = self.ordered
        k = min(len(ordered), math.ceil(q * (len(ordered) + 1))) - 1
        return ordered[k]


class _Lookahead:
    """Where a rebuild stands: jobs still to come, overall and per user, and how many of
    the last of each the ratio windows keep."""

    __slots__ = ("left", "per_user", "recent", "users")

    def __init__(self, count: int, users: dict[str, int], recent: int, per_user: int) -> None:
        self.left = count
        self.users = users
        self.recent = recent
        self.per_user = per_user

    def kept(self, user: str) -> bool:
        """Whether the job being observed (of ``user``) is among the ``recent`` last or
        its user's ``per_user`` last, counting it."""
        left, user_left = self.left, self.users.get(user, 0)
        self.left = left - 1
        self.users[user] = user_left - 1
        return left <= self.recent or user_left <= self.per_user


class UpperQuantile(Wrapping):
    """``inner``'s prediction as the central estimate, and an upper one from its errors."""

    def __init__(
        self,
        inner: Predictor,
        quantile: float,
        *,
        per_user: int = 20,
        recent: int = 2_000,
        min_user: int = 5,
    ) -> None:
        if not 0 < quantile < 1:
            raise ConfigError(f"an upper estimate's quantile must be in (0, 1), got {quantile}")
        if min(per_user, recent, min_user) < 1 or min_user > per_user:
            raise ConfigError(
                "an upper estimate needs per_user, recent and min_user >= 1 and "
                f"min_user <= per_user, got {per_user}, {recent}, {min_user}"
            )
        super().__init__(inner)
        self.quantile = quantile
        self.per_user = per_user
        self.recent = recent
        self.min_user = min_user
        self.name = f"{inner.name}+upper{quantile:g}"
        self.users_: dict[str, _Ratios] = {}
        self.overall_ = _Ratios(recent)
        self._rebuild: _Lookahead | None = None

    @property
    def memory(self) -> Memory:
        inner = self.inner.memory

        def plus(a: int | None, b: int) -> int | None:
            # The jobs before each of the ``b`` whose ratios are kept, for what the inner
            # predictor said of it then.
            return None if a is None else a + b

        return Memory(
            per_user=plus(inner.per_user, self.per_user),
            recent=plus(inner.recent, self.recent),
            exact=False,  # a learned inner predictor's model then is not rebuilt
        )

    @contextmanager
    def rebuilding(self, count: int, users: Mapping[str, int] | None = None) -> Iterator[None]:
        """The inner predictor's rebuild of ``count`` jobs; with ``users`` (how many of
        them each user has), the ratios the windows would drop by the end are not worked
        out: each needs the inner predictor's answer (about 40 µs with a learned model),
        and of a long history only the ``recent`` latest and each user's ``per_user``
        latest are kept. The ratios kept are the same."""
        self._rebuild = (
            None if users is None else _Lookahead(count, dict(users), self.recent, self.per_user)
        )
        try:
            with super().rebuilding(count, users):
                yield
        finally:
            self._rebuild = None

    def observe(self, finished: FinishedJob) -> None:
        user = finished.job.user
        if self._rebuild is not None and not self._rebuild.kept(user):
            self.inner.observe(finished)  # its ratio would be dropped before the end
            return
        # What the inner predictor says of the job at its start, before it learns the job.
        central = self.inner.predict(finished.job, finished.start)
        ratio = finished.run_time / central
        ratios = self.users_.get(user)
        if ratios is None:
            ratios = self.users_[user] = _Ratios(self.per_user)
        ratios.add(ratio)
        self.overall_.add(ratio)
        self.inner.observe(finished)

    def predict(self, job: Job, t: int) -> int:
        return self.inner.predict(job, t)

    def basis(self, job: Job, t: int) -> str:
        return self.inner_basis(job, t)

    def _factor(self, user: str) -> tuple[float, str]:
        """The ratio the central estimate is multiplied by, and whose ratios gave it."""
        ratios = self.users_.get(user)
        if ratios is not None and len(ratios) >= self.min_user:
            return ratios.quantile(self.quantile), f"the user's {len(ratios)} latest"
        if self.overall_:
            have = 0 if ratios is None else len(ratios)
            return (
                self.overall_.quantile(self.quantile),
                f"all users' {len(self.overall_)} latest (the user has {have})",
            )
        return 1.0, "no finished jobs yet"

    def upper(self, job: Job, t: int) -> int:
        factor, _ = self._factor(job.user)
        central = self.inner.predict(job, t)
        return clamp(central * factor, job) if factor > 1 else central

    def upper_basis(self, job: Job, t: int) -> str:
        factor, whose = self._factor(job.user)
        return (
            f"{max(factor, 1.0):.2f} times {self.inner_basis(job, t)} (the {self.quantile:g} "
            f"quantile of run time over that prediction in {whose} finished jobs), at most "
            "the requested time"
        )
