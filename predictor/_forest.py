"""Fitted tree ensembles, flattened for cheap one-row predictions.

scikit-learn validates input and calls every tree's ``predict`` separately, which costs
about 50 µs per tree on a single row (milliseconds per job for a few dozen trees). A
dispatcher predicts one job at a time, so the fitted trees are copied into flat Python
lists once per training and walked directly. The results equal the estimators'
``predict``. :class:`Forest` is an ``AdaBoostRegressor`` over decision trees: inputs are
rounded to float32 as scikit-learn's trees do, a node sends ``x <= threshold`` left, and
the ensemble answer is the weighted median of the trees (the first prediction, in sorted
order, whose cumulative weight reaches half the total). :class:`AdditiveForest` is a
``HistGradientBoostingRegressor``: the sum of its trees' answers.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    from sklearn.ensemble import (
        AdaBoostRegressor,
        HistGradientBoostingClassifier,
        HistGradientBoostingRegressor,
    )

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
        nodes = _FlatNodes()
        for estimator in model.estimators_:
            tree = estimator.tree_
            leaf = tree.children_left == _LEAF
            nodes.add(
                leaf, tree.feature, tree.threshold, tree.children_left, tree.children_right,
                tree.value[:, 0, 0],
            )  # fmt: skip
        # Early-stopped boosting leaves zero weights past the fitted trees: drop them.
        weights = model.estimator_weights_[: len(model.estimators_)].tolist()
        return cls(tuple(nodes.roots), tuple(weights), *nodes.lists(), trained_on)

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

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The forest as plain arrays (what :meth:`from_arrays` reads back)."""
        return _arrays(self, weights=np.asarray(self.weights, dtype=np.float64))

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> Forest:
        """The forest :meth:`to_arrays` gave (:class:`ValueError` if they do not make one)."""
        roots, weights = _ints(arrays["roots"]), arrays["weights"].astype(np.float64).tolist()
        if len(weights) != len(roots):
            raise ValueError("a forest needs one weight per tree")
        return cls(tuple(roots), tuple(weights), *_node_lists(arrays, roots), _int(arrays))


@dataclass(frozen=True, slots=True)
class AdditiveForest:
    """A fitted ``HistGradientBoostingRegressor``, flattened as :class:`Forest` is: its
    answer is the baseline plus every tree's leaf value (the learning rate is already in
    the leaves). Its trees compare raw float64 inputs, ``x <= threshold`` going left;
    the rows it is given are never missing a value, and it has no categorical splits."""

    roots: tuple[int, ...]
    baseline: float
    feature: list[int]
    """Per node: the feature tested, or -1 at a leaf."""
    threshold: list[float]
    left: list[int]
    right: list[int]
    value: list[float]
    trained_on: int

    @classmethod
    def from_sklearn(
        cls,
        model: HistGradientBoostingRegressor | HistGradientBoostingClassifier,
        trained_on: int,
    ) -> AdditiveForest:
        """A regressor's trees, or a binary classifier's (its answer is then the log-odds
        of the positive class)."""
        nodes = _FlatNodes()
        # Private attributes: the fitted trees and the starting value. A test checks the
        # flattened answers against the estimator's, so a change of them fails loudly.
        for (predictor,) in model._predictors:
            tree = predictor.nodes
            if tree["is_categorical"].any():
                raise ValueError("categorical splits are not flattened")
            nodes.add(
                tree["is_leaf"].astype(bool), tree["feature_idx"], tree["num_threshold"],
                tree["left"].astype(np.int64), tree["right"].astype(np.int64), tree["value"],
            )  # fmt: skip
        baseline = float(model._baseline_prediction.ravel()[0])
        return cls(tuple(nodes.roots), baseline, *nodes.lists(), trained_on)

    @classmethod
    def constant(cls, value: float, trained_on: int) -> AdditiveForest:
        """A forest that answers ``value`` whatever the row (one tree of one leaf)."""
        return cls((0,), value, [_LEAF], [0.0], [0], [0], [0.0], trained_on)

    def predict_row(self, row: Sequence[float]) -> float:
        feature, threshold, left, right = self.feature, self.threshold, self.left, self.right
        total = self.baseline
        for root in self.roots:
            node = root
            f = feature[node]
            while f != _LEAF:
                node = left[node] if row[f] <= threshold[node] else right[node]
                f = feature[node]
            total += self.value[node]
        return total

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The forest as plain arrays (what :meth:`from_arrays` reads back)."""
        return _arrays(self, baseline=np.asarray(self.baseline, dtype=np.float64))

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> AdditiveForest:
        """The forest :meth:`to_arrays` gave (:class:`ValueError` if they do not make one)."""
        roots = _ints(arrays["roots"])
        baseline = float(arrays["baseline"])
        return cls(tuple(roots), baseline, *_node_lists(arrays, roots), _int(arrays))


class _FlatNodes:
    """Trees' nodes appended to flat lists, children renumbered to their place there."""

    def __init__(self) -> None:
        self.roots: list[int] = []
        self.feature: list[int] = []
        self.threshold: list[float] = []
        self.left: list[int] = []
        self.right: list[int] = []
        self.value: list[float] = []

    def add(
        self,
        leaf: np.ndarray,
        feature: np.ndarray,
        threshold: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        value: np.ndarray,
    ) -> None:
        """One tree, its nodes numbered from 0 (the root) and ``leaf`` marking leaves."""
        offset = len(self.feature)
        self.roots.append(offset)
        self.feature.extend(np.where(leaf, _LEAF, feature).tolist())
        self.threshold.extend(threshold.tolist())
        self.left.extend(np.where(leaf, _LEAF, left + offset).tolist())
        self.right.extend(np.where(leaf, _LEAF, right + offset).tolist())
        self.value.extend(value.tolist())

    def lists(self) -> tuple[list[int], list[float], list[int], list[int], list[float]]:
        """Feature, threshold, left, right and value, in the forests' field order."""
        return self.feature, self.threshold, self.left, self.right, self.value


