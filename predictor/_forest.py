"""A fitted ``AdaBoostRegressor`` over trees, flattened for cheap one-row predictions.

scikit-learn validates input and calls every tree's ``predict`` separately, which costs
about 50 µs per tree on a single row (milliseconds per job for a few dozen trees). A
dispatcher predicts one job at a time, so the fitted trees are copied into flat Python
lists once per training and walked directly. The result equals the estimator's
``predict``: inputs are rounded to float32 as scikit-learn's trees do, a node sends
``x <= threshold`` left, and the ensemble answer is the weighted median of the trees
(the first prediction, in sorted order, whose cumulative weight reaches half the total).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sklearn.ensemble import AdaBoostRegressor

_LEAF = -1


@dataclass(frozen=True, slots=True)
class Forest:
    roots: tuple[int, ...]
    """Index of each tree's root in the flat node lists."""
    weights: tuple[float, ...]
    feature: list[int]
    """Per node: the feature tested, or -1 at a leaf."""
    threshold: list[float]
    left: list[int]
    right: list[int]
    value: list[float]
    trained_on: int
    """Observations the predictor had made when the training data was taken."""

    @classmethod
    def from_sklearn(cls, model: AdaBoostRegressor, trained_on: int) -> Forest:
        feature: list[int] = []
        threshold: list[float] = []
        left: list[int] = []
        right: list[int] = []
        value: list[float] = []
        roots: list[int] = []
        for estimator in model.estimators_:
            tree = estimator.tree_
            offset = len(feature)
            roots.append(offset)
            leaf = tree.children_left == _LEAF
            feature.extend(np.where(leaf, _LEAF, tree.feature).tolist())
            threshold.extend(tree.threshold.tolist())
            left.extend(np.where(leaf, _LEAF, tree.children_left + offset).tolist())
            right.extend(np.where(leaf, _LEAF, tree.children_right + offset).tolist())
            value.extend(tree.value[:, 0, 0].tolist())
        # Early-stopped boosting leaves zero weights past the fitted trees: drop them.
        weights = model.estimator_weights_[: len(model.estimators_)].tolist()
        return cls(tuple(roots), tuple(weights), feature, threshold, left, right, value, trained_on)

    def predict_row(self, row: Sequence[float]) -> float:
        x = array("f", row)  # the float32 rounding scikit-learn's trees apply to inputs
        feature, threshold, left, right = self.feature, self.threshold, self.left, self.right
        answers: list[tuple[float, float]] = []
        for root, weight in zip(self.roots, self.weights, strict=True):
            node = root
            f = feature[node]
            while f != _LEAF:
                node = left[node] if x[f] <= threshold[node] else right[node]
                f = feature[node]
            answers.append((self.value[node], weight))
        answers.sort(key=lambda a: a[0])
        half = 0.5 * sum(w for _, w in answers)
        cumulative = 0.0
        for answer, weight in answers:
            cumulative += weight
            if cumulative >= half:
                return answer
        return answers[-1][0]
