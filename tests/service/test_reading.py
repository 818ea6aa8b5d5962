"""Bodies read off the event loop (service/routes/reading.py): the same answers, errors
and OpenAPI document as FastAPI's own reading, the validation in a worker thread."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict, model_validator

from cpsched.service.error_handlers import install_error_handlers
from cpsched.service.metrics import ServiceMetrics
from cpsched.service.routes.reading import ReadInThread, is_json
from cpsched.wire.schemas import DispatchRequest

VALIDATED_IN: list[int] = []


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    size: int

    @model_validator(mode="before")
    @classmethod
    def _where(cls, data: Any) -> Any:
        VALIDATED_IN.append(threading.get_ident())
        return data


def make_app(route_class: type[APIRoute]) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app, ServiceMetrics())  # the service's answers to errors
    router = APIRouter(route_class=route_class)

    @router.post("/items")
    def post_item(item: Item) -> dict[str, object]:
        return {"name": item.name, "size": item.size}

    @router.post("/snapshots")
    def post_snapshot(snapshot: DispatchRequest) -> dict[str, int]:
        return {"queued": len(snapshot.queued)}

    @router.get("/nothing")
    def nothing() -> dict[str, str]:
        return {"body": "none"}

    app.include_router(router)
    loop_threads: list[int] = []

    @app.middleware("http")
    async def note_loop(request: Any, call_next: Any) -> Any:
        loop_threads.append(threading.get_ident())
        return await call_next(request)

    app.state.loop_threads = loop_threads
    return app


@pytest.fixture(scope="module")
def clients() -> tuple[TestClient, TestClient]:
    return TestClient(make_app(APIRoute)), TestClient(make_app(ReadInThread))


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b'{"name": "a", "size": 3}', JSON),
        (b'\xef\xbb\xbf{"name": "a", "size": 3}', JSON),  # a UTF-8 byte order mark
        (b'{"name": "a\xff", "size": 3}', JSON),  # not UTF-8
        (b"[" * 100_000, JSON),  # nested too deep
        (b'{"name": "a", "size": "3"}', JSON),
        (b'{"name": "a"}', JSON),
        (b'{"name": "a", "size": 3, "extra": 1}', JSON),
        (b'{"name": "a", "size": 3', JSON),
        (b"[1, 2]", JSON),
        (b"", JSON),
        (b"not json", JSON),
        ('{"name": "é", "size": 1}'.encode("utf-16"), JSON),  # json.loads reads UTF-16
        (b'{"name": "a", "size": 3}', {"content-type": "text/plain"}),
        (b'{"name": "a", "size": 3}', {"content-type": "application/vnd.x+json"}),
        (b'{"name": "a", "size": 3}', {}),
    ],
)
def test_answers_as_fastapi_reads(clients, body, headers):
    fastapi_reads, threaded = clients
    expected = fastapi_reads.post("/items", content=body, headers=headers)
    got = threaded.post("/items", content=body, headers=headers)
    assert (got.status_code, got.json()) == (expected.status_code, expected.json())


def test_a_snapshot_errors_as_fastapi_reads(clients):
    fastapi_reads, threaded = clients
    job = {"id": "j", "submit": 0, "time_limit": 60, "units": 1, "per_unit": {"cpu": 1}}
    for snapshot in (
        {"time": 0, "nodes": [], "queued": [job]},
        {"time": 0, "nodes": [], "queued": [{**job, "per_unit": {"cpu": 0}}]},
        {"time": 0, "nodes": [], "queued": [{**job, "name": "a\x00b"}]},
        {"time": 0, "nodes": [], "queued": [{**job, "id": "\ud800"}]},  # a lone surrogate
        {"time": -1, "nodes": [{"name": "n", "resources": {"cpu": 1}, "x": 1}]},
    ):
        body = json.dumps(snapshot)  # ASCII: a lone surrogate as an escape
        expected = fastapi_reads.post("/snapshots", content=body, headers=JSON)
        got = threaded.post("/snapshots", content=body, headers=JSON)
        assert (got.status_code, got.json()) == (expected.status_code, expected.json())


def test_the_body_is_validated_off_the_event_loop(clients):
    _, threaded = clients
    VALIDATED_IN.clear()
    threaded.app.state.loop_threads.clear()  # type: ignore[attr-defined]
    assert threaded.post("/items", json={"name": "a", "size": 1}).status_code == 200
    (loop,) = threaded.app.state.loop_threads  # type: ignore[attr-defined]
    # Validated once (FastAPI's handler takes the model as it is), not on the loop.
    assert len(VALIDATED_IN) == 1
    assert VALIDATED_IN[0] != loop


def test_the_openapi_document_is_fastapis(clients):
    fastapi_reads, threaded = clients
    assert threaded.get("/openapi.json").json() == fastapi_reads.get("/openapi.json").json()
    assert threaded.get("/nothing").json() == {"body": "none"}


@pytest.mark.parametrize(
    ("content_type", "strict", "expected"),
    [
        ("application/json", True, True),
        ("application/json; charset=utf-8", True, True),
        ("application/problem+json", True, True),
        ("text/json", True, False),
        ("application/jsonx", True, False),
        (None, True, False),
        (None, False, True),
    ],
)
def test_which_bodies_are_json(content_type, strict, expected):
    assert is_json(content_type, strict=strict) is expected
