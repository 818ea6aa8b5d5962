"""What every learned predictor shares: a window of training rows, refits on a cadence,
fits in the background in the service, and one fit after a restart's rebuild.

Each finished job becomes one training row; the newest ``window`` rows are kept, so
training cost is bounded however long the service runs. The model is refitted after
every ``retrain_every`` observations:

* deterministic (``background=False``, replay): synchronously inside ``observe``, so a
  replay is reproducible;
* background (``background=True``, service): on a snapshot copy of the rows in a
  one-thread executor; the fitted model replaces the old one by a single attribute
  assignment, and ``predict`` never waits. At most one fit runs at a time: a refit that
  falls due while one is running is *owed* and starts at the first ``observe`` after the
  running one has finished, on the newest rows; several owed refits collapse into one.
  A failed fit keeps the previous model; its exception stays on ``training_``.
  ``observe`` and ``predict`` are meant to be called from one thread; only fits run on
  the executor's. A history observed inside :meth:`WindowedLearner.rebuilding` (a
  restart's rebuild) is fitted once, at its end, unless the model stored before the
  restart is loaded back (:meth:`WindowedLearner.load_model`): the service keeps each new
  model (:meth:`WindowedLearner.dump_model`), so a restart predicts as before it at once.

Until the first model exists, predictions come from a composed :class:`LastTwo`.

Features: see :mod:`cpsched.predictor._features`. Every training row is built as of its
job's submit time, from the jobs that had ended by then, so that rows look like what
``predict`` sees. A subclass says how to fit (:meth:`WindowedLearner._fit`), what a row's
target is (:meth:`WindowedLearner._target`) and how a model's answer becomes seconds
(:meth:`WindowedLearner._seconds`).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor._features import FEATURES, FeatureState
from cpsched.predictor.base import FinishedJob, Memory, clamp
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.profile import PER_USER_MEMORY


class Model(Protocol):
    """A fitted model, flattened for cheap one-row predictions."""

    @property
    def trained_on(self) -> int:
        """Observations the predictor had made when the training data was taken."""
        ...

    def predict_row(self, row: Sequence[float]) -> float: ...

    def to_arrays(self) -> dict[str, np.ndarray]: ...


MODEL_FORMAT = 1
"""Version of the stored model's layout (:meth:`WindowedLearner.dump_model`)."""