def _arrays(forest: Forest | AdditiveForest, **combining: np.ndarray) -> dict[str, np.ndarray]:
    """``forest``'s trees as arrays, with ``combining``: how its trees' answers combine."""
    return {
        "roots": np.asarray(forest.roots, dtype=np.int64),
        **combining,
        "trained_on": np.asarray(forest.trained_on, dtype=np.int64),
        "feature": np.asarray(forest.feature, dtype=np.int64),
        "threshold": np.asarray(forest.threshold, dtype=np.float64),
        "left": np.asarray(forest.left, dtype=np.int64),
        "right": np.asarray(forest.right, dtype=np.int64),
        "value": np.asarray(forest.value, dtype=np.float64),
    }


def _ints(values: np.ndarray) -> list[int]:
    if values.dtype.kind not in "iu":
        raise ValueError(f"expected integers, got {values.dtype}")
    return [int(v) for v in values.ravel()]


def _int(arrays: Mapping[str, np.ndarray]) -> int:
    (value,) = _ints(arrays["trained_on"])
    return value


def _node_lists(
    arrays: Mapping[str, np.ndarray], roots: list[int]
) -> tuple[list[int], list[float], list[int], list[int], list[float]]:
    """The node lists of stored arrays, checked so that walking them cannot fail: equal
    lengths, every child and root a node, every tested feature a column index."""
    feature, left, right = _ints(arrays["feature"]), _ints(arrays["left"]), _ints(arrays["right"])
    threshold = arrays["threshold"].astype(np.float64).ravel().tolist()
    value = arrays["value"].astype(np.float64).ravel().tolist()
    count = len(feature)
    if {len(threshold), len(left), len(right), len(value)} != {count}:
        raise ValueError("a forest's node arrays differ in length")
    if not roots or any(not 0 <= r < count for r in roots):
        raise ValueError("a forest's roots must be nodes")
    for node, f in enumerate(feature):
        if f == _LEAF:
            continue
        # Children come after their parent (as the flattening numbers them), so a walk
        # always ends at a leaf.
        if f < 0 or not node < left[node] < count or not node < right[node] < count:
            raise ValueError(f"a forest's node {node} is malformed")
    return feature, threshold, left, right, value


F = TypeVar("F", Forest, AdditiveForest)


def checked_columns(forest: F, columns: int) -> F:
    """``forest``, if every feature it tests is one of ``columns`` a row has (a stored
    model read back must not index past its rows); :class:`ValueError` otherwise."""
    if max(forest.feature, default=_LEAF) >= columns:
        raise ValueError(f"the forest tests a feature beyond the {columns} a row has")
    return forest
