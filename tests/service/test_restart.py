"""A restart rebuilds each cluster's predictor from what it remembers (issue 20, item 5:
/readyz answered after 119 s with 1.9 million stored jobs, all of them replayed)."""

from __future__ import annotations

from sqlalchemy import delete, select

from cpsched.predictor.adaboost import AdaBoost
from cpsched.predictor.quantile_boost import QuantileBoost
from cpsched.service.store import history
from cpsched.service.store.models import FittedModelRow
from tests.service.conftest import AUTH, finished, job, snapshot


def predicted(client, users: list[str], time: int) -> dict[str, int]:
    queued = [{**job(f"q-{u}", submit=time), "user": u, "time_limit": 10_000} for u in users]
    nodes = [{"name": f"n{i}", "resources": {"cpu": 4}} for i in range(len(users))]
    body = snapshot(time=time, nodes=nodes, queued=queued)
    answer = client.post("/v1/clusters/c1/dispatch", json=body, headers=AUTH).json()
    return {s["job_id"]: s["predicted_run_time"] for s in answer["starts"]}


def test_last_two_is_rebuilt_exactly_from_each_users_two_newest_jobs(make_client, monkeypatch):
    client = make_client()
    users = [f"u{i}" for i in range(5)]
    # 40 jobs per user, run times that differ job to job, ending out of posting order.
    jobs = [
        {**finished(f"{u}-{k}", 1000 * k, 1000 * k + 10 + 7 * k + 3 * i), "user": u}
        for i, u in enumerate(users)
        for k in range(40)
    ]
    jobs.reverse()
    ack = client.post("/v1/clusters/c1/jobs/finished", json={"jobs": jobs}, headers=AUTH).json()
    assert ack["stored"] == 200
    before = predicted(client, users, 50_000)
    read: list[int] = []
    remembered = history.remembered

    def counting(session, cluster, memory):
        rows = remembered(session, cluster, memory)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(history, "remembered", counting)
    restarted = make_client()
    # Built in the background after the start, or by this first call: read once.
    assert predicted(restarted, users, 50_001) == before
    assert read == [10]  # two per user, not 200


def test_a_bounded_memory_reads_each_users_newest_and_the_newest_overall(client):
    from cpsched.predictor.base import Memory

    jobs = [{**finished(f"a{k}", 0, 100 + k), "user": "a"} for k in range(30)]
    jobs += [{**finished(f"b{k}", 0, 10 + k), "user": "b"} for k in range(30)]
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": jobs}, headers=AUTH)
    orchestrator = client.app.state.orchestrator
    cluster = orchestrator.runtime("c1").cluster_id
    with orchestrator.sessions() as session:
        rows = history.remembered(session, cluster, Memory(per_user=3, recent=5))
        everything = history.remembered(session, cluster, Memory(per_user=None, recent=None))
    # a's 5 newest (ends 125-129) cover "newest overall" and a's 3; b adds its 3 newest.
    assert [r.job_id for r in rows] == ["b27", "b28", "b29", "a25", "a26", "a27", "a28", "a29"]
    assert len(everything) == 60
    assert [r.end_time for r in everything] == sorted(r.end_time for r in everything)


def test_adaboost_is_rebuilt_without_fitting_on_the_way_and_fits_once_after(
    make_client, monkeypatch
):
    policy = {"predictor": "adaboost", "retrain_every": 10}
    client = make_client(defaults=policy)
    jobs = [finished(f"j{k}", 100 * k, 100 * k + 50 + 7 * k, user=f"u{k % 3}") for k in range(60)]
    jobs.append(finished("killed", 0, 9_000, state="timeout"))  # censored: not learnt
    ack = client.post("/v1/clusters/c1/jobs/finished", json={"jobs": jobs}, headers=AUTH).json()
    assert ack["stored"] == 61
    first = client.app.state.orchestrator.runtime("c1").predictor
    if first.training_ is not None:  # the first service's own fits, in its background
        first.training_.result(timeout=60)
    forget_stored_models(client)  # as before any model was stored: fitted again
    fitted_on = counting_fits(monkeypatch, AdaBoost)
    restarted = make_client(defaults=policy)
    predictor = restarted.app.state.orchestrator.runtime("c1").predictor
    assert predictor.training_ is not None
    predictor.training_.result(timeout=60)
    # One fit, on all 60 learnt jobs, started once the rebuild was done: not one every
    # ten jobs on the way (six were due).
    assert fitted_on == [60]
    assert predictor.model_ is not None and predictor.model_.trained_on == 60


