"""Cluster lifecycle: built in the background after a start, retired on request (issue 42,
item 5)."""

from __future__ import annotations

from tests.service.conftest import AUTH, TOKEN_A, TOKEN_READ, finished, job, snapshot
from tests.service.test_retention import indexed_starts

AUTH_A = {"Authorization": f"Bearer {TOKEN_A}"}
AUTH_READ = {"Authorization": f"Bearer {TOKEN_READ}"}


def test_a_retired_cluster_is_gone_with_its_history_and_metrics(client) -> None:
    for cluster in ("a", "b"):
        body = snapshot(queued=[job("1")])
        assert client.post(f"/v1/clusters/{cluster}/dispatch", json=body, headers=AUTH).is_success
        jobs = [finished(f"f{k}", 0, 100 + k) for k in range(3)]
        client.post(f"/v1/clusters/{cluster}/jobs/finished", json={"jobs": jobs}, headers=AUTH)
    # Read-only tokens and tokens of other clusters may not retire it.
    assert client.delete("/v1/clusters/a", headers=AUTH_READ).status_code == 403
    assert client.delete("/v1/clusters/b", headers=AUTH_A).status_code == 403
    answer = client.delete("/v1/clusters/a", headers=AUTH)
    assert answer.status_code == 200, answer.text
    # One audit row, a queued and a start prediction, three finished jobs.
    assert answer.json() == {
        "cluster": "a",
        "deleted": {"decisions": 1, "predictions": 2, "finished_jobs": 3},
    }
    assert client.delete("/v1/clusters/a", headers=AUTH).status_code == 404
    assert client.get("/v1/clusters/a/decisions", headers=AUTH).json()["entries"] == []
    info = client.get("/v1/clusters/a/jobs/f1", headers=AUTH).json()
    assert info["state"] == "unknown"
    metrics = client.get("/metrics").text
    assert 'cluster="a"' not in metrics and 'cluster="b"' in metrics
    # The other cluster keeps everything, the decision that started its job 1 too.
    assert client.get("/v1/clusters/b/jobs/f1", headers=AUTH).json()["state"] == "finished"
    assert indexed_starts(client) == (1, 0)  # b's start; a's went with its audit row
    assert client.get("/v1/clusters/b/jobs/1", headers=AUTH).json()["decisions_total"] == 1


def test_a_restart_answers_at_once_and_builds_clusters_in_the_background(make_client) -> None:
    first = make_client()
    for k in range(20):
        body = {"jobs": [finished(f"f{k}", 0, 100)]}
        first.post(f"/v1/clusters/c{k}/jobs/finished", json=body, headers=AUTH)
    restarted = make_client()
    assert restarted.get("/healthz").status_code == 200
    orchestrator = restarted.app.state.orchestrator
    assert orchestrator.runtime("c19").observed == 1  # asked for: built by the call
    orchestrator.close()  # the warm-up stops with the service
