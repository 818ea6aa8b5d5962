"""Retention: history pruned by the cluster's clock, in batches, never what a restart's
predictor learns from (issue 42, item 1)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from cpsched.predictor.base import Memory
from cpsched.service.store import history
from cpsched.service.store.retention import DAY_S, prune_finished
from tests.service.conftest import AUTH, finished, job, snapshot
from tests.service.test_restart import predicted

DAY0 = 1_700_000_000
RETENTION = {"audit_days": 1, "predictions_days": 1, "finished_days": 1, "batch_rows": 2}


def post_day(client, day: int, users: list[str]) -> None:
    """A day of the cluster's life: a dispatch with each user's job queued (an audit row
    and predictions), then each user's three jobs of the day finished."""
    now = DAY0 + day * DAY_S
    queued = [{**job(f"q{day}-{u}", submit=now), "user": u} for u in users]
    answer = client.post(
        "/v1/clusters/c1/dispatch", json=snapshot(time=now, queued=queued), headers=AUTH
    )
    assert answer.status_code == 200, answer.text
    jobs = [
        {**finished(f"{u}-{day}-{k}", now + k, now + k + 60 * (day + 1) + k), "user": u}
        for u in users
        for k in range(3)
    ]
    ack = client.post("/v1/clusters/c1/jobs/finished", json={"jobs": jobs}, headers=AUTH)
    assert ack.json()["stored"] == len(jobs)


def counts(client) -> dict[str, int]:
    orchestrator = client.app.state.orchestrator
    with orchestrator.sessions() as session:
        return {
            table: int(session.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar())
            for table in ("decisions", "predictions", "finished_jobs")
        }


def indexed_starts(client) -> tuple[int, int]:
    """The job index of the audit trail (decision_jobs): its rows, and those whose audit
    row is gone."""
    with client.app.state.orchestrator.sessions() as session:
        rows = session.execute(text("SELECT COUNT(*) FROM decision_jobs")).scalar()
        orphans = session.execute(
            text(
                "SELECT COUNT(*) FROM decision_jobs WHERE decision_id NOT IN "
                "(SELECT id FROM decisions)"
            )
        ).scalar()
    return int(rows), int(orphans)


def test_old_history_goes_and_a_restarted_predictor_learns_the_same(make_client) -> None:
    users = ["ann", "bob", "cid"]
    client = make_client(retention=RETENTION, defaults={"predictor": "last-two"})
    for day in range(5):
        post_day(client, day, users)
    before = counts(client)
    # A prediction when a job is first seen queued, another when it starts.
    assert before == {"decisions": 5, "predictions": 30, "finished_jobs": 45}
    promised = predicted(client, users, DAY0 + 5 * DAY_S)
    report = client.app.state.retention.run_once()
    # The clock is day 5 (that last dispatch): rows before day 4 go, in batches of two.
    assert report.deleted == {"decisions": 4, "predictions": 24, "finished_jobs": 36}
    assert counts(client) == {"decisions": 2, "predictions": 12, "finished_jobs": 9}
    assert report.oldest["c1"]["decisions"] == DAY0 + 4 * DAY_S
    assert indexed_starts(client) == (2 * len(users), 0)  # the pruned rows' jobs went too
    metrics = client.get("/metrics").text
    assert 'cpsched_history_pruned_rows_total{kind="finished_jobs"} 36.0' in metrics
    assert "cpsched_database_bytes " in metrics
    assert 'cpsched_history_oldest_time_seconds{cluster="c1",kind="decisions"}' in metrics
    # A restart's last-two reads each user's two newest jobs: all still there.
    restarted = make_client(retention=RETENTION, defaults={"predictor": "last-two"})
    assert predicted(restarted, users, DAY0 + 5 * DAY_S + 1) == promised
    # Its dispatch moved the clock a second on: day 4's audit row and predictions go now.
    again = client.app.state.retention.run_once().deleted
    assert again == {"decisions": 1, "predictions": 6, "finished_jobs": 0}


def test_what_the_predictor_remembers_is_kept_whatever_its_age(client) -> None:
    # Two users: one busy (30 jobs), one whose last job was long ago (3 jobs).
    jobs = [{**finished(f"a{k}", 0, 1000 + k), "user": "a"} for k in range(30)]
    jobs += [{**finished(f"b{k}", 0, 10 + k), "user": "b"} for k in range(3)]
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": jobs}, headers=AUTH)
    orchestrator = client.app.state.orchestrator
    cluster = orchestrator.runtime("c1").cluster_id
    memory = Memory(per_user=2, recent=5)
    with orchestrator.sessions() as session:
        needed = {r.job_id for r in history.remembered(session, cluster, memory)}
    deleted = 0
    while True:
        with orchestrator.sessions.begin() as session:
            gone = prune_finished(session, cluster, before=10**9, batch=4, memory=memory)
        deleted += gone
        if gone < 4:
            break
    with orchestrator.sessions() as session:
        left = {r.job_id for r in history.remembered(session, cluster, Memory(None, None))}
    assert left == needed == {"a25", "a26", "a27", "a28", "a29", "b1", "b2"}
    assert deleted == 33 - 7


@pytest.mark.parametrize("memory", [Memory(per_user=None, recent=None), Memory(1, None)])
def test_a_predictor_that_learns_from_everything_keeps_every_job(client, memory) -> None:
    jobs = [{**finished(f"a{k}", 0, 100 + k), "user": "a"} for k in range(5)]
    client.post("/v1/clusters/c1/jobs/finished", json={"jobs": jobs}, headers=AUTH)
    orchestrator = client.app.state.orchestrator
    cluster = orchestrator.runtime("c1").cluster_id
    with orchestrator.sessions.begin() as session:
        assert prune_finished(session, cluster, before=10**9, batch=10, memory=memory) == 0


def test_retention_can_keep_a_kind_for_ever(make_client) -> None:
    client = make_client(retention={**RETENTION, "audit_days": 0})
    for day in range(3):
        post_day(client, day, ["ann"])
    report = client.app.state.retention.run_once()
    # The clock is day 2's last job end (past its dispatch): days 0 and 1's predictions go
    # (a queued and a start one each), no audit row.
    assert report.deleted["decisions"] == 0 and report.deleted["predictions"] == 4
