"""Optional slurmrestd client (openapi/v0.0.38): state reads and time-limit updates.

Pinning a node list has no field in v0.0.38, so starts still go through scontrol.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from cpsched.slurm_bridge.errors import CommandError, StateParseError

API = "/slurm/v0.0.38"


class SlurmRestClient:
    def __init__(
        self,
        *,
        socket: Path | None,
        base_url: str = "http://localhost",
        token: str | None = None,
        user: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        headers = {}
        if token:  # JWT over TCP (AuthAltTypes=auth/jwt)
            headers = {"X-SLURM-USER-TOKEN": token, "X-SLURM-USER-NAME": user or "root"}
        transport = httpx.HTTPTransport(uds=str(socket)) if socket else None
        self._http = httpx.Client(
            base_url=base_url, transport=transport, headers=headers, timeout=timeout_s
        )

    def _get(self, path: str) -> dict[str, Any]:
        try:
            response = self._http.get(API + path)
        except httpx.HTTPError as exc:
            raise CommandError(["slurmrestd", "GET", path], str(exc)) from None
        if response.status_code != 200:
            raise CommandError(
                ["slurmrestd", "GET", path], f"HTTP {response.status_code}", response.text
            )
        doc = response.json()
        if not isinstance(doc, dict):
            raise StateParseError(f"slurmrestd {path} answered {type(doc).__name__}")
        return doc

    def jobs(self) -> dict[str, Any]:
        return self._get("/jobs")

    def nodes(self) -> dict[str, Any]:
        return self._get("/nodes")

    def update_job(self, job_id: str, fields: dict[str, Any]) -> None:
        path = f"/job/{job_id}"
        try:
            response = self._http.post(API + path, json=fields)
        except httpx.HTTPError as exc:
            raise CommandError(["slurmrestd", "POST", path], str(exc)) from None
        if response.status_code != 200:
            raise CommandError(
                ["slurmrestd", "POST", path], f"HTTP {response.status_code}", response.text
            )

    def close(self) -> None:
        self._http.close()
