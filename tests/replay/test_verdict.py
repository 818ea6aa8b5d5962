"""compare's verdict: one sentence per policy against today, in human units."""

from __future__ import annotations

import pytest

from cpsched.replay.verdict import human_duration, verdict


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "n/a"),
        (0.841, "0.8 s"),
        (3, "3 s"),
        (9.97, "10 s"),
        (38.4, "38 s"),
        (60, "1 min"),
        (3599, "59 min"),
        (4 * 3600 + 12 * 60, "4 h 12 min"),
        (7200, "2 h"),
        (248_239, "2 d 20 h"),
        (86400, "1 d"),
    ],
)
def test_durations_read_as_people_say_them(seconds, text):
    assert human_duration(seconds) == text


def test_the_verdict_names_gain_and_cost_against_today():
    today = {"mean_bounded_slowdown": 86.6, "mean_wait_s": 6378, "max_wait_s": 248_239}
    default = {"mean_bounded_slowdown": 43.88, "mean_wait_s": 4593, "max_wait_s": 541_094}
    by_job = {"earlier": 0.621, "later": 0.079, "later_1d": 0.02}
    assert verdict("default", default, today, by_job) == (
        "default: mean bounded slowdown -49% (43.9 against 86.6), mean wait -28% "
        "(1 h 16 min against 1 h 46 min); 62% of jobs start earlier than today, 8% later "
        "(2% by more than a day); the longest wait 6 d 6 h against 2 d 20 h (2.18× today's)."
    )


def test_a_missing_figure_reads_n_a_not_a_crash():
    text = verdict("x", {"mean_wait_s": 10}, {"mean_wait_s": 0}, {})
    assert "mean bounded slowdown n/a (n/a)" in text and "mean wait n/a" in text


def test_the_verdict_says_what_decisions_and_the_replay_cost_when_timed():
    today = {"mean_bounded_slowdown": 125, "dispatch_ms_p99": 0.254, "replay_wall_s": 0.84}
    default = {"mean_bounded_slowdown": 72.5, "dispatch_ms_p99": 142.4, "replay_wall_s": 60.0}
    assert verdict("default", default, today, {}).endswith(
        "; a decision takes 142 ms at p99 (today 0.254 ms), the replay 1 min (today 0.8 s)."
    )
