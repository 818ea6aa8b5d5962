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
  the executor's. A history observed inside :meth:`AdaBoost.rebuilding` (a restart's
  rebuild) is fitted once, at its end.

Until the first model exists, predictions come from a composed :class:`LastTwo`.

Features: see :mod:`cpsched.predictor._features` (:data:`FEATURES`). Every training row
is built as of its job's submit time, from the jobs that had ended by then, so that rows look
like what ``predict`` sees.

The defaults (features, tree shape, window, recency weights) give the lowest prediction
error measured on the full real traces; the measurements, with the other settings
measured, are in docs/results/predictors.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Literal, get_args

import numpy as np

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor._features import FEATURES, FeatureState
from cpsched.predictor._forest import Forest
from cpsched.predictor.base import FinishedJob, Memory, clamp
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.profile import PER_USER_MEMORY

__all__ = ["BASIC_FEATURES", "DEFAULT_FEATURES", "FEATURES", "HISTORY_FEATURES", "AdaBoost"]

BASIC_FEATURES: tuple[str, ...] = ("user", "cores", "mem", "time_limit", "last_two")
"""The request and the user's last-two mean: the defaults until history features won."""
HISTORY_FEATURES: tuple[str, ...] = (
    *BASIC_FEATURES, "last", "recent_mean", "recent_median", "recent_min", "recent_max",
    "recent_ratio", "profile", "profile_rule",
)  # fmt: skip
"""The user's recent run times and the profile answer besides the basic features."""
DEFAULT_FEATURES = HISTORY_FEATURES
Loss = Literal["linear", "square", "exponential"]
Criterion = Literal["absolute_error", "squared_error", "friedman_mse", "poisson"]
Target = Literal["seconds", "log", "ratio"]
"""What the trees learn: run seconds, their logarithm, or run / requested time."""


