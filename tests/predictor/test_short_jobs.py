"""Last-two with a learned test for very short jobs: the classifier's flattened trees, the
jobs it calls short or not, its upper estimate and its settings. The window, rebuilds,
stored models and background fits it shares with the other learners are tested there."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

from cpsched.errors import ConfigError
from cpsched.predictor._forest import AdditiveForest
from cpsched.predictor.base import Bounding, FinishedJob
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.short_jobs import ShortJobs
from tests.predictor._util import done, mk

SMALL = {"max_iter": 20, "min_samples_leaf": 5, "retrain_every": 40}


def two_kinds(n: int, seed: int = 1) -> list[FinishedJob]:
    """One user's jobs in random order, ending with a test then a run: one-core tests that
    run 10 s, 16-core runs of 3,000 s. Only the core count tells them apart."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        test = rng.random() < 0.5 if i < n - 2 else i == n - 2
        job = mk(f"j{i}", user="u", submit=10_000 * i, limit=20_000, cores=1 if test else 16)
        out.append(done(job, 10 if test else 3_000))
    return out


def test_the_flat_forest_answers_the_classifiers_log_odds():
    rng = np.random.default_rng(0)
    rows = rng.random((2000, 5)) * 100
    labels = rows[:, 0] + rng.random(2000) * 30 < 50
    model = HistGradientBoostingClassifier(max_iter=30).fit(rows, labels)
    forest = AdditiveForest.from_sklearn(model, trained_on=2000)
    probes = rng.random((200, 5)) * 120 - 10  # some outside the training range
    flat = [forest.predict_row(row.tolist()) for row in probes]
    assert flat == pytest.approx(model.decision_function(probes).tolist(), abs=1e-12)


def test_it_tells_the_short_jobs_from_the_long_ones_where_last_two_cannot():
    p, last_two = ShortJobs(**SMALL), LastTwo()
    for finished in two_kinds(200):
        p.observe(finished)
        last_two.observe(finished)
    test = mk("test", user="u", submit=3_000_000, limit=20_000, cores=1)
    run = mk("run", user="u", submit=3_000_000, limit=20_000, cores=16)
    assert last_two.predict(test, 0) == last_two.predict(run, 0) == 1505
    chance_test, chance_run = p.chance_short(test), p.chance_short(run)
    assert chance_test is not None and chance_run is not None
    assert chance_test > 0.9 > 0.1 > chance_run
    assert p.predict(test, 0) == 10  # the user's recent short jobs ran 10 s
    assert p.predict(run, 0) == 1505  # not short: last-two's answer (a test and a run) stands
    assert "chance of running under 60 s: the user's recent short jobs' run time" in p.basis(
        test, 0
    )


def test_the_upper_estimate_never_plans_shorter_than_last_two():
    p = ShortJobs(**SMALL)
    for finished in two_kinds(200):
        p.observe(finished)
    assert isinstance(p, Bounding)
    test = mk("test", user="u", submit=3_000_000, limit=20_000, cores=1)
    # Called short (10 s) when queued; planned with last-two's 1,505 s once running.
    assert p.predict(test, 0) == 10
    assert p.upper(test, 0) == 1505
    assert p.upper_basis(test, 0).startswith("once it runs, the mean run time")


def test_a_window_of_one_kind_of_job_gives_a_sure_answer():
    p = ShortJobs(**SMALL)
    for i in range(40):
        job = mk(f"j{i}", user="u", submit=100 * i, limit=5_000)
        p.observe(done(job, 5))
    probe = mk("p", user="v", limit=5_000)
    assert p.chance_short(probe) == pytest.approx(1.0)
    assert p.predict(probe, 0) == 30  # no recent short job of this user: half of 60 s


def test_settings_are_checked():
    for bad in ({"short": 1}, {"threshold": 0}, {"threshold": 1}, {"max_leaf_nodes": 1}):
        with pytest.raises(ConfigError, match="short-jobs"):
            ShortJobs(**bad)  # type: ignore[arg-type]
