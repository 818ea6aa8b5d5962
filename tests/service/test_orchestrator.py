"""The orchestrator never leaves a cluster without an answer: a late, invalid or failing
dispatcher is replaced by the fallback heuristic, and the answer says so."""

from __future__ import annotations

import threading
import time

import pytest

from cpsched.core import Decision, Diagnostics, Start
from cpsched.runtime.deadline import ClockDeadline
from tests.service.conftest import AUTH, job, snapshot


class Slow:
    """A dispatcher that answers only when released (the test's stand-in for a solver
    that overruns its deadline)."""

    name = "slow"

    def __init__(self) -> None:
        self.release = threading.Event()

    def decide(self, snapshot, durations):
        self.release.wait(10)
        return Decision(starts=(), diagnostics=Diagnostics("slow"))


class Overfull:
    name = "overfull"

    def decide(self, snapshot, durations):
        # Ten units of a one-core job on node 0, which has four cores.
        return Decision(
            starts=(Start(snapshot.queued[0].id, ((0, 10),)),), diagnostics=Diagnostics("overfull")
        )


class Broken:
    name = "broken"

    def decide(self, snapshot, durations):
        raise RuntimeError("solver bug")


def swap_dispatcher(client, cluster, dispatcher):
    runtime = client.app.state.orchestrator.runtime(cluster)
    runtime.dispatcher = dispatcher
    return runtime


@pytest.mark.parametrize(("dispatcher", "status"), [(Overfull(), "invalid"), (Broken(), "error")])
def test_bad_dispatcher_answers_with_fallback(make_client, dispatcher, status):
    # A deadline no busy machine overruns: the reason must be the dispatcher's, not the
    # clock's (CI saw 'deadline' once for a first, cold dispatch at the default 0.2 s).
    client = make_client(defaults={"deadline": 30.0})
    swap_dispatcher(client, "c1", dispatcher)
    answer = client.post(
        "/v1/clusters/c1/dispatch", json=snapshot(queued=[job("q1")]), headers=AUTH
    )
    assert answer.status_code == 200
    d = answer.json()
    assert d["diagnostics"]["fallback"] is True
    assert d["diagnostics"]["solver_status"] == status
    assert d["diagnostics"]["fallback_reason"] == status
    assert [s["job_id"] for s in d["starts"]] == ["q1"]  # EASY's answer
    assert (
        f'cpsched_dispatch_fallbacks_total{{cluster="c1",reason="{status}"}} 1.0'
        in client.get("/metrics").text
    )


def test_deadline_passes_fallback_answers(make_client):
    client = make_client(defaults={"deadline": 0.3})
    slow = Slow()
    swap_dispatcher(client, "c1", slow)
    try:
        d = client.post(
            "/v1/clusters/c1/dispatch", json=snapshot(queued=[job("q1")]), headers=AUTH
        ).json()
    finally:
        slow.release.set()
    assert d["diagnostics"]["solver_status"] == "deadline"
    assert d["diagnostics"]["fallback"] is True
    assert [s["job_id"] for s in d["starts"]] == ["q1"]


def test_cp_dispatcher_configured_per_cluster(make_client):
    client = make_client(
        # A deadline no busy machine overruns: a cold first call on a loaded CI host read
        # the request for the whole default 0.2 s and the fallback answered.
        clusters={
            "cp": {
                "dispatcher": "hcp3",
                "cp_deterministic": True,
                "cp_work_limit": 0.05,
                "deadline": 30.0,
            }
        }
    )
    body = snapshot(queued=[job("q1"), job("q2", units=4), job("q3", gpu=1)])
    d = client.post("/v1/clusters/cp/dispatch", json=body, headers=AUTH).json()
    assert d["diagnostics"]["dispatcher"] == "hcp3"
    assert {s["job_id"] for s in d["starts"]} == {"q1", "q2", "q3"}


