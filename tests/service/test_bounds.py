"""Input the schema accepts is stored on both databases, and input it refuses gets a 4xx
saying why: no 500 from a string PostgreSQL cannot hold, a number a column cannot hold,
or a path parameter (probes of issue 20, item 2)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from cpsched.service.store.database import make_engine
from cpsched.service.store.models import Cluster, FinishedJobRow
from cpsched.wire import schemas
from tests.service.conftest import AUTH, finished, job, node, snapshot

JSON = {**AUTH, "content-type": "application/json"}


def post(client, path, body):
    # Encoded here (ASCII, escapes kept): the test client would refuse a lone surrogate.
    return client.post(f"/v1/clusters/c1/{path}", content=json.dumps(body), headers=JSON)


def test_the_longest_labels_the_schema_allows_are_stored(client, database_url):
    long, user = "é" * 1024, "😀" * 256  # 4 bytes each: the user index holds it
    job_ = {**finished("j" * 256, 0, 10), "user": user, "group": long, "name": long}
    answer = post(client, "jobs/finished", {"jobs": [{**job_, "partition": long}]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["stored"] == 1
    with make_engine(database_url).connect() as conn:
        row = conn.execute(select(FinishedJobRow)).one()
    assert (len(row.job_id), row.user_name, row.partition) == (256, user, long)
    queued = {**job("q"), "user": user, "name": long, "reason": long}
    assert post(client, "dispatch", snapshot(queued=[queued])).status_code == 200
    assert client.get(f"/v1/clusters/c1/jobs/{'j' * 256}", headers=AUTH).json()["user"] == user


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"id": "a\x00b"}, "id"),
        ({"id": "a\x1bb"}, "id"),
        ({"id": "j" * 257}, "id"),
        ({"name": "x\x00"}, "name"),
        ({"name": "x\n"}, "name"),  # a trailing newline (a regular expression's $ takes it)
        ({"user": "u" * 257}, "user"),
        ({"group": "g" * 1025}, "group"),
        ({"units": 2**31}, "units"),
        ({"per_unit": {"c\x00pu": 1}}, "per_unit"),
        ({"per_unit": {f"t{i}": 1 for i in range(65)}}, "per_unit"),
        ({"features": "a\x00"}, "features"),
        ({"reservation": "r\x00"}, "reservation"),
    ],
)
def test_a_finished_job_the_database_cannot_hold_is_refused_alone(client, change, where):
    batch = {"jobs": [{**finished("ok", 0, 10)}, {**finished("bad", 0, 10), **change}]}
    answer = post(client, "jobs/finished", batch)
    assert answer.status_code == 200, answer.text
    ack = answer.json()
    assert ack["stored"] == 1
    (refused,) = ack["refused"]
    assert where in refused["reason"]
    assert refused["job_id"] in {"bad", "#1"}


def test_a_refused_job_id_that_cannot_be_shown_is_named_by_its_place(client):
    # A lone surrogate cannot be encoded in the answer: the refusal names the job's place.
    answer = post(client, "jobs/finished", {"jobs": [finished("a\ud800", 0, 10)]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["refused"][0]["job_id"] == "#0"
    extra = {**finished("j", 0, 10), "x\ud800": 1}
    answer = post(client, "jobs/finished", {"jobs": [extra]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["refused"][0]["job_id"] == "j"


@pytest.mark.parametrize(
    "body",
    [
        snapshot(queued=[job("a\x00b")]),
        snapshot(queued=[{**job("q"), "user": "u\x00"}]),
        snapshot(nodes=[node("n\x00")], queued=[job("q")]),
        snapshot(nodes=[node("n1", **{"g\x00": 1})]),
        snapshot(nodes=[node("n1", cpu=2**31)], queued=[job("q", units=2**31)]),
        snapshot(queued=[job("a\ud800")]),
        {**snapshot(), "x\ud800": 1},
        {**snapshot(), "partitions": [{"name": "p\x00", "nodes": ["n1"]}]},
        {**snapshot(), "reservations": [{"name": "r", "nodes": ["n\x07"], "start": 1, "end": 2}]},
    ],
)
def test_a_snapshot_with_a_string_or_number_no_column_holds_gets_422(client, body):
    answer = post(client, "dispatch", body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "invalid_request"


@pytest.mark.parametrize("path", ["a%00b", "a%1Bb", "a%0Ab", "j" * 257])
def test_a_job_id_in_the_path_no_column_holds_gets_422(client, path):
    answer = client.get(f"/v1/clusters/c1/jobs/{path}", headers=AUTH)
    assert answer.status_code == 422, answer.text


def test_a_job_id_holding_a_slash_can_be_queried(client):
    post(client, "jobs/finished", {"jobs": [finished("pbs/12[3]", 0, 10)]})
    for path in ("pbs/12[3]", "pbs%2F12%5B3%5D"):
        info = client.get(f"/v1/clusters/c1/jobs/{path}", headers=AUTH).json()
        assert (info["job_id"], info["state"]) == ("pbs/12[3]", "finished")


def test_reading_an_unknown_cluster_creates_nothing(client, database_url):
    assert client.get("/v1/clusters/ghost/jobs/j1", headers=AUTH).json()["state"] == "unknown"
    page = client.get("/v1/clusters/ghost/decisions", headers=AUTH).json()
    assert page == {"entries": [], "next_after_id": None}
    with make_engine(database_url).connect() as conn:
        assert list(conn.scalars(select(Cluster.name))) == []


def test_a_snapshot_naming_more_resource_types_than_a_cluster_may_have_gets_422(make_client):
    client = make_client(max_body_bytes=1_000_000)
    # 4,000 nodes, each with a type of its own: was 8.6 s and 1 GB (nodes x types, dense).
    nodes = [{"name": f"n{i}", "resources": {"cpu": 4, f"t{i}": 1}} for i in range(4000)]
    answer = post(client, "dispatch", snapshot(nodes=nodes, queued=[job("q")]))
    assert answer.status_code == 422
    assert "4001 resource types" in answer.json()["detail"]
    one_node = [node("n1", **{f"t{i}": 1 for i in range(65)})]
    assert post(client, "dispatch", snapshot(nodes=one_node)).status_code == 422


def test_rejections_stay_small_in_the_answer_and_the_audit(make_client, database_url):
    client = make_client(max_body_bytes=1_000_000)
    # 64 types on the nodes; 1,000 jobs each asking for one no node has. The reasons name a
    # few known types, not all of them, and the audit row keeps the first 100 rejections.
    nodes = [node("n1", **{f"type-{i:02d}-{'x' * 50}": 1 for i in range(62)})]
    queued = [job(f"q{i}", **{f"missing{i}": 1}) for i in range(1000)]
    body = snapshot(nodes=nodes, queued=queued)
    answer = post(client, "dispatch", body)
    assert answer.status_code == 200, answer.text
    rejected = answer.json()["rejected"]
    assert len(rejected) == 1000
    assert max(len(r["reason"]) for r in rejected) < 600
    assert "more)" in rejected[0]["reason"]
    assert len(answer.content) < 4 * len(json.dumps(body))  # was 130 times
    with make_engine(database_url).connect() as conn:
        from cpsched.service.store.models import DecisionRow

        diagnostics = conn.scalar(select(DecisionRow.diagnostics))
    assert (len(diagnostics["rejected"]), diagnostics["rejected_count"]) == (100, 1000)
    assert len(json.dumps(diagnostics)) < 100_000


@given(st.text())
def test_printable_text_is_what_the_stated_pattern_accepts(text):
    # The check (its fast path, str.isprintable, included) must accept and refuse what the
    # pattern the OpenAPI document states does (schemathesis and clients go by it): a
    # trailing newline too, which re's $ accepts.
    try:
        accepted = schemas._printable(text) == text
    except ValueError:
        accepted = False
    assert accepted == (re.fullmatch(schemas.PRINTABLE[1:-1], text) is not None)
