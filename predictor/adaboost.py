"""AdaBoost regression over decision trees (the COARE study's walltime predictor).

Each finished job becomes one training row; the newest ``window`` rows are kept, so
training cost is bounded however long the service runs. The model is refitted after
every ``retrain_every`` observations:

* deterministic (``background=False``, replay): synchronously inside ``observe``, so a
  replay is reproducible (``random_state`` fixes the boosting's resampling);
* background (``background=True``, service): on a snapshot copy of the rows in a
  one-thread executor; the fitted model replaces the old one by a single attribute
  assignment, and ``predict`` never waits. At most one fit runs at a time: a refit that
  falls due while one is running is *owed* and starts at the first ``observe`` after the
  running one has finished, on the newest rows; several owed refits collapse into one.
  A failed fit keeps the previous model; its exception stays on ``training_``.
  ``observe`` and ``predict`` are meant to be called from one thread; only fits run on
  the executor's.

Until the first model exists, predictions come from a composed :class:`LastTwo`.

Features (:data:`FEATURES`): ``user``, ``queue`` and ``name`` are integer codes in order
of first appearance (a name is coded by its :func:`~predictor.profile.name_stem`; a value
not yet observed gets the next unused code, since ``predict`` must not assign any);
``cores`` is ``request[0]``; ``mem`` is ``request[mem_index]`` (0 when absent);
``time_limit`` the requested seconds and ``log_time_limit`` its logarithm; ``hour`` the
hour of day of the submit time; ``last_two`` the user's last-two mean (the requested
time when the user has no finished job). A training row's ``last_two`` is taken as of
the job's submit time, from the user's jobs that had ended by then, so that rows look
like what ``predict`` sees.

Defaults, measured with :func:`predictor.accuracy.evaluate` on the KTH, CTC and HPC2N
traces (mean absolute error): ``last_two`` lowers it by 2.5-4.3% on all three, so it is
on; ``hour`` and ``queue``/``name`` raise it by 1-1.5%, and ``log_time_limit`` changes
nothing (trees split on order, which a logarithm keeps), so they are off. A
``log(run time)`` target raised it by 35-60% (leaves average logarithms, i.e. a
geometric mean, far below the median of a bimodal run-time distribution), so the target
is seconds. ``absolute_error`` trees (median leaves, what the absolute error rewards)
beat ``squared_error`` ones by 3-5% for about five times the fitting time; few shallow
trees with a small learning rate did best, as more boosting rounds chase outliers.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Literal, get_args

import numpy as np

from cpsched.errors import ConfigError
from predictor._forest import Forest
from predictor.base import FinishedJob, clamp
from predictor.lasttwo import LastTwo
from predictor.profile import name_stem
from service.dispatch.problem import Job

FEATURES: tuple[str, ...] = (
    "user", "cores", "mem", "time_limit", "queue", "name", "hour", "last_two", "log_time_limit",
)  # fmt: skip
DEFAULT_FEATURES: tuple[str, ...] = ("user", "cores", "mem", "time_limit", "last_two")
_CODED = ("user", "queue", "name")
Loss = Literal["linear", "square", "exponential"]
Criterion = Literal["absolute_error", "squared_error", "friedman_mse", "poisson"]
_RECENT = 16
"""Finished jobs kept per user to find the last two that had ended by a given time."""


class AdaBoost:
    name = "adaboost"

    def __init__(
        self,
        *,
        features: Sequence[str] = DEFAULT_FEATURES,
        log_target: bool = False,
        n_estimators: int = 10,
        max_depth: int = 8,
        learning_rate: float = 0.1,
        loss: Loss = "linear",
        criterion: Criterion = "absolute_error",
        window: int = 20_000,
        retrain_every: int = 1_000,
        mem_index: int | None = 1,
        random_state: int = 0,
        background: bool = False,
    ) -> None:
        unknown = sorted(set(features) - set(FEATURES))
        if unknown or not features:
            raise ConfigError(f"adaboost features must be a non-empty subset of {FEATURES}")
        if min(window, retrain_every, n_estimators, max_depth) < 1 or learning_rate <= 0:
            raise ConfigError(
                "adaboost window, retrain_every, n_estimators and max_depth must be >= 1 "
                "and learning_rate > 0"
            )
        if loss not in get_args(Loss) or criterion not in get_args(Criterion):
            raise ConfigError(
                f"adaboost loss must be one of {get_args(Loss)} and criterion one of "
                f"{get_args(Criterion)}, got {loss!r} and {criterion!r}"
            )
        self.features = tuple(features)
        self.log_target = log_target
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.loss = loss
        self.criterion = criterion
        self.window = window
        self.retrain_every = retrain_every
        self.mem_index = mem_index
        self.random_state = random_state
        self.background = background

        self.fallback_ = LastTwo()
        self.codes_: dict[str, dict[str, int]] = {kind: {} for kind in _CODED}
        self.recent_: dict[str, list[tuple[int, int, int]]] = {}
        """User -> up to ``_RECENT`` newest (end, observation number, run time), ascending."""
        self.rows_ = np.zeros((window, len(self.features)))
        self.targets_ = np.zeros(window)
        self.observed_ = 0
        self.model_: Forest | None = None
        self.training_: Future[Forest] | None = None
        """The latest background fit; tests and shutdown may wait on it."""
        self._owed = False
        self._executor: ThreadPoolExecutor | None = None

    # -- features ---------------------------------------------------------------------

    def _code(self, kind: str, value: str) -> int:
        codes = self.codes_[kind]
        return codes.get(value, len(codes))

    def _row(self, job: Job, last_two: float | None) -> list[float]:
        row: list[float] = []
        for feature in self.features:
            if feature == "user":
                row.append(self._code("user", job.user))
            elif feature == "cores":
                row.append(job.request[0] if job.request else 0)
            elif feature == "mem":
                i = self.mem_index
                row.append(job.request[i] if i is not None and i < len(job.request) else 0)
            elif feature == "time_limit":
                row.append(job.time_limit)
            elif feature == "log_time_limit":
                row.append(math.log(job.time_limit))
            elif feature == "queue":
                row.append(self._code("queue", job.queue))
            elif feature == "name":
                row.append(self._code("name", name_stem(job.name)))
            elif feature == "hour":
                row.append(job.submit % 86_400 // 3_600)
            else:  # last_two
                row.append(job.time_limit if last_two is None else last_two)
        return row

    def _last_two_before(self, user: str, t: int) -> float | None:
        """The user's last-two mean counting only jobs that had ended by ``t``."""
        ended = [run for end, _, run in reversed(self.recent_.get(user, ())) if end <= t][:2]
        return sum(ended) / len(ended) if ended else None

    # -- learning ---------------------------------------------------------------------

    def observe(self, finished: FinishedJob) -> None:
        job = finished.job
        row = self._row(job, self._last_two_before(job.user, job.submit))
        slot = self.observed_ % self.window
        self.rows_[slot] = row
        self.targets_[slot] = (
            math.log(max(finished.run_time, 1)) if self.log_target else finished.run_time
        )
        # Codes are assigned after the row is built, so a first-seen value gets the same
        # "next unused" code in training that it gets at prediction time.
        for kind, value in zip(_CODED, (job.user, job.queue, name_stem(job.name)), strict=True):
            self.codes_[kind].setdefault(value, len(self.codes_[kind]))
        recent = self.recent_.setdefault(job.user, [])
        bisect.insort(recent, (finished.end, self.observed_, finished.run_time))
        if len(recent) > _RECENT:
            del recent[0]
        self.fallback_.observe(finished)
        self.observed_ += 1
        if self.observed_ % self.retrain_every == 0:
            self._owed = True
        if self._owed:
            self._start_training()

    def _snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the kept rows, oldest first (so the fit sees the same order every time)."""
        n = self.observed_
        if n <= self.window:
            return self.rows_[:n].copy(), self.targets_[:n].copy()
        start = n % self.window
        order = np.r_[start : self.window, 0:start]
        return self.rows_[order], self.targets_[order]

    def _fit(self, rows: np.ndarray, targets: np.ndarray, trained_on: int) -> Forest:
        # Imported on first fit: scikit-learn takes seconds to import, and every CLI run
        # imports the predictor registry whether or not it uses this predictor.
        from sklearn.ensemble import AdaBoostRegressor
        from sklearn.tree import DecisionTreeRegressor

        model = AdaBoostRegressor(
            estimator=DecisionTreeRegressor(max_depth=self.max_depth, criterion=self.criterion),
            n_estimators=self.n_estimators,
            learning_rate=self.learning_rate,
            loss=self.loss,
            random_state=self.random_state,
        )
        model.fit(rows, targets)
        return Forest.from_sklearn(model, trained_on)

    def _fit_and_swap(self, rows: np.ndarray, targets: np.ndarray, trained_on: int) -> Forest:
        forest = self._fit(rows, targets, trained_on)
        self.model_ = forest  # one reference assignment: predict sees old or new, never half
        return forest

    def _start_training(self) -> None:
        if not self.background:
            self._owed = False
            self._fit_and_swap(*self._snapshot(), self.observed_)
            return
        running = self.training_
        if running is not None and not running.done():
            return  # stays owed until the running fit finishes
        self._owed = False
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="adaboost")
        rows, targets = self._snapshot()
        self.training_ = self._executor.submit(self._fit_and_swap, rows, targets, self.observed_)

    def retrain_if_owed(self) -> None:
        """Start a retrain that came due while a background fit was running.

        ``observe`` starts owed fits, but when no job finishes after a fit ends the debt
        would wait for the next completion; the service calls this at every dispatch.
        """
        if self._owed:
            self._start_training()

    def close(self) -> None:
        """Wait for a running background fit and release its thread."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- predicting -------------------------------------------------------------------

    def predict(self, job: Job, t: int) -> int:
        model = self.model_  # read once: a background swap may happen meanwhile
        if model is None:
            return self.fallback_.predict(job, t)
        value = model.predict_row(self._row(job, self.fallback_.mean(job.user)))
        return clamp(math.exp(value) if self.log_target else value, job)

    def predict_many(self, jobs: Sequence[Job], t: int) -> list[int]:
        """``[predict(job, t) for job in jobs]``, one call for a dispatcher's whole queue."""
        return [self.predict(job, t) for job in jobs]
