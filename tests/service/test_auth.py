"""Authorisation before the body, and the body limit, at the ASGI level: a request
without rights is answered from its headers without one byte of its body received."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cpsched.service.app import create_app
from tests.service.conftest import AUTH, TOKEN_A, settings_for


def call(app, path: str, headers: dict[str, str], chunks: list[bytes]) -> tuple[int, dict, int]:
    """POST ``chunks`` to ``app``; (status, JSON answer, chunks the app asked for)."""
    asked = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        if asked > len(chunks):
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunks[asked - 1], "more_body": asked < len(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1234),
        "server": ("127.0.0.1", 8480),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body), asked


@pytest.fixture
def app(tmp_path):
    return create_app(settings_for(f"sqlite:///{tmp_path / 'auth.db'}"))


BIG = [b"x" * 65536] * 1000  # 64 MiB in chunks, never declared


@pytest.mark.parametrize(
    ("headers", "status", "kind"),
    [
        ({}, 401, "unauthorized"),
        ({"Authorization": "Bearer nope-nope-nope"}, 401, "unauthorized"),
        ({"Authorization": "Basic dXNlcjpwdw=="}, 401, "unauthorized"),
        ({"Authorization": f"Bearer {TOKEN_A}"}, 403, "forbidden"),
    ],
)
def test_a_request_without_rights_is_refused_before_its_body_is_read(app, headers, status, kind):
    for path in ("/v1/clusters/b/dispatch", "/v1/clusters/b/jobs/finished"):
        answered, body, asked = call(app, path, {"content-length": "50000000", **headers}, BIG)
        assert (answered, body["error"], asked) == (status, kind, 0)
        answered, _, asked = call(app, path, {"transfer-encoding": "chunked", **headers}, BIG)
        assert (answered, asked) == (status, 0)


def test_refusals_are_counted(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        assert client.post("/v1/clusters/b/dispatch", content=b"{}").status_code == 401
        limited = {"Authorization": f"Bearer {TOKEN_A}"}
        assert client.post("/v1/clusters/b/dispatch", headers=limited).status_code == 403
        text = client.get("/metrics").text
    assert 'cpsched_bad_requests_total{status="401"} 1.0' in text
    assert 'cpsched_bad_requests_total{status="403"} 1.0' in text


def test_an_authorised_chunked_body_over_the_limit_gets_413(app):
    # settings_for sets max_body_bytes = 200,000; no content-length is declared.
    headers = {**AUTH, "content-type": "application/json", "transfer-encoding": "chunked"}
    status, body, asked = call(app, "/v1/clusters/c1/dispatch", headers, BIG)
    assert (status, body["error"]) == (413, "body_too_large")
    assert asked <= 4  # cut off as soon as it passed the limit
    status, body, _ = call(app, "/v1/clusters/c1/jobs/finished", headers, BIG)
    assert status == 413


def test_a_declared_length_over_the_limit_gets_413_unread(app):
    headers = {**AUTH, "content-type": "application/json", "content-length": "300000"}
    status, body, asked = call(app, "/v1/clusters/c1/dispatch", headers, BIG)
    assert (status, body["error"], asked) == (413, "body_too_large", 0)


def test_health_needs_no_token(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/metrics").status_code == 200


def test_outside_the_api_a_body_is_held_to_64_kib_unread(app):
    # The dashboard's login form takes posts from anyone: not 64 MiB of them.
    headers = {"content-type": "application/x-www-form-urlencoded", "content-length": "70000"}
    status, body, asked = call(app, "/ui/login", headers, BIG)
    assert (status, body["error"], asked) == (413, "body_too_large", 0)
    status, _, asked = call(app, "/ui/login", {"transfer-encoding": "chunked"}, BIG)
    assert status == 413 and asked <= 3
