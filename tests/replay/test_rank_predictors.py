"""``bench/rank_predictors.py``: its run names stand for the policies they say."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from cpsched.runtime.policy import Policy
from tests.conftest import REPO


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "bench"))  # its siblings are imported by name
    return importlib.import_module("rank_predictors")


def test_a_predictor_is_the_default_with_it(bench: ModuleType) -> None:
    assert bench.policy_of("last-two") == Policy.named("default")
    assert bench.policy_of("today") == Policy.named("today")


def test_margins_upper_estimates_and_trials_written_out(bench: ModuleType) -> None:
    policy = bench.policy_of("quantile-boost*1.01^0.9+trial60")
    assert policy == Policy.named(
        "default",
        predictor="quantile-boost",
        prediction_margin=1.01,
        prediction_upper_quantile=0.9,
        trial_run=60,
    )
