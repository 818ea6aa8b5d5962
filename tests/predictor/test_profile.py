"""The job-profile heuristic: every rule, its precedence, the name-prefix rule."""

from __future__ import annotations

import pytest

from predictor.profile import JobProfile, name_stem
from tests.predictor._util import done, mk


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("run_1", "run"),
        ("run_2", "run"),
        ("sim-07.b", "sim-07.b"),
        ("sim-07", "sim"),
        ("job10", "job"),
        ("a.b_3-4", "a.b"),
        ("12", "12"),
        ("_1", "_1"),
        ("", ""),
        ("plain", "plain"),
    ],
)
def test_name_stem(name, stem):
    assert name_stem(name) == stem


@pytest.fixture
def profile() -> JobProfile:
    p = JobProfile()
    p.observe(done(mk("old", name="run_1", queue="q", limit=1000, cores=4), 50, end=100))
    return p


@pytest.mark.parametrize(
    ("kwargs", "rule", "expected"),
    [
        ({"name": "run_1", "queue": "q", "limit": 1000, "cores": 4}, 1, 50),
        ({"name": "run_2", "queue": "q", "limit": 1000, "cores": 4}, 2, 50),
        ({"name": "run", "queue": "q", "limit": 1000, "cores": 4}, 2, 50),
        ({"name": "run_1", "queue": "q", "limit": 1000, "cores": 8}, 3, 50),
        ({"name": "run_9", "queue": "q", "limit": 1000, "cores": 8}, 4, 50),
        ({"name": "run_3", "queue": "other", "limit": 3000, "cores": 4}, 5, 50),
        ({"name": "run_1", "queue": "q", "limit": 999, "cores": 4}, 5, 50),
        ({"name": "other", "queue": "q", "limit": 1000, "cores": 4}, 6, 1000),
        ({"name": "run_1", "queue": "q", "limit": 1000, "cores": 4, "user": "v"}, 6, 1000),
    ],
)
def test_each_rule_fires(profile, kwargs, rule, expected):
    job = mk("new", submit=200, **kwargs)
    assert profile.explain(job) == (rule, expected)
    assert profile.predict(job, 200) == min(expected, job.time_limit)


def test_a_stronger_rule_wins_over_a_newer_weaker_match():
    p = JobProfile()
    p.observe(done(mk("a", name="run_1"), 10, end=10))
    p.observe(done(mk("b", name="run_2"), 20, end=20))
    assert p.explain(mk("c", name="run_1")) == (1, 10)
    assert p.explain(mk("d", name="run_5")) == (2, 20)


def test_newest_match_is_by_end_time_then_observation_order():
    p = JobProfile()
    p.observe(done(mk("a", name="x"), 30, end=300))
    p.observe(done(mk("b", name="x"), 20, end=200))  # observed later but ended earlier
    assert p.explain(mk("c", name="x")) == (1, 30)
    p.observe(done(mk("d", name="x"), 40, end=300))  # same end, observed later: newer
    assert p.explain(mk("c", name="x")) == (1, 40)


def test_empty_names_match_only_with_the_rest_of_the_profile():
    p = JobProfile()
    p.observe(done(mk("a", queue="q", limit=500), 30))
    assert p.explain(mk("b", queue="q", limit=500)) == (1, 30)
    assert p.explain(mk("c", queue="q", limit=500, cores=2)) == (3, 30)
    assert p.explain(mk("d", queue="other", limit=500)) == (6, 500)


def test_numeric_names_are_identifiers_not_counters():
    p = JobProfile()
    p.observe(done(mk("a", name="12"), 30))
    assert p.explain(mk("b", name="13")) == (6, 1000)
    assert p.explain(mk("c", name="12", queue="other")) == (5, 30)


def test_requested_resources_include_memory():
    p = JobProfile()
    p.observe(done(mk("a", name="n", mem=100), 30))
    assert p.explain(mk("b", name="n", mem=100)) == (1, 30)
    assert p.explain(mk("c", name="n", mem=200)) == (3, 30)


def test_prediction_is_clamped():
    p = JobProfile()
    p.observe(done(mk("a", name="n", limit=5000), 4000))
    assert p.predict(mk("b", name="n", limit=100), 5000) == 100