class AdaBoost:
    name = "adaboost"

    def __init__(
        self,
        *,
        features: Sequence[str] = DEFAULT_FEATURES,
        target: Target = "seconds",
        n_estimators: int = 10,
        max_depth: int = 8,
        min_samples_leaf: int = 20,
        learning_rate: float = 0.1,
        loss: Loss = "linear",
        criterion: Criterion = "absolute_error",
        window: int = 40_000,
        retrain_every: int = 1_000,
        recent: int = 5,
        profile_matches: int = 11,
        random_state: int = 0,
        half_life: float | None = 5_000,
        background: bool = False,
    ) -> None:
        unknown = sorted(set(features) - set(FEATURES))
        if unknown or not features:
            raise ConfigError(f"adaboost features must be a non-empty subset of {FEATURES}")
        sizes = (
            window, retrain_every, n_estimators, max_depth, min_samples_leaf, recent,
            profile_matches,
        )  # fmt: skip
        if half_life is not None and not half_life > 0:
            raise ConfigError(f"adaboost half_life must be > 0 rows or None (off), got {half_life}")
        if min(sizes) < 1 or learning_rate <= 0:
            raise ConfigError(
                "adaboost window, retrain_every, n_estimators, max_depth, min_samples_leaf, "
                "recent and profile_matches must be >= 1 "
                "and learning_rate > 0"
            )
        if (
            loss not in get_args(Loss)
            or criterion not in get_args(Criterion)
            or target not in get_args(Target)
        ):
            raise ConfigError(
                f"adaboost loss must be one of {get_args(Loss)}, criterion one of "
                f"{get_args(Criterion)} and target one of {get_args(Target)}, "
                f"got {loss!r}, {criterion!r} and {target!r}"
            )
        self.features = tuple(features)
        self.target = target
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.learning_rate = learning_rate
        self.loss = loss
        self.criterion = criterion
        self.window = window
        self.retrain_every = retrain_every
        self.recent = recent
        self.profile_matches = profile_matches
        self.random_state = random_state
        self.half_life = half_life
        self.background = background

        self.memory = Memory(per_user=PER_USER_MEMORY, recent=window, exact=False)
        """A rebuild reads its window of newest jobs and each user's newest 32 (the
        history features); what fell out of both is forgotten."""
        self.fallback_ = LastTwo()
        self.state_ = FeatureState(self.features, recent=recent, profile_matches=profile_matches)
        self.rows_ = np.zeros((window, len(self.features)))
        self.targets_ = np.zeros(window)
        self.observed_ = 0
        self.model_: Forest | None = None
        self.training_: Future[Forest] | None = None
        """The latest background fit; tests and shutdown may wait on it."""
        self._owed = False
        self._deferring = False
        self._rows_from = 0
        """While :meth:`rebuilding`: the first observation whose training row is built."""
        self._executor: ThreadPoolExecutor | None = None

    # -- learning ---------------------------------------------------------------------

    def observe(self, finished: FinishedJob) -> None:
        slot = self.observed_ % self.window
        if self.observed_ >= self._rows_from:  # else a rebuild's job the window drops
            # As of the job's submit time: what predict saw when the job was submitted.
            self.rows_[slot] = self.state_.row(finished.job, before=finished.job.submit)
        self.targets_[slot] = _target(self.target, finished.run_time, finished.job.time_limit)
        self.state_.observe(finished, self.observed_)
        self.fallback_.observe(finished)
        self.observed_ += 1
        if self.observed_ % self.retrain_every == 0:
            self._owed = True
        if self._owed and not self._deferring:
            self._start_training()

    @contextmanager
    def rebuilding(self, count: int) -> Iterator[None]:
        """Observe a history of ``count`` jobs (a service's rebuild after a restart) as
        ``count`` calls of :meth:`observe` would, except that

        * no training row is built for the jobs whose row the window drops before the
          end (what they teach the feature state is learnt all the same), so the rows
          kept are those one by one observing gives;
        * no fit runs on the way: refits falling due are owed, and one starts on the
          newest rows when the block ends (in the background when ``background``; until
          it is done, predictions come from the previous model, or from last-two as
          before a first fit).

        :class:`RuntimeError` if another number of jobs was observed inside."""
        first = self.observed_
        self._rows_from = first + count - self.window
        self._deferring = True
        try:
            yield
        finally:
            self._rows_from = 0
            self._deferring = False
        if self.observed_ != first + count:
            raise RuntimeError(
                f"adaboost rebuilt from {self.observed_ - first} jobs, {count} announced: "
                "the rows of the ones announced but not observed are missing"
            )
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
            estimator=DecisionTreeRegressor(
                max_depth=self.max_depth,
                min_samples_leaf=self.min_samples_leaf,
                criterion=self.criterion,
            ),
            n_estimators=self.n_estimators,
            learning_rate=self.learning_rate,
            loss=self.loss,
            random_state=self.random_state,
        )
        model.fit(rows, targets, sample_weight=recency_weights(len(rows), self.half_life))
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
        value = model.predict_row(self.state_.row(job))
        if self.target == "log":
            return clamp(math.exp(value), job)
        return clamp(value * job.time_limit if self.target == "ratio" else value, job)

    def predict_many(self, jobs: Sequence[Job], t: int) -> list[int]:
        """``[predict(job, t) for job in jobs]``, one call for a dispatcher's whole queue."""
        return [self.predict(job, t) for job in jobs]


def recency_weights(count: int, half_life: float | None) -> np.ndarray | None:
    """Sample weights of ``count`` rows, oldest first: the newest row weighs 1 and a row
    ``half_life`` rows older half as much (None: every row alike). AdaBoost.R2 starts
    from these weights and draws each tree's sample by them, so recent jobs shape the
    model more: users change their habits, and the trace's fifths differ (see above)."""
    if half_life is None:
        return None
    age = np.arange(count - 1, -1, -1, dtype=float)
    return np.exp2(-age / half_life)


def _target(target: Target, run_time: int, time_limit: int) -> float:
    if target == "log":
        return math.log(max(run_time, 1))
    if target == "ratio":
        # A job may overrun its limit a little (the kill is not instantaneous): cap at 1.
        return min(run_time / time_limit, 1.0)
    return run_time
