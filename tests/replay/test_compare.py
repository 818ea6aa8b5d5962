"""Each policy of a comparison named in words (``describe``)."""

from __future__ import annotations

from cpsched.replay.compare import describe
from cpsched.runtime.policy import Policy


def test_the_named_policies_read_as_words_with_no_raw_setting():
    for name in ("today", "easy++", "default", "unbounded", "oracle"):
        words = describe(Policy.named(name))
        assert "=" not in words, (name, words)
    assert describe(Policy.named("default")) == (
        "HCP3 (constraint programming) on the users' last two run times, "
        "a start guarantee once a job has waited 6 h, 1 at a time"
    )
    assert describe(Policy.named("unbounded")) == (
        "HCP3 (constraint programming) on the users' last two run times"
    )
    # Its prediction is the limit: no job outlives it, so the overrun rule goes unsaid.
    assert describe(Policy.named("today")) == "EASY backfilling on the users' requested times"


def test_a_setting_without_words_is_listed_by_name():
    words = describe(Policy(overrun="doubling", retrain_every=10))
    assert "a job past its prediction expected to run twice as long" in words
    assert words.endswith("; retrain_every=10")


def test_a_prediction_margin_is_said_except_for_the_oracle_which_ignores_it():
    assert describe(Policy.named("unbounded", prediction_margin=2)).endswith(
        "last two run times, planned 2 times as long"
    )
    assert "planned" not in describe(Policy.named("oracle", prediction_margin=2))


def test_an_upper_estimate_for_running_jobs_is_said_except_for_the_oracle():
    words = describe(Policy.named("unbounded", prediction_upper_quantile=0.9))
    assert words.endswith("running jobs planned to the 0.9 quantile of the user's errors")
    assert "quantile" not in describe(Policy.named("oracle", prediction_upper_quantile=0.9))


def test_trial_runs_are_said_in_words():
    words = describe(Policy(trial_run=60))
    assert words.endswith(", jobs predicted longer tried for 1 min on what is left idle")
