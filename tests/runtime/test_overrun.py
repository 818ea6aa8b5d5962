"""The overrun rules: a running job that outlived its prediction gets a new one, never past
its limit, the same whether corrected at every call or once (replay and service agree)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpsched.runtime.durations import DurationBook
from cpsched.runtime.overrun import LADDER, OVERRUN_RULES, overrun_duration
from tests.factories import job, nodes, running, snapshot
from tests.runtime.test_durations import Counting

RULES = st.sampled_from(OVERRUN_RULES)


def test_each_rule_on_a_job_predicted_100_s_that_has_run_150_s_of_its_7200():
    assert overrun_duration("one-second", 100, 150, 7200) == 100
    assert overrun_duration("request", 100, 150, 7200) == 7200
    assert overrun_duration("ladder", 100, 150, 7200) == 300
    assert overrun_duration("doubling", 100, 150, 7200) == 200


def test_the_ladder_past_its_last_rung_and_every_rule_past_the_limit():
    assert overrun_duration("ladder", 100, LADDER[-1], 10 * LADDER[-1]) == 10 * LADDER[-1]
    for rule in OVERRUN_RULES[1:]:  # a job already past its limit: its limit, overdue
        assert overrun_duration(rule, 100, 500, 400) == 400


@given(
    rule=RULES,
    duration=st.integers(1, 10**6),
    elapsed=st.integers(0, 10**6),
    limit=st.integers(1, 10**6),
)
def test_a_new_prediction_outlasts_the_time_run_and_never_the_limit(rule, duration, elapsed, limit):
    new = overrun_duration(rule, min(duration, limit), elapsed, limit)
    if min(duration, limit) > elapsed or rule == "one-second":
        assert new == min(duration, limit)
    elif elapsed >= limit:
        assert new == limit
    else:
        assert elapsed < new <= limit


@given(
    rule=RULES,
    duration=st.integers(1, 10**5),
    limit=st.integers(1, 10**6),
    times=st.lists(st.integers(0, 10**6), max_size=8),
)
def test_correcting_at_every_call_gives_what_correcting_once_gives(rule, duration, limit, times):
    duration = min(duration, limit)
    stepwise = duration
    for t in sorted(times):
        stepwise = overrun_duration(rule, stepwise, t, limit)
    if times:
        once = overrun_duration(rule, duration, max(times), limit)
        assert stepwise == once


@pytest.mark.parametrize("rule", OVERRUN_RULES)
def test_the_replay_and_the_service_books_correct_alike(rule):
    a = job("a", limit=5000)
    events, views = DurationBook(Counting(), rule), DurationBook(Counting(), rule)
    events.queued(a, 0)
    views.sync(snapshot(0, nodes(4), queue=[a]), {})
    events.started(a, 0)
    views.started(a, 0, views.start_prediction(a, 0))
    for t in (50, 100, 170, 400, 2000, 4999, 6000):
        views.sync(snapshot(t, nodes(4), run=[running(a, 0, [(0, 1)])]), {})
        events.correct(t)
        views.correct(t)
        assert events.durations == views.durations, t


def test_the_book_corrects_only_overdue_jobs_and_forgets_finished_ones():
    book = DurationBook(Counting(), "request")
    a, b = job("a", limit=5000), job("b", limit=300)
    for j in (a, b):
        book.queued(j, 0)
        book.started(j, 0)  # both predicted 100 s
    book.correct(99)
    assert book.durations == {"a": 100, "b": 100}
    book.correct(100)
    assert book.durations == {"a": 5000, "b": 300}
    book.finished(b, 0, 250, censored=False)
    book.correct(10_000)
    assert book.durations == {"a": 5000}


class Recording:
    """A dispatcher that starts nothing and keeps the durations it was handed."""

    name = "recording"

    def __init__(self) -> None:
        self.seen: list[dict[str, int]] = []

    def decide(self, snapshot, durations):
        from cpsched.core import Decision

        self.seen.append(dict(durations))
        return Decision(starts=())


def test_a_cluster_corrects_overdue_jobs_before_its_dispatcher_plans():
    from cpsched.runtime.cluster import Cluster

    dispatcher = Recording()
    cluster = Cluster(dispatcher, Counting(), overrun="request")
    a = job("a", limit=5000)
    run_a = running(a, 0, [(0, 1)])
    cluster.book.sync(snapshot(50, nodes(4), run=[run_a]), {})
    cluster.decide(snapshot(50, nodes(4), run=[run_a]))
    cluster.book.sync(snapshot(120, nodes(4), run=[run_a]), {})
    cluster.decide(snapshot(120, nodes(4), run=[run_a]))
    assert dispatcher.seen == [{"a": 100}, {"a": 5000}]
