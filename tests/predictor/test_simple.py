"""Last-two, oracle and the registry on hand-made histories."""

from __future__ import annotations

import pytest

from cpsched.errors import ConfigError, UnknownPolicyError
from cpsched.predictor.adaboost import AdaBoost
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.oracle import Oracle
from cpsched.predictor.registry import PREDICTORS, make_predictor
from tests.predictor._util import done, mk


def test_last_two_without_history_is_the_limit():
    assert LastTwo().predict(mk("a", limit=500), 0) == 500


def test_last_two_one_job_is_its_run_time():
    p = LastTwo()
    p.observe(done(mk("a"), 120))
    assert p.predict(mk("b", limit=500), 200) == 120


def test_last_two_is_the_mean_of_the_two_most_recent_by_end():
    p = LastTwo()
    p.observe(done(mk("a"), 100, end=100))
    p.observe(done(mk("b"), 300, end=400))
    p.observe(done(mk("c"), 50, end=200))  # observed last, but ended before b
    assert p.predict(mk("x"), 500) == 175  # (300 + 50) / 2
    p.observe(done(mk("d"), 10, end=50))  # older than both kept: ignored
    assert p.predict(mk("x"), 500) == 175


def test_last_two_equal_ends_prefer_the_later_observation():
    p = LastTwo()
    for i, run in enumerate((10, 20, 40)):
        p.observe(done(mk(f"j{i}"), run, end=100))
    assert p.predict(mk("x"), 100) == 30


def test_last_two_is_per_user_and_clamped():
    p = LastTwo()
    p.observe(done(mk("a", user="alice"), 900))
    p.observe(done(mk("b", user="bob"), 10))
    assert p.predict(mk("x", user="alice", limit=600), 1000) == 600
    assert p.predict(mk("y", user="bob"), 1000) == 10
    assert p.predict(mk("z", user="carol", limit=77), 1000) == 77


def test_oracle_answers_the_real_run_time_clamped():
    p = Oracle({"a": 42, "b": 5000, "c": 0})
    assert p.predict(mk("a"), 0) == 42
    assert p.predict(mk("b", limit=1000), 0) == 1000
    assert p.predict(mk("c"), 0) == 1
    with pytest.raises(ConfigError, match="no run time"):
        p.predict(mk("zzz"), 0)


def test_registry_builds_every_predictor_by_name():
    for name in PREDICTORS:
        options = {"run_times": {}} if name == "oracle" else {}
        assert make_predictor(name, **options).name == name


def test_registry_passes_options():
    p = make_predictor("adaboost", retrain_every=5, n_estimators=3)
    assert isinstance(p, AdaBoost)
    assert (p.retrain_every, p.n_estimators) == (5, 3)


def test_registry_errors_are_typed():
    with pytest.raises(ConfigError, match="run times"):
        make_predictor("oracle")
    with pytest.raises(UnknownPolicyError, match="last-two"):
        make_predictor("crystal-ball")
    with pytest.raises(ConfigError, match="bad options"):
        make_predictor("last-two", window=3)
