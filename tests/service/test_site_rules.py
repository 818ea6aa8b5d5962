"""The site's rules over the API: partitions, features, reservations, exclusive jobs and
held jobs as a bridge sends them, and what the service says of a job they hold back."""

from __future__ import annotations

from typing import Any

from tests.service.conftest import AUTH, job, node, snapshot


def dispatch(client, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.post("/v1/clusters/c1/dispatch", json=body, headers=AUTH)
    assert answer.status_code == 200, answer.text
    return answer.json()


def site(**extra: Any) -> dict[str, Any]:
    body = snapshot(
        nodes=[
            {**node("c1"), "features": ["skylake"]},
            {**node("c2"), "features": ["icelake", "ib"]},
            {**node("g1", gpu=2), "features": ["ib"]},
        ],
        **{k: v for k, v in extra.items() if k in ("queued", "running", "time")},
    )
    body["partitions"] = [
        {"name": "cpu", "nodes": ["c1", "c2"], "max_time": 3600},
        {"name": "gpu", "nodes": ["g1"], "max_nodes": 1},
    ]
    body["reservations"] = extra.get("reservations", [])
    return body


def starts(decision: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {s["job_id"]: s["allocation"] for s in decision["starts"]}


def test_jobs_start_only_in_their_partition_and_on_their_features(client):
    queued = [
        {**job("g", units=2), "partition": "gpu"},
        {**job("ib", submit=1), "partition": "cpu", "features": "ib&icelake"},
        {**job("any", submit=2, units=3)},
    ]
    got = starts(dispatch(client, site(queued=queued)))
    assert set(got["g"]) == {"g1"}
    assert got["ib"] == {"c2": 1}
    assert "any" in got


def test_held_jobs_never_start_and_the_service_says_why(client):
    queued = [
        {**job("dep"), "eligible": False, "reason": "Dependency"},
        {**job("long", submit=1, limit=7200), "partition": "cpu"},
    ]
    assert starts(dispatch(client, site(queued=queued))) == {}
    info = client.get("/v1/clusters/c1/jobs/dep", headers=AUTH).json()
    assert info["pending"]["rules"] == ["held back: Dependency"]
    info = client.get("/v1/clusters/c1/jobs/long", headers=AUTH).json()
    assert "PartitionTimeLimit" in info["pending"]["rules"][0]


def test_nothing_runs_into_a_maintenance_window(client):
    window = [{"name": "maint", "nodes": ["c1", "c2"], "start": 1500, "end": 5000}]
    queued = [{**job("long", limit=900), "partition": "cpu"}, {**job("short", limit=400)}]
    decision = dispatch(client, site(queued=queued, reservations=window))
    got = starts(decision)
    assert "long" not in got  # [1000, 1900) meets [1500, 5000) on every cpu node
    assert set(got["short"]) <= {"c1", "c2", "g1"}
    info = client.get("/v1/clusters/c1/jobs/long", headers=AUTH).json()
    assert any("reservation maint" in rule for rule in info["pending"]["rules"])


def test_an_exclusive_job_gets_whole_nodes(client):
    running = [{**job("r"), "start": 900, "allocation": {"c1": 1}}]
    queued = [{**job("x"), "exclusive": True, "partition": "cpu"}, {**job("s", submit=1)}]
    got = starts(dispatch(client, site(running=running, queued=queued)))
    assert got["x"] == {"c2": 1}
    assert "c2" not in got["s"]


def test_a_job_naming_an_unknown_partition_or_bad_features_is_rejected_alone(client):
    queued = [
        {**job("nowhere"), "partition": "debug"},
        {**job("counts", submit=1), "features": "ib*2"},
        {**job("ok", submit=2)},
        {**job("too big", submit=3, units=5), "partition": "gpu"},  # g1 has 4 cores
    ]
    decision = dispatch(client, site(queued=queued))
    rejected = {r["job_id"]: r["reason"] for r in decision["rejected"]}
    assert "partition(s) gpu" in rejected["too big"]
    assert "debug" in rejected["nowhere"] and "declared" in rejected["nowhere"]
    assert "feature expression" in rejected["counts"]
    assert "ok" in starts(decision)


def test_a_reservation_on_an_unknown_node_is_a_422(client):
    body = site(reservations=[{"name": "r", "nodes": ["zz"], "start": 0, "end": 10}])
    answer = client.post("/v1/clusters/c1/dispatch", json=body, headers=AUTH)
    assert answer.status_code == 422
    assert "zz" in answer.json()["detail"]
