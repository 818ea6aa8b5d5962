"""What the learners built on scikit-learn's histogram gradient boosting share: the tree
settings, their checks, and a single-threaded fit flattened into an
:class:`~cpsched.predictor._forest.AdditiveForest`.

Fits are single-threaded: the same rows give the same model on any machine and under
any load (replays must not depend on either), and a background fit in the service leaves
the other cores to the dispatcher.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cpsched.errors import ConfigError
from cpsched.predictor._forest import AdditiveForest, checked_columns
from cpsched.predictor._windowed import WindowedLearner, recency_weights

if TYPE_CHECKING:
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor


class HistBoosted(WindowedLearner):
    """A windowed learner whose model is a histogram gradient-boosted ensemble; a subclass
    says which estimator (:meth:`_estimator`) and what a row's target is."""

    name = "hist-boosted"

    def __init__(
        self,
        *,
        features: Sequence[str],
        max_iter: int,
        max_leaf_nodes: int,
        min_samples_leaf: int,
        learning_rate: float,
        window: int,
        retrain_every: int,
        recent: int,
        profile_matches: int,
        half_life: float | None,
        background: bool,
    ) -> None:
        if min(max_iter, min_samples_leaf) < 1 or max_leaf_nodes < 2 or not learning_rate > 0:
            raise ConfigError(
                f"{self.name} max_iter and min_samples_leaf must be >= 1, max_leaf_nodes "
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
        self.max_iter = max_iter
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.learning_rate = learning_rate

    def _estimator(
        self, trees: Mapping[str, Any]
    ) -> HistGradientBoostingRegressor | HistGradientBoostingClassifier:
        """The unfitted estimator, built with the tree settings ``trees``."""
        raise NotImplementedError

    def _fit(self, rows: np.ndarray, targets: np.ndarray, trained_on: int) -> AdditiveForest:
        # Imported on first fit: scikit-learn takes seconds to import, and every CLI run
        # imports the predictor registry whether or not it uses this predictor.
        from threadpoolctl import threadpool_limits

        model = self._estimator(
            {
                "max_iter": self.max_iter,
                "max_leaf_nodes": self.max_leaf_nodes,
                "min_samples_leaf": self.min_samples_leaf,
                "learning_rate": self.learning_rate,
                "early_stopping": False,
                "random_state": 0,
            }
        )
        with threadpool_limits(limits=1, user_api="openmp"):
            model.fit(rows, targets, sample_weight=recency_weights(len(rows), self.half_life))
        return AdditiveForest.from_sklearn(model, trained_on)

    def _model_from(self, arrays: Mapping[str, np.ndarray]) -> AdditiveForest:
        return checked_columns(AdditiveForest.from_arrays(arrays), len(self.features))

    def _hyperparameters(self) -> dict[str, Any]:
        return {
            "max_iter": self.max_iter,
            "max_leaf_nodes": self.max_leaf_nodes,
            "min_samples_leaf": self.min_samples_leaf,
            "learning_rate": self.learning_rate,
        }
