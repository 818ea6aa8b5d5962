"""Gradient-boosted trees fitted to a quantile of the run time (pinball loss).

A scheduler pays for an error by its ratio more than by its seconds: a job of 10 min
predicted at 1 h costs about what a job of 10 h predicted at 60 h does. The trees learn
the logarithm of the run time under the quantile (pinball) loss, so ``quantile = 0.5``
predicts the median run time of jobs like this one and a higher quantile an upper
estimate; a quantile of the logarithm is the logarithm of the quantile, so the answer
in seconds is ``exp`` of the model's. The features, the window of training rows, the
refit cadence and the background fits are those of AdaBoost
(:class:`~cpsched.predictor._windowed.WindowedLearner`).

Fits are single-threaded: the same rows give the same model on any machine and under
any load (replays must not depend on either), and a background fit in the service leaves
the other cores to the dispatcher. Measured against last-two and AdaBoost in
docs/results/predictors.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor._forest import AdditiveForest, checked_columns
from cpsched.predictor._windowed import WindowedLearner, recency_weights
from cpsched.predictor.adaboost import DEFAULT_FEATURES

__all__ = ["QuantileBoost"]


class QuantileBoost(WindowedLearner):
    name = "quantile-boost"

    def __init__(
        self,
        *,
        quantile: float = 0.5,
        features: Sequence[str] = DEFAULT_FEATURES,
        max_iter: int = 100,
        max_leaf_nodes: int = 31,
        min_samples_leaf: int = 20,
        learning_rate: float = 0.1,
        window: int = 40_000,
        retrain_every: int = 1_000,
        recent: int = 5,
        profile_matches: int = 11,
        half_life: float | None = 5_000,
        background: bool = False,
    ) -> None:
        if not 0 < quantile < 1:
            raise ConfigError(f"quantile-boost quantile must be in (0, 1), got {quantile}")
        if min(max_iter, min_samples_leaf) < 1 or max_leaf_nodes < 2 or not learning_rate > 0:
            raise ConfigError(
                "quantile-boost max_iter and min_samples_leaf must be >= 1, max_leaf_nodes "
                ">= 2 and learning_rate > 0"
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
        self.quantile = quantile
        self.max_iter = max_iter
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.learning_rate = learning_rate

    def _fit(self, rows: np.ndarray, targets: np.ndarray, trained_on: int) -> AdditiveForest:
        # Imported on first fit, as AdaBoost's: scikit-learn takes seconds to import.
        from sklearn.ensemble import HistGradientBoostingRegressor
        from threadpoolctl import threadpool_limits

        model = HistGradientBoostingRegressor(
            loss="quantile",
            quantile=self.quantile,
            max_iter=self.max_iter,
            max_leaf_nodes=self.max_leaf_nodes,
            min_samples_leaf=self.min_samples_leaf,
            learning_rate=self.learning_rate,
            early_stopping=False,
            random_state=0,
        )
        with threadpool_limits(limits=1, user_api="openmp"):
            model.fit(rows, targets, sample_weight=recency_weights(len(rows), self.half_life))
        return AdditiveForest.from_sklearn(model, trained_on)

    def _target(self, run_time: int, time_limit: int) -> float:
        return math.log(max(run_time, 1))

    def _model_from(self, arrays: Mapping[str, np.ndarray]) -> AdditiveForest:
        return checked_columns(AdditiveForest.from_arrays(arrays), len(self.features))

    def _hyperparameters(self) -> dict[str, Any]:
        return {
            "quantile": self.quantile,
            "max_iter": self.max_iter,
            "max_leaf_nodes": self.max_leaf_nodes,
            "min_samples_leaf": self.min_samples_leaf,
            "learning_rate": self.learning_rate,
        }

    def _seconds(self, value: float, job: Job) -> float:
        return math.exp(value)
