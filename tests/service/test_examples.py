"""The API's example bodies: in the OpenAPI document for every request body, valid for
their models, and answered by a real app as they say (the README's quick start posts
``examples/snapshot.json``, the same as the dispatch example)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from cpsched.service.app import create_app
from cpsched.service.settings import load_settings
from cpsched.wire import examples
from cpsched.wire.schemas import DispatchRequest, FinishedBatch, SnapshotDeltaIn

REPO = Path(__file__).resolve().parents[2]
TOKEN = "example-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MODELS: dict[str, type[BaseModel]] = {
    "DispatchRequest": DispatchRequest,
    "SnapshotDeltaIn": SnapshotDeltaIn,
    # The service reads a batch's jobs one by one (FinishedBatchIn); the bridge sends these.
    "FinishedBatchIn": FinishedBatch,
}


@pytest.fixture
def client(tmp_path):
    settings = load_settings(
        None,
        database_url=f"sqlite:///{tmp_path / 'cpsched.db'}",
        tokens=[{"name": "example", "secret": TOKEN}],
    )
    with TestClient(create_app(settings)) as client:
        yield client


def test_every_request_body_has_examples_valid_for_its_model(client):
    document = client.get("/openapi.json").json()
    seen = set()
    for path, operations in document["paths"].items():
        for operation in operations.values():
            if not path.startswith("/v1/") or "requestBody" not in operation:
                continue
            ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            name = ref.rsplit("/", 1)[1]
            bodies = document["components"]["schemas"][name]["examples"]
            assert bodies, name
            for body in bodies:
                MODELS[name].model_validate_json(json.dumps(body))
            seen.add(name)
    assert seen == set(MODELS)


def test_the_example_snapshot_file_is_the_dispatch_example():
    assert json.loads((REPO / "examples" / "snapshot.json").read_text()) == examples.DISPATCH


def test_the_examples_are_answered_as_they_say(tmp_path):
    """Jobs 102 and 103 start, 104 (both whole nodes) waits for 101; then the delta (102 and
    103 running, 105 submitted, 101 ended) starts 105, and 101's end is stored. (A deadline
    long enough for a loaded test machine: at the default 0.2 s, a first call that had
    spent it all answered with the fallback's partial decision, no starts.)"""
    settings = load_settings(
        None,
        database_url=f"sqlite:///{tmp_path / 'cpsched.db'}",
        tokens=[{"name": "example", "secret": TOKEN}],
        defaults={"deadline": 10.0},
    )
    with TestClient(create_app(settings)) as client:
        answered_as_they_say(client)


def answered_as_they_say(client: TestClient) -> None:
    base = "/v1/clusters/demo"
    answer = client.post(f"{base}/dispatch", json=examples.DISPATCH, headers=AUTH)
    assert answer.status_code == 200, answer.text
    decision = answer.json()
    starts = {start["job_id"]: start["allocation"] for start in decision["starts"]}
    assert starts == {"102": {"n1": 8}, "103": {"n2": 1}}
    assert decision["planned"]["104"] == examples.NOW + 3600
    assert decision["snapshot_digest"] == examples.DELTA["base"]

    answer = client.post(f"{base}/dispatch/delta", json=examples.DELTA, headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert [start["job_id"] for start in answer.json()["starts"]] == ["105"]

    answer = client.post(f"{base}/jobs/finished", json=examples.FINISHED, headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"stored": 1, "duplicates": 0, "refused": []}