@pytest.mark.parametrize("learned", ["adaboost", "quantile-boost"])
def test_a_learned_predictor_retrains_in_the_background_and_never_blocks_dispatch(
    make_client, learned
):
    from tests.service.conftest import finished

    client = make_client(defaults={"predictor": learned, "retrain_every": 10})
    runtime = client.app.state.orchestrator.runtime("c1")
    assert runtime.predictor.background is True
    jobs = [finished(f"j{i}", 100 * i, 100 * i + 50 + i, user=f"u{i % 3}") for i in range(30)]
    ack = client.post("/v1/clusters/c1/jobs/finished", json={"jobs": jobs}, headers=AUTH).json()
    assert ack["stored"] == 30
    # Dispatching does not wait for a fit: it answers with whatever model exists (or
    # last-two before the first one).
    answer = client.post(
        "/v1/clusters/c1/dispatch", json=snapshot(time=5000, queued=[job("q1")]), headers=AUTH
    )
    assert answer.status_code == 200
    runtime.predictor.training_.result(timeout=60)
    # Retrains that came due while the first fit ran are started by the next dispatch.
    for _ in range(3):
        client.post("/v1/clusters/c1/dispatch", json=snapshot(time=5001), headers=AUTH)
        runtime.predictor.training_.result(timeout=60)
    assert runtime.predictor.model_.trained_on == 30


def test_a_finished_batch_holds_the_cluster_lock_only_to_learn_a_slice(client, monkeypatch):
    """A dispatch never waits for a whole batch: each slice is committed without the
    cluster's lock, which is taken only to learn that slice (issue 20: a dispatch waited
    1.8 s behind 10,000 finished jobs)."""
    from cpsched.service import ingest
    from cpsched.service.store import history
    from tests.service.conftest import finished

    runtime = client.app.state.orchestrator.runtime("c1")
    writes: list[tuple[int, bool]] = []
    store = history.store_finished

    def spying(session, cluster, jobs):
        writes.append((len(jobs), runtime.lock.locked()))
        return store(session, cluster, jobs)

    monkeypatch.setattr(history, "store_finished", spying)
    size = ingest.FINISHED_SLICE
    batch = {"jobs": [finished(f"j{i}", 0, 100 + i) for i in range(2 * size + 7)]}
    ack = client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH).json()
    assert ack == {"stored": 2 * size + 7, "duplicates": 0, "refused": []}
    assert writes == [(size, False), (size, False), (7, False)]
    assert runtime.observed == 2 * size + 7
    again = client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH).json()
    assert again == {"stored": 0, "duplicates": 2 * size + 7, "refused": []}


class Fickle:
    """A dispatcher that answers an identical input differently each time (as a CP search
    limited by wall time may): it starts the queue's n-th job on the n-th call."""

    name = "fickle"

    def __init__(self) -> None:
        self.calls = 0

    def decide(self, snapshot, durations):
        self.calls += 1
        chosen = snapshot.queued[(self.calls - 1) % len(snapshot.queued)]
        return Decision(starts=(Start(chosen.id, ((0, 1),)),), diagnostics=Diagnostics("fickle"))


def test_an_identical_snapshot_gets_the_same_answer(make_client):
    from tests.service.conftest import finished

    # A deadline no busy machine overruns: the fallback answering would not call fickle
    # (seen with a second test suite beside this one: 2 calls where 3 were counted).
    client = make_client(defaults={"deadline": 30.0})
    fickle = Fickle()
    swap_dispatcher(client, "c1", fickle)
    body = snapshot(queued=[job("q1"), job("q2")])

    def starts(payload):
        answer = client.post("/v1/clusters/c1/dispatch", json=payload, headers=AUTH).json()
        return [s["job_id"] for s in answer["starts"]]

    first = starts(body)
    assert starts(body) == first  # not decided again
    assert starts({**body, "dry_run": True}) == first
    assert fickle.calls == 1
    assert starts({**body, "time": body["time"] + 1}) != first  # another snapshot
    assert fickle.calls == 2
    # The same snapshot again, but alice's jobs are now predicted otherwise: decided anew.
    again = {**body, "time": body["time"] + 1}
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": [finished("h", 0, 5)]}, headers=AUTH)
    starts(again)
    assert fickle.calls == 3


