"""The HTTP API against SQLite and the real PostgreSQL."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from cpsched.service.store.database import make_engine
from cpsched.service.store.models import DecisionRow, FinishedJobRow, PredictionRow
from tests.service.conftest import (
    AUTH,
    TOKEN_A,
    TOKEN_READ,
    finished,
    job,
    node,
    settings_for,
    snapshot,
)


def dispatch(client, body, cluster="c1", headers=AUTH):
    return client.post(f"/v1/clusters/{cluster}/dispatch", json=body, headers=headers)


def test_dispatch_starts_jobs_on_nodes_with_room(client):
    running = {**job("r1", units=4), "start": 500, "allocation": {"n1": 4}}
    body = snapshot(running=[running], queued=[job("q1", submit=900, gpu=1), job("q2", submit=950)])
    answer = dispatch(client, body)
    assert answer.status_code == 200, answer.text
    decision = answer.json()
    starts = {s["job_id"]: s["allocation"] for s in decision["starts"]}
    # n1's four cores are taken by r1: both jobs must go to n2, the GPU job included.
    assert starts == {"q1": {"n2": 1}, "q2": {"n2": 1}}
    assert decision["decision_id"] >= 1
    assert decision["diagnostics"]["dispatcher"] == "easy"
    assert all(s["predicted_run_time"] == 600 for s in decision["starts"])


def test_unknown_resource_type_rejects_the_job_not_the_snapshot(client):
    body = snapshot(queued=[job("bad", fpga=1), job("ok")])
    decision = dispatch(client, body).json()
    assert [s["job_id"] for s in decision["starts"]] == ["ok"]
    assert decision["rejected"][0]["job_id"] == "bad"
    assert "fpga" in decision["rejected"][0]["reason"]
    info = client.get("/v1/clusters/c1/jobs/bad", headers=AUTH).json()
    assert info["state"] == "rejected"
    assert "fpga" in info["rejected_because"]


def test_job_bigger_than_the_cluster_is_rejected(client):
    decision = dispatch(client, snapshot(queued=[job("huge", units=100)])).json()
    assert decision["starts"] == []
    assert "never start" in decision["rejected"][0]["reason"]


def test_drained_node_gets_no_new_job(client):
    nodes = [{**node("n1"), "state": "drain"}, node("n2")]
    decision = dispatch(client, snapshot(nodes=nodes, queued=[job("q1")])).json()
    assert decision["starts"][0]["allocation"] == {"n2": 1}


def test_malformed_snapshots_get_422_with_a_reason(client):
    unknown_node = snapshot(running=[{**job("r1"), "start": 1, "allocation": {"nX": 1}}])
    answer = dispatch(client, unknown_node)
    assert answer.status_code == 422
    assert "nX" in answer.json()["detail"]

    twice = snapshot(nodes=[node("n1"), node("n1")])
    assert dispatch(client, twice).status_code == 422

    bad_types = dispatch(client, {"time": "soon", "nodes": []})
    assert bad_types.status_code == 422
    assert "time" in bad_types.json()["detail"]

    wrong_units = snapshot(running=[{**job("r1", units=2), "start": 1, "allocation": {"n1": 1}}])
    assert dispatch(client, wrong_units).status_code == 422

    unknown_field = {**snapshot(), "extra": 1}
    assert dispatch(client, unknown_field).status_code == 422


def test_auth(client):
    assert dispatch(client, snapshot(), headers={}).status_code == 401
    assert (
        dispatch(client, snapshot(), headers={"Authorization": "Bearer nope-nope"}).status_code
        == 401
    )
    limited = {"Authorization": f"Bearer {TOKEN_A}"}
    assert dispatch(client, snapshot(), cluster="b", headers=limited).status_code == 403
    assert dispatch(client, snapshot(), cluster="a", headers=limited).status_code == 200
    # Refused before the body is looked at.
    assert client.post("/v1/clusters/b/jobs/finished", json={}, headers=limited).status_code == 403
    assert client.get("/v1/clusters/c1/jobs/x").status_code == 401


def test_a_read_only_token_reads_but_never_posts(client):
    reader = {"Authorization": f"Bearer {TOKEN_READ}"}
    refused = dispatch(client, snapshot(queued=[job("q1")]), headers=reader)
    assert refused.status_code == 403
    assert "read-only" in refused.json()["detail"]
    body = {"jobs": [finished("f1", 0, 10)]}
    posted = client.post("/v1/clusters/c1/jobs/finished", json=body, headers=reader)
    assert posted.status_code == 403
    delta = {"base": "0" * 64, "time": 1000}
    posted = client.post("/v1/clusters/c1/dispatch/delta", json=delta, headers=reader)
    assert posted.status_code == 403
    assert dispatch(client, snapshot(queued=[job("q1")])).status_code == 200
    assert client.get("/v1/clusters/c1/decisions", headers=reader).json()["entries"]
    assert client.get("/v1/clusters/c1/jobs/q1", headers=reader).json()["state"] == "queued"


def test_body_limit(client):
    big = snapshot(queued=[job(f"q{i}") for i in range(3000)])
    answer = dispatch(client, big)
    assert answer.status_code == 413
    assert answer.json()["error"] == "body_too_large"


def test_finished_jobs_are_idempotent(client, database_url):
    batch = {"jobs": [finished("j1", 0, 100), finished("j2", 0, 200), finished("j1", 0, 100)]}
    first = client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH).json()
    again = client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH).json()
    assert first == {"stored": 2, "duplicates": 1, "refused": []}
    assert again == {"stored": 0, "duplicates": 3, "refused": []}
    with make_engine(database_url).connect() as conn:
        assert conn.scalar(select(func.count()).select_from(FinishedJobRow)) == 2


def test_finished_jobs_out_of_the_clusters_time_are_refused_the_others_stored(client):
    dispatch(client, snapshot(time=5000))
    glitch = finished("glitch", 1000, 2**40)  # a clock error: it would be the newest for ever
    early = {**finished("early", 900, 1000), "submit": 950}  # started before its submission
    good = finished("good", 1000, 4000)
    batch = {"jobs": [glitch, early, good]}
    ack = client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH).json()
    assert ack["stored"] == 1
    reasons = {r["job_id"]: r["reason"] for r in ack["refused"]}
    assert "after the cluster's latest time" in reasons["glitch"]
    assert "before its submission" in reasons["early"]


def test_a_snapshot_older_than_the_last_answered_is_answered_with_a_note(client):
    dispatch(client, snapshot(time=5000))
    answer = dispatch(client, snapshot(time=4000, queued=[job("q1")])).json()
    notes = answer["diagnostics"]["notes"]
    assert any("older than the last one answered (5000)" in n for n in notes)
    assert [s["job_id"] for s in answer["starts"]] == ["q1"]  # still decided
    metrics = client.get("/metrics").text
    assert 'cpsched_snapshots_out_of_order_total{cluster="c1"} 1.0' in metrics


def test_bad_finished_jobs_are_refused_one_by_one(client, database_url):
    # An end before its start, and a name with a NUL (which PostgreSQL cannot store):
    # each is refused with why; the valid jobs around them are stored.
    batch = {
        "jobs": [
            finished("ok", 0, 100),
            finished("bad", 100, 50),
            {**finished("nul", 0, 10), "name": "a\x00b"},
            {"no": "id"},
            finished("ok2", 0, 20),
        ]
    }
    answer = client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH)
    assert answer.status_code == 200
    ack = answer.json()
    assert (ack["stored"], ack["duplicates"]) == (2, 0)
    reasons = {r["job_id"]: r["reason"] for r in ack["refused"]}
    assert set(reasons) == {"bad", "nul", "#3"}
    assert "before start" in reasons["bad"]
    assert "control character" in reasons["nul"]
    with make_engine(database_url).connect() as conn:
        stored = set(conn.scalars(select(FinishedJobRow.job_id)))
    assert stored == {"ok", "ok2"}


def test_a_finished_batch_that_is_not_a_list_of_jobs_is_refused_whole(client):
    answer = client.post("/v1/clusters/c1/jobs/finished", json={"jobs": [1]}, headers=AUTH)
    assert answer.status_code == 422


def test_predictor_learns_and_is_rebuilt_from_history(make_client):
    client = make_client()
    batch = {"jobs": [finished("j1", 0, 100), finished("j2", 100, 300)]}
    client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH)
    decision = dispatch(client, snapshot(time=400, queued=[job("q1", submit=400)])).json()
    assert decision["starts"][0]["predicted_run_time"] == 150  # last-two: mean of 100, 200
    # A new process on the same database predicts the same from the stored history.
    restarted = make_client()
    decision = dispatch(restarted, snapshot(time=400, queued=[job("q2", submit=400)])).json()
    assert decision["starts"][0]["predicted_run_time"] == 150


def test_the_prediction_error_metric_is_rebuilt_from_history_at_start(make_client):
    client = make_client()
    dispatch(client, snapshot(queued=[job("q1"), job("q2")]))  # both start: predicted
    batch = {"jobs": [finished("q1", 1000, 1100), finished("q2", 1000, 1300)]}
    client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH)
    labels = '{cluster="c1",predictor="last-two"}'

    def error_metric(text: str) -> list[str]:
        return [
            line
            for line in text.splitlines()
            if line.startswith("cpsched_prediction_abs_error_seconds_") and labels in line
        ]

    before = error_metric(client.get("/metrics").text)
    assert f"cpsched_prediction_abs_error_seconds_count{labels} 2.0" in before
    restarted = make_client()
    restarted.get("/v1/clusters/c1/jobs/q1", headers=AUTH)  # first use: rebuilt now
    after = error_metric(restarted.get("/metrics").text)
    assert [x for x in after if "_created" not in x] == [x for x in before if "_created" not in x]


def test_killed_jobs_do_not_teach_the_predictor(client):
    batch = {"jobs": [finished("j1", 0, 100), finished("j2", 0, 50, state="timeout")]}
    client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH)
    decision = dispatch(client, snapshot(queued=[job("q1")])).json()
    assert decision["starts"][0]["predicted_run_time"] == 100


def test_dry_run_is_audited_but_not_applied(client, database_url):
    decision = dispatch(client, {**snapshot(queued=[job("q1")]), "dry_run": True}).json()
    assert decision["dry_run"] is True and decision["starts"]
    with make_engine(database_url).connect() as conn:
        audit = conn.execute(select(DecisionRow.dry_run, DecisionRow.starts)).one()
        kinds = set(conn.scalars(select(PredictionRow.kind)))
    assert audit.dry_run is True
    assert audit.starts[0]["job_id"] == "q1"
    assert kinds == {"queued"}  # no start was recorded as applied


def test_job_info_explains_pending_and_finished(client):
    running = {**job("r1", units=8), "start": 500, "limit": 600, "allocation": {"n1": 4, "n2": 4}}
    running.pop("limit")
    queued = {**job("q1", submit=900, units=2, cpu=2, gpu=1), "partition": "gpu", "qos": "high"}
    dispatch(client, snapshot(running=[running], queued=[queued]))
    info = client.get("/v1/clusters/c1/jobs/q1", headers=AUTH).json()
    assert info["state"] == "queued"
    assert info["pending"]["waits_for"] == {"cpu": 4}  # the gpus are free on n2
    assert info["predictor"] == "last-two"
    assert (info["request"], info["time_limit"]) == ({"cpu": 4, "gpu": 2}, 600)
    assert (info["partition"], info["qos"], info["priority"]) == ("gpu", "high", None)
    assert client.get("/v1/clusters/c1/jobs/r1", headers=AUTH).json()["state"] == "running"
    client.post(
        "/v1/clusters/c1/jobs/finished", json={"jobs": [finished("r1", 500, 900)]}, headers=AUTH
    )
    done = client.get("/v1/clusters/c1/jobs/r1", headers=AUTH).json()
    assert (done["state"], done["start"], done["end"]) == ("finished", 500, 900)
    assert (done["request"], done["time_limit"]) == ({"cpu": 1}, 600)
    assert client.get("/v1/clusters/c1/jobs/nobody", headers=AUTH).json()["state"] == "unknown"


def test_job_info_lists_the_decisions_that_started_or_extended_it(client):
    first = dispatch(client, snapshot(queued=[job("q1"), job("q2", units=64)])).json()
    running = {**job("q1"), "start": 1000, "allocation": {"n1": 1}}
    dispatch(client, snapshot(time=1060, running=[running], queued=[job("q2", units=64)]))
    info = client.get("/v1/clusters/c1/jobs/q1", headers=AUTH).json()
    assert info["state"] == "running"
    assert info["decisions"] == [
        {"decision_id": first["decision_id"], "time": 1000, "action": "start", "dry_run": False}
    ]
    assert (info["decisions_total"], info["shadow"]) == (1, None)  # applied, not a dry run
    waiting = client.get("/v1/clusters/c1/jobs/q2", headers=AUTH).json()
    assert (waiting["decisions"], waiting["decisions_total"]) == ([], 0)


def test_job_info_in_shadow_mode_says_what_the_workload_manager_did_instead(client):
    dry = {"dry_run": True}
    # t=1000: cpsched would start q1 now; q2 is not submitted yet.
    dispatch(client, {**snapshot(queued=[job("q1")]), **dry})
    # t=1300: the workload manager started q1 only at 1300, and q2 (submitted at 1100)
    # at 1100, before any dry run saw it; q3 waits, and cpsched would start it.
    q1 = {**job("q1"), "start": 1300, "allocation": {"n1": 1}}
    q2 = {**job("q2", submit=1100), "start": 1100, "allocation": {"n1": 1}}
    dispatch(client, {**snapshot(1300, running=[q1, q2], queued=[job("q3", submit=1200)]), **dry})

    def shadow(job_id):
        return client.get(f"/v1/clusters/c1/jobs/{job_id}", headers=AUTH).json()["shadow"]

    assert shadow("q1") == {
        "would_start": 1000,
        "started": 1300,
        "verdict": "earlier",
        "difference_s": -300,
        "tolerance_s": 60,
    }
    assert (shadow("q2")["would_start"], shadow("q2")["verdict"]) == (None, "later")
    assert (shadow("q3")["would_start"], shadow("q3")["verdict"]) == (1300, "not started")
    decisions = client.get("/v1/clusters/c1/jobs/q1", headers=AUTH).json()["decisions"]
    assert [(d["time"], d["action"], d["dry_run"]) for d in decisions] == [(1000, "start", True)]


def test_job_info_gives_the_start_guarantee_and_the_decisions_keep_it(make_client):
    # Both nodes busy until 1,100 s by their limits; q1 has waited 100 s (the bound is
    # 60 s): it is guaranteed a start at 1,100. q2, 3 cores for 600 s, would fit now on
    # n2 once r2 ends at 1,010, but ends after 1,100 on a node q1 needs: it may not start.
    client = make_client(defaults={"wait_bound": 60})
    nodes = [node("n1"), node("n2")]
    r1 = {**job("r1", units=4, limit=600), "start": 500, "allocation": {"n1": 4}}
    r2 = {**job("r2", units=4, limit=10), "start": 1000, "allocation": {"n2": 4}}
    queued = [job("q1", submit=900, units=8), job("q2", submit=990, units=3)]
    first = dispatch(client, snapshot(nodes=nodes, running=[r1, r2], queued=queued)).json()
    assert first["diagnostics"]["guaranteed"] == 1
    info = client.get("/v1/clusters/c1/jobs/q1", headers=AUTH).json()
    assert info["pending"]["guaranteed_start"] == 1100
    assert (
        client.get("/v1/clusters/c1/jobs/q2", headers=AUTH).json()["pending"]["guaranteed_start"]
        is None
    )
    # r2 ended early: n2 is free, but q2 would still run into q1's guarantee.
    later = dispatch(client, snapshot(time=1020, nodes=nodes, running=[r1], queued=queued)).json()
    assert later["starts"] == []
    assert any("start guarantee" in note for note in later["diagnostics"]["notes"])
    # At 1,100 r1 has ended by its limit: q1 starts, as guaranteed.
    last = dispatch(client, snapshot(time=1100, nodes=nodes, queued=queued)).json()
    assert [s["job_id"] for s in last["starts"]] == ["q1"]
    metrics = client.get("/metrics").text
    assert 'cpsched_guarantees_broken_total{cluster="c1"} 0.0' in metrics


def test_the_default_policy_guarantees_the_longest_waiting_job_once_it_has_waited_6_h(client):
    # No wait_bound in the configuration: the default's 6 h, one job at a time. Both
    # nodes are busy until 30,950 s by their limits; q1 and q2 need both and have waited
    # 7 h and 6.5 h, q3 1 h.
    nodes = [node("n1"), node("n2")]
    r1 = {**job("r1", units=4, limit=600), "start": 29_900, "allocation": {"n1": 4}}
    r2 = {**job("r2", units=4, limit=1000), "start": 29_950, "allocation": {"n2": 4}}
    queued = [
        job("q1", submit=30_000 - 7 * 3600, units=8),
        job("q2", submit=30_000 - 13 * 1800, units=8),
        job("q3", submit=30_000 - 3600, units=8),
    ]
    body = snapshot(time=30_000, nodes=nodes, running=[r1, r2], queued=queued)
    answer = dispatch(client, body).json()
    assert answer["diagnostics"]["guaranteed"] == 1

    def guaranteed(job_id: str) -> int | None:
        info = client.get(f"/v1/clusters/c1/jobs/{job_id}", headers=AUTH).json()
        return info["pending"]["guaranteed_start"]

    assert [guaranteed(j) for j in ("q1", "q2", "q3")] == [30_950, None, None]


def test_start_guarantees_survive_a_restart_of_the_service(make_client):
    # As above: q1 is guaranteed a start at 1,100. The service restarts (a new app on the
    # same database) and r1's limit is then extended by 100 s: the service still knows
    # what it promised, so the promise is counted as broken (a restart used to forget it
    # and make a new one, as if nothing had been promised).
    nodes = [node("n1"), node("n2")]
    r1 = {**job("r1", units=4, limit=600), "start": 500, "allocation": {"n1": 4}}
    r2 = {**job("r2", units=4, limit=10), "start": 1000, "allocation": {"n2": 4}}
    queued = [job("q1", submit=900, units=8), job("q2", submit=990, units=3)]
    before = make_client(defaults={"wait_bound": 60})
    dispatch(before, snapshot(nodes=nodes, running=[r1, r2], queued=queued))
    after = make_client(defaults={"wait_bound": 60})
    extended = {**r1, "time_limit": 700}
    later = snapshot(time=1020, nodes=nodes, running=[extended], queued=queued)
    answer = dispatch(after, later).json()
    assert answer["diagnostics"]["guarantees_broken"] == 1
    assert any("guarantee broken, 100 s later" in n for n in answer["diagnostics"]["notes"])
    info = after.get("/v1/clusters/c1/jobs/q1", headers=AUTH).json()
    assert info["pending"]["guaranteed_start"] == 1200


def test_job_info_says_a_task_job_waits_for_a_split_that_cannot_drift(client):
    # Every node runs a job, due to end in 20 s: Slurm's split of a 5-task job could
    # change when it ends before Slurm allocates the job, so the job is not started now
    # but waits for that end, and its info says why.
    nodes = [node(f"n{i}") for i in (1, 2, 3)]
    running = {
        **job("r1", units=6, limit=520),
        "start": 500,
        "allocation": {"n1": 2, "n2": 2, "n3": 2},
    }
    tasks = {**job("t1", submit=900, units=5), "layout": "block"}
    decision = dispatch(client, snapshot(nodes=nodes, running=[running], queued=[tasks])).json()
    assert decision["starts"] == []
    assert decision["diagnostics"]["split_waiting"] == 1
    info = client.get("/v1/clusters/c1/jobs/t1", headers=AUTH).json()
    assert info["pending"]["waits_for"] == {}
    assert any("Slurm spreads its tasks" in rule for rule in info["pending"]["rules"])
    assert 'cpsched_split_waiting_jobs{cluster="c1"} 1.0' in client.get("/metrics").text


def test_walltime_extension_directive(make_client):
    client = make_client(defaults={"correction": "simple", "correction_step": 600})
    running = {**job("r1", limit=600), "start": 0, "allocation": {"n1": 1}}
    decision = dispatch(client, snapshot(time=590, running=[running])).json()
    assert decision["extensions"] == [
        {"job_id": "r1", "new_time_limit": 1200, "reason": decision["extensions"][0]["reason"]}
    ]


def test_health_ready_metrics(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    dispatch(client, snapshot(queued=[job("q1")]))
    client.post(
        "/v1/clusters/c1/jobs/finished", json={"jobs": [finished("q1", 1000, 1100)]}, headers=AUTH
    )
    text = client.get("/metrics").text
    assert 'cpsched_dispatch_seconds_count{cluster="c1"} 1.0' in text
    assert 'cpsched_dispatch_deadline_seconds{cluster="c1"} 0.2' in text  # the whole answer
    assert 'cpsched_finished_jobs_total{cluster="c1",outcome="stored"} 1.0' in text
    assert (
        'cpsched_prediction_abs_error_seconds_count{cluster="c1",predictor="last-two"} 1.0' in text
    )
    assert 'cpsched_queued_jobs{cluster="c1"} 1.0' in text


def test_metrics_can_require_their_own_token(make_client):
    client = make_client(metrics_token="scrape-secret")
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=AUTH).status_code == 401  # not an API token
    scraped = client.get("/metrics", headers={"Authorization": "Bearer scrape-secret"})
    assert scraped.status_code == 200 and "cpsched_dispatch" in scraped.text
    assert client.get("/healthz").status_code == 200  # the supervisor's routes stay open


def test_metrics_show_the_longest_wait_of_a_job_cpsched_may_start(client):
    held = {**job("held", submit=0), "eligible": False, "reason": "Dependency"}
    queued = [held, job("old", submit=400), job("new", submit=900)]
    dispatch(client, snapshot(time=1000, nodes=[node("n1", cpu=1)], queued=queued))
    text = client.get("/metrics").text
    # 600 s (old), not 1,000 s: the held job is not cpsched's to start.
    assert 'cpsched_longest_wait_seconds{cluster="c1"} 600.0' in text


def test_metrics_and_the_audit_trail_show_the_utilisation(client):
    nodes = [node("n1", cpu=4, mem=8000), node("n2", cpu=4, mem=8000)]
    whole = {**job("r1", units=1, cpu=1, mem=1000), "start": 0, "exclusive": True}
    shared = {**job("r2", units=2, cpu=1, mem=2000), "start": 0}
    running = [whole | {"allocation": {"n1": 1}}, shared | {"allocation": {"n2": 2}}]
    dispatch(
        client, snapshot(time=1000, nodes=nodes, running=running, queued=[job("q", submit=400)])
    )
    text = client.get("/metrics").text
    # n1 is taken whole (4 cpu, 8000 mem), n2 holds 2 cpu and 4000 mem: 6 of 8, 12000 of 16000.
    assert 'cpsched_utilisation_ratio{cluster="c1",resource="cpu"} 0.75' in text
    assert 'cpsched_utilisation_ratio{cluster="c1",resource="mem"} 0.75' in text
    audit = client.get("/v1/clusters/c1/decisions", headers=AUTH).json()["entries"][0]
    assert audit["diagnostics"]["utilisation"] == {"cpu": 0.75, "mem": 0.75}
    assert audit["diagnostics"]["longest_wait_s"] == 600


# SQLite says OperationalError for a missing table, as both databases do for a full
# disk or a lock timeout: the stand-in for a database refusing writes.
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_readyz_fails_while_the_database_refuses_writes_and_recovers_after(client, database_url):
    engine = make_engine(database_url)
    with engine.begin() as conn:  # the table the finished jobs go to is gone
        conn.exec_driver_sql("ALTER TABLE finished_jobs RENAME TO finished_jobs_away")
    post = client.post(
        "/v1/clusters/c1/jobs/finished", json={"jobs": [finished("j", 0, 9)]}, headers=AUTH
    )
    assert post.status_code == 503
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["status"] == "database failing"
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE finished_jobs_away RENAME TO finished_jobs")
    post = client.post(
        "/v1/clusters/c1/jobs/finished", json={"jobs": [finished("j", 0, 9)]}, headers=AUTH
    )
    assert post.status_code == 200
    assert client.get("/readyz").json() == {"status": "ready"}
    engine.dispose()


@pytest.mark.postgres
def test_a_locked_audit_table_gives_quick_503s_not_hung_dispatches(postgres_url, monkeypatch):
    import time

    import psycopg
    from fastapi.testclient import TestClient

    from cpsched.service.app import create_app
    from cpsched.service.store import database
    from tests.service.conftest import settings_for

    # The connections' own lock timeout far above the deadline: a dispatch that waited
    # for it instead of its deadline shows on any machine, however loaded.
    monkeypatch.setattr(database, "LOCK_TIMEOUT_MS", 30_000)
    with TestClient(create_app(settings_for(postgres_url))) as client:
        assert dispatch(client, snapshot(time=100)).status_code == 200
        plain = postgres_url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(plain) as maintenance:  # VACUUM FULL or ALTER TABLE takes this
            maintenance.execute("LOCK TABLE decisions IN ACCESS EXCLUSIVE MODE")
            began = time.monotonic()
            answer = dispatch(client, snapshot(time=200, queued=[job("q1")]))
            waited = time.monotonic() - began
            assert answer.status_code == 503 and answer.headers["Retry-After"]
            # Its writes wait until its deadline (0.2 s; at least 0.15 s for the lock),
            # not the connections' lock timeout (30 s here), nor the lock's whole duration.
            assert waited < 10
            assert client.get("/readyz").status_code == 503
            assert client.get("/healthz").status_code == 200
        assert dispatch(client, snapshot(time=300, queued=[job("q1")])).status_code == 200
        assert client.get("/readyz").json() == {"status": "ready"}


def test_a_sqlite_writer_holding_the_lock_gives_a_quick_503(tmp_path):
    import sqlite3
    import time

    from fastapi.testclient import TestClient

    from cpsched.service.app import create_app
    from tests.service.conftest import settings_for

    path = tmp_path / "cpsched.db"
    with TestClient(create_app(settings_for(f"sqlite:///{path}"))) as client:
        assert dispatch(client, snapshot(time=100)).status_code == 200
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another writer (a manual session, a backup)
        try:
            began = time.monotonic()
            answer = dispatch(client, snapshot(time=200, queued=[job("q1")]))
            waited = time.monotonic() - began
            assert answer.status_code == 503
            assert waited < 4  # by its deadline, not SQLite's 5 s busy timeout
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert dispatch(client, snapshot(time=300, queued=[job("q1")])).status_code == 200


def test_openapi_documents_the_api(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/clusters/{cluster}/dispatch", "/v1/clusters/{cluster}/jobs/finished"} <= set(paths)


def test_audit_trail_pages_through_every_answer(client):
    dispatch(client, snapshot(queued=[job("q1")]))
    dispatch(client, {**snapshot(time=1001, queued=[job("q2")]), "dry_run": True})
    dispatch(client, snapshot(time=1002))
    first = client.get("/v1/clusters/c1/decisions?limit=2", headers=AUTH).json()
    assert [e["time"] for e in first["entries"]] == [1000, 1001]
    assert [e["dry_run"] for e in first["entries"]] == [False, True]
    assert first["entries"][0]["starts"][0]["job_id"] == "q1"
    rest = client.get(
        f"/v1/clusters/c1/decisions?after_id={first['next_after_id']}", headers=AUTH
    ).json()
    assert [e["time"] for e in rest["entries"]] == [1002]
    assert rest["next_after_id"] is None
    assert client.get("/v1/clusters/c1/decisions").status_code == 401


@pytest.mark.postgres
def test_database_down_is_a_503_not_a_crash(postgres_server, postgres_url):
    import psycopg
    from fastapi.testclient import TestClient

    from cpsched.service.app import create_app

    with TestClient(create_app(settings_for(postgres_url))) as client:
        assert dispatch(client, snapshot(queued=[job("q1")])).status_code == 200
        name = postgres_url.rsplit("/", 1)[1]
        with psycopg.connect(postgres_server.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        batch = {"jobs": [finished("j", 0, 1)]}
        answer = client.post("/v1/clusters/c1/jobs/finished", json=batch, headers=AUTH)
        assert answer.status_code == 503
        assert answer.json()["error"] == "database_unavailable"
        assert client.get("/readyz").status_code == 503
        assert client.get("/healthz").status_code == 200


def test_audit_keeps_whole_snapshots_when_asked(make_client, database_url):
    client = make_client(audit_snapshots=True)
    dispatch(client, snapshot(queued=[job("q1")]))
    with make_engine(database_url).connect() as conn:
        kept = conn.scalar(select(DecisionRow.snapshot))
    assert kept["queued"][0]["id"] == "q1"


def test_clients_ignore_fields_a_newer_service_adds(client):
    from cpsched.wire.schemas import DecisionOut

    answer = dispatch(client, snapshot(queued=[job("q1")])).json()
    answer["diagnostics"]["added_in_a_later_version"] = 1
    answer["also_new"] = []
    assert DecisionOut.model_validate(answer).starts[0].job_id == "q1"


@pytest.mark.parametrize(("overrun", "planned"), [("request", 5500), ("one-second", 1001)])
def test_a_job_past_its_prediction_is_planned_by_the_overrun_rule(make_client, overrun, planned):
    client = make_client(defaults={"overrun": overrun})
    history = [finished(f"h{i}", 0, 100) for i in range(2)]  # alice's jobs take 100 s
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": history}, headers=AUTH)
    # r1 (predicted 100 s, limit 5,000 s) has run 500 s and holds every core.
    running = {**job("r1", limit=5000, units=8), "start": 500, "allocation": {"n1": 4, "n2": 4}}
    decision = dispatch(client, snapshot(running=[running], queued=[job("q1", submit=900)])).json()
    assert decision["starts"] == []
    assert decision["planned"] == {"q1": planned}


def test_default_policy_answers_with_hcp3(make_client):
    # The default policy's dispatcher; a deadline a loaded machine cannot miss (the 0.2 s
    # default counts from the request's arrival: a slow SQLite commit alone can take it).
    client = make_client(defaults={"dispatcher": "hcp3", "deadline": 5.0})
    decision = dispatch(client, snapshot(queued=[job("q1"), job("q2", units=3)])).json()
    assert decision["diagnostics"]["dispatcher"] == "hcp3"
    assert {s["job_id"] for s in decision["starts"]} == {"q1", "q2"}


def test_api_docs_are_served_from_the_service_itself(client):
    docs = client.get("/docs")
    assert docs.status_code == 200
    policy = docs.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "'unsafe-inline'" not in policy.split("style-src")[0]
    sources = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
    assert sources and all(s.startswith("/") for s in sources)  # no CDN
    for source in sources:
        assert client.get(source).status_code == 200, source
    assert client.get("/redoc").status_code == 404


def test_health_answers_while_every_worker_thread_is_busy(client):
    """Dispatches waiting on a locked table can hold every worker thread: /healthz,
    /readyz and /metrics still answer (issue 42: /healthz stopped after ~40 s)."""
    import anyio

    borrowers = [object() for _ in range(1000)]

    async def take_every_thread() -> int:
        limiter = anyio.to_thread.current_default_thread_limiter()
        taken = 0
        for borrower in borrowers[: int(limiter.total_tokens)]:
            limiter.acquire_on_behalf_of_nowait(borrower)
            taken += 1
        return taken

    async def give_back(taken: int) -> None:
        limiter = anyio.to_thread.current_default_thread_limiter()
        for borrower in borrowers[:taken]:
            limiter.release_on_behalf_of(borrower)

    taken = client.portal.call(take_every_thread)
    try:
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").json() == {"status": "ready"}
        assert client.get("/metrics").status_code == 200
    finally:
        client.portal.call(give_back, taken)


def test_job_info_says_when_todays_scheduler_would_have_started_a_waiting_job(make_client):
    # A dry run at 1,000 s: n2 is free, today's EASY (run beside, wait_bound_today)
    # starts q1 at once, but the cluster does not (shadow mode starts nothing). q1 is
    # still queued at the next call: it waits longer than today would have kept it.
    client = make_client(defaults={"wait_bound_today": 3600})
    nodes = [node("n1"), node("n2")]
    r1 = {**job("r1", units=4, limit=600), "start": 500, "allocation": {"n1": 4}}
    body = snapshot(nodes=nodes, running=[r1], queued=[job("q1", submit=900, units=4)])
    client.post("/v1/clusters/c1/dispatch", json={**body, "dry_run": True}, headers=AUTH)
    info = client.get("/v1/clusters/c1/jobs/q1", headers=AUTH).json()
    assert info["pending"]["today_start"] == 1000
    assert 'cpsched_later_than_today_jobs{cluster="c1"} 1.0' in client.get("/metrics").text
    # Once it has left the queue, nothing is said of it.
    client.post("/v1/clusters/c1/dispatch", json=snapshot(time=1010, nodes=nodes), headers=AUTH)
    assert 'cpsched_later_than_today_jobs{cluster="c1"} 0.0' in client.get("/metrics").text
