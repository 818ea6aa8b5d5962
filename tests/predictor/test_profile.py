"""The job-profile heuristic: every rule, its precedence, the name-prefix rule."""

from __future__ import annotations

import pytest

from cpsched.errors import ConfigError
from cpsched.predictor.profile import JobProfile, name_stem
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
    # run_1 matches itself under rule 1 although run_2 is newer; run_5 matches both
    # numbered variants under rule 2, and gets the median of the two.
    assert p.explain(mk("c", name="run_1")) == (1, 10)
    assert p.explain(mk("d", name="run_5")) == (2, 15)


def test_newest_match_is_by_end_time_then_observation_order():
    p = JobProfile(matches=1)  # the paper's rule: the single newest match
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


def test_a_match_predicts_the_median_of_the_newest_matches():
    p = JobProfile(matches=3)
    for i, run in enumerate([10, 1000, 20, 30, 40]):
        p.observe(done(mk(f"j{i}", name="x"), run, end=100 * (i + 1)))
    # The newest three are 20, 30 and 40: the outlier 1000 fell out of the window.
    assert p.explain(mk("n", name="x")) == (1, 30)
    p.observe(done(mk("late", name="x"), 5000, end=600))
    assert p.explain(mk("n", name="x")) == (1, 40)  # median of 30, 40, 5000
    assert p.matched(mk("n", name="x")) == (1, [5000, 40, 30])


def test_the_default_median_resists_one_outlier():
    p = JobProfile()
    for i, run in enumerate([100, 110, 9000, 105, 120]):
        p.observe(done(mk(f"j{i}", name="x"), run, end=10_000 * (i + 1)))
    # The newest match alone (120) would do; a mean would be dragged to about 1900.
    assert p.predict(mk("n", name="x", limit=20_000), 60_000) == 110


def test_fallback_last_two_replaces_the_requested_time_only_when_the_user_has_jobs():
    p = JobProfile(fallback="last-two")
    p.observe(done(mk("a", name="x", limit=5000), 100, end=100))
    p.observe(done(mk("b", name="x", limit=5000), 300, end=400))
    assert p.explain(mk("c", name="other", limit=5000)) == (6, 200)
    assert p.explain(mk("d", name="x", limit=5000)) == (1, 200)  # a match still wins
    assert p.explain(mk("e", user="v", name="x", limit=5000)) == (6, 5000)
    assert JobProfile().explain(mk("c", name="other", limit=5000)) == (6, 5000)


def test_matched_before_sees_only_jobs_ended_by_then():
    p = JobProfile(matches=2, late=2)
    for i, run in enumerate([10, 20, 30, 40]):
        p.observe(done(mk(f"j{i}", name="x"), run, end=100 * (i + 1)))
    job = mk("n", name="x")
    assert p.matched(job) == (1, [40, 30])
    assert p.matched(job, before=250) == (1, [20, 10])
    assert p.matched(job, before=99) == (6, [])


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError):
        JobProfile(matches=0)
    with pytest.raises(ConfigError):
        JobProfile(fallback="guess")  # type: ignore[arg-type]
