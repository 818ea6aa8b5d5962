"""AdaBoost regression over decision trees (the COARE study's walltime predictor).

The window of training rows, the refit cadence, background fits and rebuilds are
:class:`~cpsched.predictor._windowed.WindowedLearner`'s; ``random_state`` fixes the
boosting's resampling, so a replay (deterministic fits) is reproducible. Until the first
model exists, predictions come from a composed :class:`LastTwo`.

Features: see :mod:`cpsched.predictor._features` (:data:`FEATURES`).

The defaults (features, tree shape, window, recency weights) give the lowest prediction
error measured on the full real traces; the measurements, with the other settings
measured, are in docs/results/predictors.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

import numpy as np

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor._features import FEATURES
from cpsched.predictor._forest import Forest, checked_columns
from cpsched.predictor._windowed import WindowedLearner, recency_weights

__all__ = [
    "BASIC_FEATURES",
    "DEFAULT_FEATURES",
    "FEATURES",
    "HISTORY_FEATURES",
    "AdaBoost",
    "recency_weights",
]

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


class AdaBoost(WindowedLearner):
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
        if min(n_estimators, max_depth, min_samples_leaf) < 1 or learning_rate <= 0:
            raise ConfigError(
                "adaboost n_estimators, max_depth and min_samples_leaf must be >= 1 "
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
        super().__init__(
            features=features,
            window=window,
            retrain_every=retrain_every,
            recent=recent,
            profile_matches=profile_matches,
            half_life=half_life,
            background=background,
        )
        self.target = target
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.learning_rate = learning_rate
        self.loss = loss
        self.criterion = criterion
        self.random_state = random_state

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
        # AdaBoost.R2 starts from these weights and draws each tree's sample by them.
        model.fit(rows, targets, sample_weight=recency_weights(len(rows), self.half_life))
        return Forest.from_sklearn(model, trained_on)

    def _model_from(self, arrays: Mapping[str, np.ndarray]) -> Forest:
        return checked_columns(Forest.from_arrays(arrays), len(self.features))

    def _hyperparameters(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "n_estimators": self.n_estimators,
            "max_depth": self.max_depth,
            "min_samples_leaf": self.min_samples_leaf,
            "learning_rate": self.learning_rate,
            "loss": self.loss,
            "criterion": self.criterion,
            "random_state": self.random_state,
        }

    def _target(self, run_time: int, time_limit: int) -> float:
        if self.target == "log":
            return math.log(max(run_time, 1))
        if self.target == "ratio":
            # A job may overrun its limit a little (the kill is not instantaneous): cap at 1.
            return min(run_time / time_limit, 1.0)
        return run_time

    def _seconds(self, value: float, job: Job) -> float:
        if self.target == "log":
            return math.exp(value)
        return value * job.time_limit if self.target == "ratio" else value
