"""Quantile boosting: its flattened trees, the quantile it learns, its settings. The
window, rebuilds and background fits it shares with AdaBoost are tested there."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

from cpsched.errors import ConfigError
from cpsched.predictor._forest import AdditiveForest
from cpsched.predictor.base import FinishedJob
from cpsched.predictor.margin import Margin
from cpsched.predictor.quantile_boost import QuantileBoost
from cpsched.predictor.rebuild import rebuild
from tests.predictor._util import done, mk
from tests.predictor.test_adaboost import history, probes

SMALL = {"max_iter": 20, "min_samples_leaf": 5, "retrain_every": 20}


def noisy_history(n: int, seed: int = 2) -> list[FinishedJob]:
    """One user whose run times spread a factor of 100 around 1,000 s, whatever the job."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        run = round(1000 * math.exp(rng.uniform(-2.3, 2.3)))
        job = mk(f"j{i}", user="u", submit=10 * i, limit=200_000, cores=1 + i % 4)
        out.append(done(job, run, end=10 * i + 200_000 + i))
    return out


def test_the_flat_forest_answers_as_scikit_learn_does():
    rng = np.random.default_rng(0)
    rows = rng.random((2000, 6)) * 100
    targets = np.log1p(rows[:, 0] * 30 + rows[:, 3] ** 2 + rng.random(2000) * 50)
    model = HistGradientBoostingRegressor(loss="quantile", quantile=0.7, max_iter=40)
    model.fit(rows, targets)
    forest = AdditiveForest.from_sklearn(model, trained_on=2000)
    probes = rng.random((200, 6)) * 120 - 10  # some outside the training range
    flat = [forest.predict_row(row.tolist()) for row in probes]
    assert flat == pytest.approx(model.predict(probes).tolist(), abs=1e-12)


def test_fits_are_reproducible_and_learn_the_run_times():
    runs = []
    for _ in range(2):
        p = QuantileBoost(**SMALL)
        for f in history(200):
            p.observe(f)
        runs.append([p.predict(j, 0) for j in probes()])
    assert runs[0] == runs[1]
    small, big = (mk("q", user="u1", limit=20_000, cores=c, mem=c * 100) for c in (1, 8))
    assert p.predict(small, 0) < p.predict(big, 0)


def test_the_quantile_sets_the_share_of_jobs_predicted_short():
    history_ = noisy_history(400)
    later = noisy_history(400, seed=3)
    shares = {}
    for quantile in (0.2, 0.5, 0.8):
        p = rebuild(QuantileBoost(quantile=quantile, **SMALL), history_)
        under = [p.predict(f.job, 0) < f.run_time for f in later]
        shares[quantile] = sum(under) / len(under)
    # About 1 - quantile of the next jobs run longer than predicted.
    assert shares[0.8] < 0.35 < shares[0.5] < 0.65 < shares[0.2]


def test_a_margin_forwards_owed_refits():
    inner = QuantileBoost(**SMALL, background=True)
    margin = Margin(inner, 2)
    try:
        for f in history(5):
            margin.observe(f)
        inner._owed = True  # as when a refit fell due while another was running
        margin.retrain_if_owed()
        assert inner.training_ is not None and not inner._owed
        inner.training_.result(timeout=30)
    finally:
        margin.close()


@pytest.mark.parametrize(
    "options",
    [
        {"quantile": 0},
        {"quantile": 1},
        {"max_iter": 0},
        {"max_leaf_nodes": 1},
        {"learning_rate": 0},
        {"window": 0},
        {"half_life": 0},
        {"features": ("shoe_size",)},
    ],
)
def test_bad_hyperparameters_are_config_errors(options):
    with pytest.raises(ConfigError, match="quantile-boost"):
        QuantileBoost(**options)
