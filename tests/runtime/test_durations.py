"""The duration rules, once for the replay and the service: predict at first sight and at
start, raise an extended job to its limit, never learn a censored run time; and the
service's snapshot view gives the durations the simulator's events give."""

from __future__ import annotations

from dataclasses import replace

from cpsched.core import Job
from cpsched.predictor.base import FinishedJob
from cpsched.runtime.durations import DurationBook
from tests.factories import job, nodes, running, snapshot


class Counting:
    """Predicts 100 s plus 10 s per job learnt so far: a prediction shows when it was made."""

    name = "counting"

    def __init__(self) -> None:
        self.learnt: list[FinishedJob] = []
        self.calls = 0

    def observe(self, finished: FinishedJob) -> None:
        self.learnt.append(finished)

    def predict(self, job: Job, t: int) -> int:
        self.calls += 1
        return 100 + 10 * len(self.learnt)


def test_a_queued_job_keeps_its_first_prediction_and_is_predicted_again_at_start():
    predictor = Counting()
    book = DurationBook(predictor)
    a, b = job("a", limit=1000), job("b", limit=1000)
    assert book.queued(a, 0) == 100
    book.finished(b, 0, 50, censored=False)  # the predictor learns meanwhile
    assert book.durations["a"] == 100  # still the first prediction
    assert book.started(a, 60) == 110  # predicted again when it starts
    assert book.durations["a"] == 110


def test_an_extended_job_runs_to_its_new_limit_never_less():
    book = DurationBook(Counting())
    a = job("a", limit=1000)
    book.queued(a, 0)
    book.started(a, 0)
    book.extended("a", 1900)
    assert book.durations["a"] == 1900
    book.extended("a", 50)
    assert book.durations["a"] == 1900


def test_a_censored_job_is_forgotten_but_not_learnt():
    predictor = Counting()
    book = DurationBook(predictor)
    a, b = job("a"), job("b")
    for j in (a, b):
        book.queued(j, 0)
        book.started(j, 0)
    book.finished(a, 0, 30, censored=True)
    book.finished(b, 0, 40, censored=False)
    assert book.durations == {}
    assert [f.job.id for f in predictor.learnt] == ["b"]


def test_the_snapshot_view_gives_the_event_view_durations():
    # The simulator reports events; the service sees snapshots. Same history, same book.
    machine = nodes(4, 4)
    a, b, c = job("a", limit=1000), job("b", limit=1000), job("c", submit=5, limit=1000)
    events, views = DurationBook(Counting()), DurationBook(Counting())

    # t=0: a and b queued.
    events.queued(a, 0)
    events.queued(b, 0)
    views.sync(snapshot(0, machine, queue=[a, b]), {})
    assert events.durations == views.durations
    # t=0: the dispatcher starts a.
    events.started(a, 0)
    views.started(a, 0, views.start_prediction(a, 0))
    # t=5: c arrives; b learnt nothing new yet.
    events.queued(c, 5)
    run_a = running(a, 0, [(0, 1)])
    views.sync(snapshot(5, machine, run=[run_a], queue=[b, c]), {})
    assert events.durations == views.durations
    # t=900: a's limit is extended to 1900 (the service sees the raised limit).
    events.extended("a", 1900)
    extended = replace(run_a, time_limit=1900, extensions=1)
    views.sync(snapshot(900, machine, run=[extended], queue=[b, c]), {})
    assert events.durations == views.durations == {"a": 1900, "b": 100, "c": 100}
    # t=950: a ends; the service learns it from the finished batch and stops seeing it.
    events.finished(a, 0, 950, censored=False)
    views.learn(a, 0, 950, censored=False)
    views.sync(snapshot(950, machine, queue=[b, c]), {})
    assert events.durations == views.durations
    # b starts now, predicted with what was learnt from a.
    assert events.started(b, 950) == views.started(b, 950) == 110


def test_a_running_job_the_book_did_not_see_start_takes_the_stored_prediction():
    predictor = Counting()
    book = DurationBook(predictor)
    a = job("a", limit=1000)
    made = book.sync(snapshot(10, nodes(4), run=[running(a, 0, [(0, 1)])]), {"a": 321})
    assert book.durations == {"a": 321} and made == [] and predictor.calls == 0
    fresh = DurationBook(Counting())
    made = fresh.sync(snapshot(10, nodes(4), run=[running(a, 0, [(0, 1)])]), {})
    assert [(p.job_id, p.kind, p.value) for p in made] == [("a", "start", 100)]
