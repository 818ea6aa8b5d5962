"""Snapshot deltas over the API, on SQLite and PostgreSQL: the same answers as whole
snapshots, a stale base refused with 409, and the client's fallback to whole snapshots."""

from __future__ import annotations

import httpx
from sqlalchemy import select

from cpsched.service.store.database import make_engine
from cpsched.service.store.models import DecisionRow
from cpsched.wire.client import ServiceClient
from cpsched.wire.schemas import DispatchRequest
from tests.service.conftest import AUTH, TOKEN, job, node, snapshot

NODES = [node("n1"), node("n2")]


def post(client, path, body):
    return client.post(f"/v1/clusters/c1/{path}", json=body, headers=AUTH)


def test_a_delta_gets_the_answer_its_whole_snapshot_gets(make_client, database_url):
    first = snapshot(time=1000, nodes=NODES, queued=[job(f"q{k}", units=3) for k in range(4)])
    answer = post(make_client(), "dispatch", first).json()
    assert [s["job_id"] for s in answer["starts"]] == ["q0", "q1"]
    client = make_client()  # a second service on the same database, in step with the first
    base = post(client, "dispatch", first).json()["snapshot_digest"]
    # q0 ended, q1 runs, q2 and q3 wait, q4 arrives.
    running = {**job("q1", units=3), "start": 1000, "allocation": {"n2": 3}}
    whole = snapshot(
        time=1100, nodes=NODES, running=[running], queued=[job(f"q{k}", units=3) for k in (2, 3, 4)]
    )
    delta = {
        "base": base,
        "time": 1100,
        "gone": ["q0"],
        "running": [running],
        "queued": [job("q4", units=3)],
    }
    by_delta = post(client, "dispatch/delta", delta).json()
    by_whole = post(make_client(), "dispatch", whole).json()
    assert by_delta["starts"] == by_whole["starts"] != []
    with make_engine(database_url).connect() as conn:
        digests = conn.scalars(select(DecisionRow.snapshot_digest).order_by(DecisionRow.id)).all()
    assert by_delta["snapshot_digest"] in digests


def test_a_delta_on_a_base_the_service_does_not_hold_is_refused_with_409(make_client):
    client = make_client()
    base = post(client, "dispatch", snapshot(queued=[job("q1")])).json()["snapshot_digest"]
    latest = post(client, "dispatch", snapshot(time=1010, queued=[job("q1")])).json()
    refused = post(client, "dispatch/delta", {"base": base, "time": 1020})
    assert refused.status_code == 409
    assert refused.json()["error"] == "stale_base"
    assert "send the whole snapshot" in refused.json()["detail"]
    restarted = make_client()
    fresh = post(restarted, "dispatch/delta", {"base": base, "time": 1020})
    assert fresh.status_code == 409
    # On the base it holds, a delta that contradicts it is bad input.
    unknown = {"base": latest["snapshot_digest"], "time": 1020, "gone": ["nobody"]}
    refused = post(client, "dispatch/delta", unknown)
    assert refused.status_code == 422
    assert "'nobody' is listed as gone but is not in the base" in refused.json()["detail"]


def test_the_client_sends_deltas_and_whole_snapshots_when_it_must(make_client):
    paths: list[str] = []
    service = {"app": make_client()}

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        app = service["app"]
        answer = app.post(request.url.path, content=request.content, headers=dict(request.headers))
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    client = ServiceClient(
        "http://svc", TOKEN, "c1", timeout_s=30, transport=httpx.MockTransport(handler)
    )
    queue = [job(f"q{k}", units=3) for k in range(6)]
    answers = []
    for t in range(4):
        if t == 2:
            service["app"] = make_client()  # the service restarted: it holds no base
        body = snapshot(time=1000 + t, nodes=NODES, queued=queue[t : t + 3])
        answers.append(client.dispatch(DispatchRequest.model_validate(body)))
    whole, delta = "/v1/clusters/c1/dispatch", "/v1/clusters/c1/dispatch/delta"
    assert paths == [whole, delta, delta, whole, delta]
    assert all(a.snapshot_digest for a in answers)
