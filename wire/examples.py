"""Example bodies of the API's requests, shown in its OpenAPI document (``/docs``).

A small cluster at one instant: two 32-core nodes (one with 4 GPUs), one job running on
half of ``n1``, and three queued: two that fit now and end before the running job's limit,
and one that needs both whole nodes and must wait for it. ``examples/snapshot.json`` in the
repository is :data:`DISPATCH` (a test keeps them equal): the README's quick start posts it.
"""

from __future__ import annotations

from typing import Any

NOW = 1_700_000_000

_RUNNING = {
    "id": "101",
    "user": "alice",
    "submit": NOW - 10_000,
    "time_limit": 7200,
    "units": 16,
    "per_unit": {"cpu": 1, "mem": 2000},
    "start": NOW - 3600,
    "allocation": {"n1": 16},
}

DISPATCH: dict[str, Any] = {
    "time": NOW,
    "nodes": [
        {"name": "n1", "resources": {"cpu": 32, "mem": 128000}},
        {"name": "n2", "resources": {"cpu": 32, "mem": 128000, "gpu": 4}},
    ],
    "running": [_RUNNING],
    "queued": [
        {
            "id": "102",
            "user": "bob",
            "submit": NOW - 1000,
            "time_limit": 1800,
            "units": 8,
            "per_unit": {"cpu": 1, "mem": 4000},
        },
        {
            "id": "103",
            "user": "carol",
            "submit": NOW - 500,
            "time_limit": 3600,
            "units": 1,
            "per_unit": {"cpu": 8, "mem": 32000, "gpu": 2},
        },
        {
            "id": "104",
            "user": "dave",
            "submit": NOW - 200,
            "time_limit": 14400,
            "units": 64,
            "per_unit": {"cpu": 1, "mem": 1000},
        },
    ],
    "dry_run": False,
}
"""A whole snapshot (``POST /v1/clusters/{cluster}/dispatch``)."""

DELTA: dict[str, Any] = {
    "base": "897ae9adf6a59fff6d337bd52b7ab7f552640812fc6d5e910d2d62a94ca97a0c",
    "time": NOW + 60,
    "running": [
        {**job, "start": NOW, "allocation": allocation}
        for job, allocation in zip(DISPATCH["queued"][:2], [{"n1": 8}, {"n2": 1}], strict=True)
    ],
    "queued": [
        {
            "id": "105",
            "user": "erin",
            "submit": NOW + 30,
            "time_limit": 600,
            "units": 4,
            "per_unit": {"cpu": 1, "mem": 2000},
        }
    ],
    "gone": ["101"],
}
"""What changed since the answer to :data:`DISPATCH` (``.../dispatch/delta``): jobs 102
and 103 started where it said, 105 was submitted, 101 ended. ``base`` is that answer's
``snapshot_digest`` (the cluster's latest answer's, else 409)."""

FINISHED: dict[str, Any] = {
    "jobs": [
        {
            **{key: value for key, value in _RUNNING.items() if key != "allocation"},
            "end": NOW + 50,
            "state": "completed",
        }
    ],
}
"""Finished jobs with their real start and end (``.../jobs/finished``)."""
