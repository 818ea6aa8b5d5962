"""The prediction margin: the inner predictor's answer scaled, within the request."""

from __future__ import annotations

import pytest

from cpsched.errors import ConfigError
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.margin import Margin
from cpsched.predictor.oracle import Oracle
from cpsched.predictor.upper import UpperQuantile
from cpsched.runtime.policy import Policy
from tests.predictor._util import done, mk


def test_a_margin_scales_the_prediction_and_never_passes_the_request():
    p = Margin(LastTwo(), 2)
    p.observe(done(mk("a"), 100))
    p.observe(done(mk("b"), 300))
    assert p.predict(mk("x", limit=1000), 500) == 400  # 2 × (100 + 300) / 2
    assert p.predict(mk("y", limit=300), 500) == 300  # the request caps it
    assert p.predict(mk("z", user="new", limit=700), 500) == 700  # no history: the request


def test_a_margin_learns_through_its_inner_predictor_and_says_so_in_its_name():
    inner = LastTwo()
    p = Margin(inner, 1.5)
    p.observe(done(mk("a"), 100))
    assert inner.predict(mk("x"), 200) == 100
    assert p.name == "last-twox1.5" and p.memory == inner.memory


def test_a_margin_scales_an_upper_estimate_and_plans_others_with_the_prediction():
    plain = Margin(LastTwo(), 2)
    plain.observe(done(mk("a"), 100))
    assert plain.upper(mk("x", limit=1000), 200) == plain.predict(mk("x", limit=1000), 200)
    bounded = Margin(UpperQuantile(LastTwo(), 0.9, per_user=4, min_user=2), 2)
    for i, run in enumerate((100, 300, 100, 300)):
        bounded.observe(done(mk(f"j{i}", submit=1000 * i), run))
    job = mk("y", limit=100_000)
    assert bounded.upper(job, 9000) == 2 * bounded.inner.upper(job, 9000)  # type: ignore[attr-defined]
    assert bounded.upper(job, 9000) > bounded.predict(job, 9000)
    assert bounded.upper_basis(job, 9000).startswith("2 times ")


def test_a_margin_must_be_positive():
    with pytest.raises(ConfigError, match="margin"):
        Margin(LastTwo(), 0)


def test_the_policy_wraps_its_predictor_only_with_a_margin_and_never_the_oracle():
    assert isinstance(Policy(prediction_margin=3).make_predictor(), Margin)
    assert isinstance(Policy().make_predictor(), LastTwo)
    oracle = Policy(predictor="oracle", prediction_margin=3).make_predictor(run_times={"j": 5})
    assert isinstance(oracle, Oracle)