class WindowedLearner:
    """The shared machinery (module doc); subclasses fit and read the model."""

    name = "windowed"

    def __init__(
        self,
        *,
        features: Sequence[str],
        window: int,
        retrain_every: int,
        recent: int,
        profile_matches: int,
        half_life: float | None,
        background: bool,
    ) -> None:
        unknown = sorted(set(features) - set(FEATURES))
        if unknown or not features:
            raise ConfigError(f"{self.name} features must be a non-empty subset of {FEATURES}")
        if min(window, retrain_every, recent, profile_matches) < 1:
            raise ConfigError(
                f"{self.name} window, retrain_every, recent and profile_matches must be >= 1"
            )
        if half_life is not None and not half_life > 0:
            raise ConfigError(
                f"{self.name} half_life must be > 0 rows or None (off), got {half_life}"
            )
        self.features = tuple(features)
        self.window = window
        self.retrain_every = retrain_every
        self.recent = recent
        self.profile_matches = profile_matches
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
        self.model_: Model | None = None
        self.training_: Future[Model] | None = None
        """The latest background fit; tests and shutdown may wait on it."""
        self._owed = False
        self._deferring = False
        self._loaded = False
        """A stored model was loaded (:meth:`load_model`): the rebuild owes no fit."""
        self._rows_from = 0
        """While :meth:`rebuilding`: the first observation whose training row is built."""
        self._executor: ThreadPoolExecutor | None = None

    # -- what a subclass says ---------------------------------------------------------

    def _fit(self, rows: np.ndarray, targets: np.ndarray, trained_on: int) -> Model:
        """A model fitted to ``rows`` (oldest first) and their ``targets``."""
        raise NotImplementedError

    def _target(self, run_time: int, time_limit: int) -> float:
        """What the model learns of a job that ran ``run_time`` of ``time_limit`` s."""
        raise NotImplementedError

    def _seconds(self, value: float, job: Job) -> float:
        """The model's answer ``value`` for ``job`` as seconds (before the clamp)."""
        raise NotImplementedError

    def _model_from(self, arrays: Mapping[str, np.ndarray]) -> Model:
        """The model :meth:`Model.to_arrays` gave (:class:`ValueError` if not one)."""
        raise NotImplementedError

    def _hyperparameters(self) -> dict[str, Any]:
        """The settings of the fit, beside the shared ones: a model stored under other
        settings is not loaded back."""
        raise NotImplementedError

    # -- learning ---------------------------------------------------------------------

    def observe(self, finished: FinishedJob) -> None:
        slot = self.observed_ % self.window
        if self.observed_ >= self._rows_from:  # else a rebuild's job the window drops
            # As of the job's submit time: what predict saw when the job was submitted.
            self.rows_[slot] = self.state_.row(finished.job, before=finished.job.submit)
        self.targets_[slot] = self._target(finished.run_time, finished.job.time_limit)
        self.state_.observe(finished, self.observed_)
        self.fallback_.observe(finished)
        self.observed_ += 1
        if self.observed_ % self.retrain_every == 0:
            self._owed = True
        if self._owed and not self._deferring:
            self._start_training()

    @contextmanager
    def rebuilding(self, count: int, users: Mapping[str, int] | None = None) -> Iterator[None]:
        """Observe a history of ``count`` jobs (a service's rebuild after a restart) as
        ``count`` calls of :meth:`observe` would (``users``, how many of them each user
        has, is for predictors wrapping this one), except that

        * no training row is built for the jobs whose row the window drops before the
          end (what they teach the feature state is learnt all the same), so the rows
          kept are those one by one observing gives;
        * no fit runs on the way: refits falling due are owed, and one starts on the
          newest rows when the block ends (in the background when ``background``; until
          it is done, predictions come from the previous model, or from last-two as
          before a first fit), unless a stored model was loaded before or inside the
          block: it stands in for that fit.

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
                f"{self.name} rebuilt from {self.observed_ - first} jobs, {count} announced: "
                "the rows of the ones announced but not observed are missing"
            )
        if self._loaded:
            self._owed = self._loaded = False
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

    def _fit_and_swap(self, rows: np.ndarray, targets: np.ndarray, trained_on: int) -> Model:
        model = self._fit(rows, targets, trained_on)
        self.model_ = model  # one reference assignment: predict sees old or new, never half
        return model

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
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        rows, targets = self._snapshot()
        self.training_ = self._executor.submit(self._fit_and_swap, rows, targets, self.observed_)

    # -- the model across a restart ------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self.name

    def fitted_model(self) -> Model | None:
        """The model predictions come from now (a new object after every fit), or None."""
        return self.model_

    def dump_model(self, model: Model) -> bytes:
        """``model`` as bytes for the service to store (NumPy arrays, no pickle), with the
        settings it was fitted under."""
        arrays: dict[str, Any] = {"settings": np.array(self._settings_key()), **model.to_arrays()}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return buffer.getvalue()

    def load_model(self, data: bytes) -> bool:
        """Predict with the stored model ``data`` (from :meth:`dump_model`) from now on, in
        place of the fit a rebuild (loaded before it or inside it) owes. False, with
        nothing changed, when it was fitted under other settings or is not a model this
        predictor can read."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as stored:
                arrays = {name: stored[name] for name in stored.files}
            if str(arrays.pop("settings", "")) != self._settings_key():
                return False
            model = self._model_from(arrays)
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
            return False
        self.model_ = model
        self._owed = False
        self._loaded = True
        return True

    def _settings_key(self) -> str:
        shared = {
            "format": MODEL_FORMAT,
            "predictor": self.name,
            "features": list(self.features),
            "window": self.window,
            "recent": self.recent,
            "profile_matches": self.profile_matches,
            "half_life": self.half_life,
        }
        return json.dumps({**shared, **self._hyperparameters()}, sort_keys=True)

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
        return clamp(self._seconds(model.predict_row(self.state_.row(job)), job), job)

    def basis(self, job: Job, t: int) -> str:
        model = self.model_
        if model is None:
            return f"before {self.name}'s first fit, {self.fallback_.basis(job, t)}"
        kept = min(model.trained_on, self.window)
        return (
            f"a {self.name} model fitted on {kept:,} finished jobs (of {model.trained_on:,} "
            "seen), reading the request and the user's recent run times"
        )

    def predict_many(self, jobs: Sequence[Job], t: int) -> list[int]:
        """``[predict(job, t) for job in jobs]``, one call for a dispatcher's whole queue."""
        return [self.predict(job, t) for job in jobs]


def recency_weights(count: int, half_life: float | None) -> np.ndarray | None:
    """Sample weights of ``count`` rows, oldest first: the newest row weighs 1 and a row
    ``half_life`` rows older half as much (None: every row alike). Recent jobs shape the
    model more: users change their habits, and a trace's fifths differ
    (docs/results/predictors.md)."""
    if half_life is None:
        return None
    age = np.arange(count - 1, -1, -1, dtype=float)
    return np.exp2(-age / half_life)
