"""The duration rules, once for the replay and the service: predict at first sight and at
start, raise an extended job to its limit, never learn a censored run time; and the
service's snapshot view gives the durations the simulator's events give."""

from __future__ import annotations

import random
from dataclasses import astuple, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core import Job, RunningJob, Snapshot
from cpsched.predictor.base import FinishedJob
from cpsched.runtime.durations import DurationBook, RunningChanges
from cpsched.runtime.overrun import OverrunRule
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


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rule=st.sampled_from(["one-second", "request", "ladder", "doubling"]),
)
def test_a_sync_from_the_running_changes_gives_the_book_a_whole_sync_gives(
    seed: int, rule: OverrunRule
) -> None:
    """The service's book follows a busy machine from what changed since its last snapshot
    (:class:`RunningChanges`); over any history of arrivals, starts (by the workload manager
    or as decided), ends, limit extensions, lessons and overrun corrections it holds what
    a sync from every running job gives, and predicts the same jobs."""
    rng = random.Random(seed)
    machine = nodes(*[64] * 8)
    whole, changes = DurationBook(Counting(), rule), DurationBook(Counting(), rule)
    books = (whole, changes)
    queue: list[Job] = []
    run: dict[str, RunningJob] = {}
    before: Snapshot | None = None
    t, made = 0, 0
    for step in range(14):
        t += rng.choice([10, 60, 300, 2000])
        for k in range(rng.randrange(4)):  # arrivals
            queue.append(job(f"j{step}-{k}", submit=t, limit=rng.choice([100, 1000, 5000])))
        for rj in list(run.values()):  # ends, extensions
            if rng.random() < 0.25:
                del run[rj.job.id]
                censored = rng.random() < 0.2
                for book in books:
                    book.learn(rj.job, rj.start, t, censored=censored)
            elif rng.random() < 0.15:
                limit = rj.time_limit + rng.choice([100, 3000])
                run[rj.job.id] = replace(rj, time_limit=limit, extensions=rj.extensions + 1)
        for j in list(queue):  # the workload manager starts some on its own
            if rng.random() < 0.3:
                queue.remove(j)
                run[j.id] = running(j, t, [(rng.randrange(8), 1)])
        now = snapshot(t, machine, run=list(run.values()), queue=queue)
        told = None
        if before is not None:
            kept = {rj.job.id: rj for rj in before.running}
            added = [rj for rj in now.running if kept.get(rj.job.id) != rj]
            gone = (kept.keys() - run.keys()) | ({rj.job.id for rj in added} & kept.keys())
            told = RunningChanges(before, added, gone)
        stored = {rj.job.id: 777 for rj in now.running if rng.random() < 0.1}
        asked = [
            book.without_start_prediction(now, told if book is changes else None) for book in books
        ]
        assert {i for i in asked[1] if i in stored} <= set(asked[0])
        predicted = [book.sync(now, stored, told if book is changes else None) for book in books]
        assert sorted(map(astuple, predicted[0])) == sorted(map(astuple, predicted[1]))
        made += len(predicted[0])
        assert whole.durations == changes.durations
        for book in books:
            book.correct(t)
        assert whole.durations == changes.durations
        for j in queue:  # cpsched decides some starts (the workload manager may not follow)
            if rng.random() < 0.2:
                for book in books:
                    book.started(j, t, book.start_prediction(j, t))
        before = now
    assert made > 0


def test_a_job_touched_while_the_book_syncs_is_worked_out_again_at_the_next_sync():
    """A dispatch abandoned at its deadline may still correct jobs in its thread while the
    next call syncs: what it touches then is kept for the sync after (here the predictor,
    asked during the sync, stands for that thread)."""
    machine = nodes(4, 4)
    a, b = job("a", limit=1000), job("b", limit=1000)
    book = DurationBook(Counting(), "request")
    first = snapshot(0, machine, run=[running(a, 0, [(0, 1)])])
    book.sync(first, {})
    touch = book._touch
    book.predictor.predict = lambda job, t: touch("a") or 100  # type: ignore[method-assign]
    second = snapshot(10, machine, run=[running(a, 0, [(0, 1)]), running(b, 10, [(1, 1)])])
    book.sync(second, {}, RunningChanges(first, second.running[1:], frozenset()))
    assert book._touched == {"a"}


class Bounded(Counting):
    """Counting, with an upper estimate three times its prediction."""

    def upper(self, job: Job, t: int) -> int:
        return 3 * self.predict(job, t)

    def upper_basis(self, job: Job, t: int) -> str:
        return "three times"


def test_a_job_is_queued_with_the_central_estimate_and_runs_with_the_upper_one():
    events, views = DurationBook(Bounded()), DurationBook(Bounded())
    machine = nodes(4, 4)
    a, b = job("a", limit=1000), job("b", limit=1000)
    assert events.queued(a, 0) == 100
    assert events.started(a, 0) == 300
    # The service: b seen running without a stored start prediction gets the upper one.
    made = views.sync(snapshot(0, machine, run=[running(b, 0, [(0, 1)])], queue=[a]), {})
    assert views.durations == {"a": 100, "b": 300}
    assert {(p.job_id, p.kind, p.value, p.basis) for p in made} == {
        ("b", "start", 300, "three times"),
        ("a", "queued", 100, None),
    }
    assert views.start_prediction(a, 0) == 300 and views.start_basis(a, 0) == "three times"


def after(calls: int):
    """A ``stop`` that says the time is up after ``calls`` asks."""
    asked = 0

    def stop() -> bool:
        nonlocal asked
        asked += 1
        return asked > calls

    return stop


def test_new_jobs_past_the_time_for_predicting_are_planned_with_their_requests_until_later():
    predictor = Counting()
    book = DurationBook(predictor)
    queue = [job(f"q{k}", limit=1000 + k, submit=k) for k in range(6)]
    made = book.sync(snapshot(10, nodes(1), queue=queue), {}, stop=after(2))
    assert [p.job_id for p in made] == ["q0", "q1"]
    assert book.deferred == 4
    assert [book.durations[j.id] for j in queue] == [100, 100, 1002, 1003, 1004, 1005]
    # q3 leaves the queue unpredicted; q6 arrives. The deferred go first, then the new one.
    queue = [*queue[:3], *queue[4:], job("q6", limit=3000, submit=20)]
    made = book.sync(snapshot(20, nodes(1), queue=queue), {}, stop=after(2))
    assert [p.job_id for p in made] == ["q2", "q4"]
    assert book.deferred == 2 and "q3" not in book.durations
    assert book.durations["q5"] == 1005 and book.durations["q6"] == 3000
    made = book.sync(snapshot(30, nodes(1), queue=queue), {})  # no time limit: all
    assert [p.job_id for p in made] == ["q5", "q6"]
    assert book.deferred == 0
    assert {book.durations[j.id] for j in queue} == {100}
    # A deferred job that starts is predicted at its start as any other.
    book.sync(snapshot(40, nodes(1), queue=[job("q7", limit=500)]), {}, stop=after(0))
    assert book.durations["q7"] == 500
    assert book.started(job("q7", limit=500), 40) == 100
