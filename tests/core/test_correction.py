"""Walltime-correction policies: limit sequences, caps, and when an extension is due."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpsched.core.correction import CorrectionPolicy, correction_policy, limit_sequence
from cpsched.errors import ConfigError, UnknownPolicyError


def test_simple_adds_an_hour_each_time():
    policy = CorrectionPolicy("simple")
    assert limit_sequence(policy, 7200, 3) == [7200, 10800, 14400, 18000]


def test_simple_step_is_configurable():
    assert limit_sequence(CorrectionPolicy("simple", step=600), 60, 2) == [60, 660, 1260]


def test_power_steps_are_15_minutes_doubling():
    policy = CorrectionPolicy("power")
    assert limit_sequence(policy, 600, 4) == [600, 1500, 3300, 6900, 14100]
    assert [policy.increment(k) for k in range(4)] == [900, 1800, 3600, 7200]


def test_cap_is_reached_and_never_passed():
    policy = CorrectionPolicy("simple", cap=10000)
    assert limit_sequence(policy, 3000, 10) == [3000, 6600, 10000]
    assert policy.next_limit(10000, 2) is None
    assert policy.next_limit(20000, 0) is None  # already above the cap: never shortened


def test_off_never_extends_and_is_never_due():
    policy = CorrectionPolicy("off")
    assert policy.next_limit(100, 0) is None
    assert limit_sequence(policy, 100, 5) == [100]
    assert not policy.due(0, 100, 10**9)


def test_due_within_lead_of_the_limit():
    policy = CorrectionPolicy("simple", lead=60)
    assert not policy.due(start=1000, current_limit=3600, now=4539)
    assert policy.due(start=1000, current_limit=3600, now=4540)
    assert policy.due(start=1000, current_limit=3600, now=5000)


def test_bad_settings_are_typed_errors():
    with pytest.raises(UnknownPolicyError, match="power"):
        correction_policy("double")
    with pytest.raises(UnknownPolicyError):
        CorrectionPolicy("double")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        CorrectionPolicy("simple", step=0)
    with pytest.raises(ConfigError):
        CorrectionPolicy("simple", lead=-1)
    with pytest.raises(ConfigError):
        CorrectionPolicy("simple", cap=0)
    with pytest.raises(ValueError):
        CorrectionPolicy("simple").next_limit(100, -1)


def test_correction_policy_by_name():
    assert correction_policy("power", lead=30, cap=None) == CorrectionPolicy("power", lead=30)


@given(
    kind=st.sampled_from(["simple", "power"]),
    step=st.integers(1, 10**5),
    initial=st.integers(1, 10**6),
    cap=st.none() | st.integers(1, 10**7),
    count=st.integers(0, 30),
)
def test_sequences_grow_and_respect_the_cap(kind, step, initial, cap, count):
    policy = CorrectionPolicy(kind, step=step, base=step, cap=cap)
    limits = limit_sequence(policy, initial, count)
    assert limits[0] == initial
    assert all(b > a for a, b in pairwise(limits))
    if cap is not None:
        assert all(x <= cap for x in limits[1:])
        if initial >= cap:
            assert limits == [initial]
    if cap is None:
        assert len(limits) == count + 1