def counting_fits(monkeypatch, learner: type) -> list[int]:
    """The ``trained_on`` of each fit ``learner`` makes from now on (it still fits)."""
    fitted_on: list[int] = []
    fit = learner._fit

    def counting(self, rows, targets, trained_on):
        fitted_on.append(trained_on)
        return fit(self, rows, targets, trained_on)

    monkeypatch.setattr(learner, "_fit", counting)
    return fitted_on


def forget_stored_models(client) -> None:
    with client.app.state.orchestrator.sessions.begin() as session:
        session.execute(delete(FittedModelRow))


def settled(client, cluster: str = "c1"):
    """The cluster's predictor once its background fits (and any owed) are done."""
    predictor = client.app.state.orchestrator.runtime(cluster).predictor
    while (predictor.training_ is not None and not predictor.training_.done()) or predictor._owed:
        if predictor.training_ is not None:
            predictor.training_.result(timeout=60)
        predictor.retrain_if_owed()
    return predictor


def test_a_restart_predicts_with_the_model_stored_before_it_without_fitting(
    make_client, monkeypatch
):
    policy = {"predictor": "quantile-boost", "retrain_every": 20}
    client = make_client(defaults=policy)
    users = [f"u{k}" for k in range(3)]
    jobs = [finished(f"j{k}", 100 * k, 100 * k + 50 + 37 * k, user=users[k % 3]) for k in range(60)]
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": jobs}, headers=AUTH)
    first = settled(client)
    # The next finished batch stores the model fitted since (at most 20 jobs old).
    late = finished("late", 7_000, 7_100, user="u0")
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": [late]}, headers=AUTH)
    with client.app.state.orchestrator.sessions() as session:
        (row,) = session.scalars(select(FittedModelRow)).all()
    assert row.predictor == "quantile-boost"
    before = predicted(client, users, 50_000)

    fits: list[int] = []
    monkeypatch.setattr(QuantileBoost, "_fit", lambda self, rows, targets, n: fits.append(n))
    restarted = make_client(defaults=policy)
    assert predicted(restarted, users, 50_000) == before
    again = restarted.app.state.orchestrator.runtime("c1").predictor
    assert fits == [] and again.training_ is None
    assert again.fitted_model().trained_on == first.fitted_model().trained_on == 60
    # Retiring the cluster deletes its model with the rest.
    assert restarted.delete("/v1/clusters/c1", headers=AUTH).status_code == 200
    with restarted.app.state.orchestrator.sessions() as session:
        assert session.scalars(select(FittedModelRow)).all() == []


def test_a_stored_model_of_other_settings_is_fitted_again(make_client, monkeypatch, caplog):
    client = make_client(defaults={"predictor": "quantile-boost", "retrain_every": 20})
    jobs = [finished(f"j{k}", 100 * k, 100 * k + 50 + 37 * k, user=f"u{k % 3}") for k in range(60)]
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": jobs}, headers=AUTH)
    settled(client)
    client.post(
        "/v1/clusters/c1/jobs/finished", json={"jobs": [finished("late", 0, 9)]}, headers=AUTH
    )
    fits = counting_fits(monkeypatch, QuantileBoost)
    # A new release whose predictor fits with other settings than the stored model's.
    settings = QuantileBoost._hyperparameters
    monkeypatch.setattr(
        QuantileBoost, "_hyperparameters", lambda self: {**settings(self), "max_iter": 50}
    )
    restarted = make_client(defaults={"predictor": "quantile-boost", "retrain_every": 20})
    predictor = settled(restarted)
    assert fits == [61]
    assert "does not suit the predictor's settings" in caplog.text
    assert predictor.fitted_model().trained_on == 61
