"""Gradient-boosted trees fitted to a quantile of the run time (pinball loss).

A scheduler pays for an error by its ratio more than by its seconds: a job of 10 min
predicted at 1 h costs about what a job of 10 h predicted at 60 h does. The trees learn
the logarithm of the run time under the quantile (pinball) loss, so ``quantile = 0.5``
predicts the median run time of jobs like this one and a higher quantile an upper
estimate; a quantile of the logarithm is the logarithm of the quantile, so the answer
in seconds is ``exp`` of the model's. The features, the window of training rows, the
refit cadence and the background fits are those of AdaBoost
(:class:`~cpsched.predictor._windowed.WindowedLearner`); fits are single-threaded
(:class:`~cpsched.predictor._hist_boosted.HistBoosted`). Measured against last-two and AdaBoost in
docs/results/predictors.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor._hist_boosted import HistBoosted
from cpsched.predictor.adaboost import DEFAULT_FEATURES

if TYPE_CHECKING:
    from sklearn.ensemble import HistGradientBoostingRegressor

__all__ = ["QuantileBoost"]


class QuantileBoost(HistBoosted):
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
        super().__init__(
            features=features,
            max_iter=max_iter,
            max_leaf_nodes=max_leaf_nodes,
            min_samples_leaf=min_samples_leaf,
            learning_rate=learning_rate,
            window=window,
            retrain_every=retrain_every,
            recent=recent,
            profile_matches=profile_matches,
            half_life=half_life,
            background=background,
        )
        self.quantile = quantile

    def _estimator(self, trees: Mapping[str, Any]) -> HistGradientBoostingRegressor:
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(loss="quantile", quantile=self.quantile, **trees)

    def _target(self, run_time: int, time_limit: int) -> float:
        return math.log(max(run_time, 1))

    def _hyperparameters(self) -> dict[str, Any]:
        return {"quantile": self.quantile, **super()._hyperparameters()}

    def _seconds(self, value: float, job: Job) -> float:
        return math.exp(value)