def test_the_deadline_covers_the_whole_answer(make_client, monkeypatch):
    """The dispatcher gets what is left of the deadline once reading the request took its
    share (issue 20: deadline_s covered the solve only; 100,000 queued jobs at 0.5 s took
    4.65 s), and none at all when reading it took the whole deadline."""
    import time

    from cpsched.service import orchestrator

    client = make_client(defaults={"deadline": 0.5})
    slow = Slow()
    runtime = swap_dispatcher(client, "c1", slow)
    convert = orchestrator.to_snapshot
    reading = {"seconds": 0.3}

    def slow_to_read(request, memo=None, delta=None):
        time.sleep(reading["seconds"])
        return convert(request, memo, delta)

    monkeypatch.setattr(orchestrator, "to_snapshot", slow_to_read)
    given: list[float] = []  # the seconds the dispatcher was given, per call
    decide = runtime.decide

    def recording(snapshot, deadline=None):
        given.append(deadline.given)
        return decide(snapshot, deadline)

    monkeypatch.setattr(runtime, "decide", recording)
    try:
        d = client.post(
            "/v1/clusters/c1/dispatch", json=snapshot(queued=[job("q1")]), headers=AUTH
        ).json()
        assert d["diagnostics"]["fallback_reason"] == "deadline"
        assert [s["job_id"] for s in d["starts"]] == ["q1"]
        # Decided within the deadline counted from arrival: had reading not counted, the
        # dispatcher would have had the whole 0.5 s after it (0.8 s). The client's own
        # round trip is not asserted: under CI's load it once took 1.0 s with the
        # service's measure at the deadline (the brief: speed is measured, not asserted).
        assert d["diagnostics"]["wall_ms"] < 500 + 50
        # The dispatcher was given what was left: about 0.2 s, less the answer's reserve.
        assert len(given) == 1 and 0.05 < given[0] < 0.2
        reading["seconds"] = 0.6  # reading alone takes the deadline: the fallback answers
        d = client.post(
            "/v1/clusters/c1/dispatch", json=snapshot(time=1001, queued=[job("q1")]), headers=AUTH
        ).json()
        assert d["diagnostics"]["fallback_reason"] == "deadline"
        assert len(given) == 1  # the dispatcher was not called
    finally:
        slow.release.set()


def test_a_cp_dispatcher_answers_by_the_time_it_is_given(make_client):
    """HCP3 reads this call's time from its state: given too little, it answers with its
    own fallback, in time, instead of being abandoned by the service."""
    from cpsched.core.cp.budget import Budget
    from cpsched.core.cp.search import SearchConfig

    assert Budget(SearchConfig(deadline=2.0), lambda: 0.0, 0.5).deadline == 0.5
    assert Budget(SearchConfig(deadline=2.0), lambda: 0.0, 5.0).deadline == 2.0
    client = make_client(defaults={"dispatcher": "hcp3"})
    body = snapshot(queued=[job("q1"), job("q2", units=3), job("q3", units=6)])
    client.post("/v1/clusters/c1/dispatch", json=body, headers=AUTH)
    runtime = client.app.state.orchestrator.runtime("c1")
    decision = runtime.decide(runtime.last_snapshot, ClockDeadline.within(0.0))
    assert decision.diagnostics.fallback is True
    assert decision.diagnostics.fallback_reason.startswith("no time left")
    assert runtime.dispatcher_state.timings.fallback_s > 0  # what the service keeps for it


def test_the_fallback_stops_at_the_deadline_with_valid_starts(make_client) -> None:
    # 2,000 startable jobs and a 1 ms deadline: the fallback (EASY) cannot look at them
    # all; it answers with the starts it made, marked partial, and the next call goes on.
    client = make_client(defaults={"deadline": 0.001}, max_body_bytes=10_000_000)
    nodes = [{"name": f"n{i}", "resources": {"cpu": 4}} for i in range(2000)]
    queued = [job(f"q{i}", submit=i) for i in range(2000)]
    body = snapshot(nodes=nodes, queued=queued)
    d = client.post("/v1/clusters/c1/dispatch", json=body, headers=AUTH).json()
    assert d["diagnostics"]["fallback"] and d["diagnostics"]["partial"]
    assert len(d["starts"]) < 2000
    assert any("stopped at the deadline" in note for note in d["diagnostics"]["notes"])
    metrics = client.get("/metrics").text
    assert 'cpsched_partial_decisions_total{cluster="c1"} 1.0' in metrics


def test_the_wait_bound_learns_the_waits_of_applied_starts_only(make_client):
    """Overdue is judged by how long jobs started on the cluster waited: a dry run's
    starts (schedule mode) are not the cluster's, so they teach nothing."""
    client = make_client(
        defaults={"deadline": 30.0, "wait_bound": 21600, "wait_overdue_quantile": 0.98}
    )
    recent = client.app.state.orchestrator.runtime("c1").dispatcher_state.recent_waits
    body = snapshot(time=1000, queued=[job("q1", submit=400), job("q2", submit=900)])
    client.post("/v1/clusters/c1/dispatch", json={**body, "dry_run": True}, headers=AUTH)
    assert list(recent.waits) == []
    answer = client.post("/v1/clusters/c1/dispatch", json=body, headers=AUTH).json()
    assert sorted(s["job_id"] for s in answer["starts"]) == ["q1", "q2"]
    assert sorted(recent.waits) == [100, 600]


def test_finished_jobs_end_in_todays_schedule_when_they_end_on_the_cluster(make_client):
    """Today's scheduler run beside learns a job's run time from the finished batch the
    bridge posts, not before: q1 runs there to its limit until then."""
    from tests.service.conftest import finished

    client = make_client(defaults={"wait_bound_today": 3600})
    schedule = client.app.state.orchestrator.runtime("c1").dispatcher_state.today_schedule
    body = snapshot(time=1000, queued=[job("q1", submit=900, limit=600)])
    client.post("/v1/clusters/c1/dispatch", json=body, headers=AUTH)
    assert schedule.ends == [(1600, "q1")]  # started at 1000 in the schedule, limit 600
    batch = {"jobs": [{**finished("q1", 1000, 1100), "submit": 900, "time_limit": 600}]}
    ack = client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH).json()
    assert ack["stored"] == 1
    assert sorted(schedule.ends) == [(1100, "q1"), (1600, "q1")]


def test_new_jobs_not_predicted_within_the_deadline_wait_with_their_requests_then_are(
    make_client, monkeypatch
) -> None:
    # A predictor slow enough that 300 new jobs cannot all be predicted in the 30% of a
    # 0.2 s deadline a call may spend on them (a learned predictor's burst, magnified);
    # each call predicts 100 at least.
    from sqlalchemy import func, select

    from cpsched.predictor.lasttwo import LastTwo
    from cpsched.service.store.models import PredictionRow

    predict = LastTwo.predict

    def slow(self, job, t):
        time.sleep(0.002)
        return predict(self, job, t)

    monkeypatch.setattr(LastTwo, "predict", slow)
    client = make_client(defaults={"deadline": 0.2})
    queued = [job(f"q{i}", submit=i) for i in range(300)]
    # The machine is full until 10**6: no job starts, all stay queued.
    busy = [{**job("r", limit=10**6, units=8), "start": 0, "allocation": {"n1": 4, "n2": 4}}]
    runtime = client.app.state.orchestrator.runtime("c1")

    def stored() -> int:
        with client.app.state.orchestrator.sessions() as session:
            kind = PredictionRow.kind == "queued"
            return session.scalar(select(func.count()).where(kind))

    t, unpredicted = 1000, []
    while True:
        body = snapshot(time=t, queued=queued, running=busy)
        d = client.post("/v1/clusters/c1/dispatch", json=body, headers=AUTH).json()
        unpredicted.append(runtime.book.deferred)
        notes = d["diagnostics"]["notes"]
        said = f"{runtime.book.deferred} new queued jobs planned with their requests"
        assert any(note.startswith(said) for note in notes) == (runtime.book.deferred > 0)
        # Only real predictions are stored, each once; the rest wait with their requests.
        assert stored() == 300 - runtime.book.deferred
        if not runtime.book.deferred or len(unpredicted) == 40:
            break
        t += 10
    assert 0 < unpredicted[0] <= 200  # the burst did not fit the first call
    assert unpredicted[-1] == 0  # and later calls predicted every job
    assert unpredicted == sorted(unpredicted, reverse=True)
    metrics = client.get("/metrics").text
    assert 'cpsched_unpredicted_queued_jobs{cluster="c1"} 0.0' in metrics
