"""Optional slurmrestd client: state reads and time-limit updates.

The versions a server offers are read once from its OpenAPI document (``GET
/openapi/v3``; ``/openapi`` where that is missing): Slurm 22.05's slurmrestd serves
``/slurm/v0.0.38/...``, 24.11's ``/slurm/v0.0.40/`` to ``/slurm/v0.0.42/`` (with
``-s openapi/slurmctld``). The client reads jobs and nodes at the newest version the JSON
readers read (``slurm_json_doc.READ_FORMATS``) and posts job updates there; from v0.0.40
on a number in an update is ``{"set", "infinite", "number"}``. Pinning a node list stays
with scontrol.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from cpsched.slurm_bridge.errors import CommandError, StateParseError
from cpsched.slurm_bridge.slurm_json_doc import READ_FORMATS

log = logging.getLogger("slurm_bridge.slurm")

OPENAPI_PATHS = ("/openapi/v3", "/openapi")
_ENDPOINT = re.compile(r"^/slurm/(v\d+\.\d+\.\d+)/(jobs|nodes|job/\{job_id\})/?$")


@dataclass(frozen=True, slots=True)
class RestApi:
    """The paths of one version of slurmrestd's API, as its OpenAPI document lists them."""

    version: str
    jobs: str
    nodes: str
    job: str
    """One job's path, with ``{job_id}`` in it."""

    def number(self, value: int) -> Any:
        """A number in a request body of this version."""
        if self.version == "v0.0.38":
            return value
        return {"set": True, "infinite": False, "number": value}


def discover(spec: Mapping[str, Any]) -> RestApi:
    """The newest version in ``spec`` (an OpenAPI document) that the readers read and that
    has jobs and nodes to GET and a job to POST; StateParseError naming what it offers."""
    paths = spec.get("paths")
    if not isinstance(paths, Mapping):
        raise StateParseError("slurmrestd's OpenAPI document has no 'paths'")
    found: dict[str, dict[str, str]] = {}
    for path, operations in paths.items():
        match = _ENDPOINT.match(str(path))
        if match is None or not isinstance(operations, Mapping):
            continue
        version, what = match.groups()
        if ("post" if what.startswith("job/") else "get") in operations:
            found.setdefault(version, {})[what.partition("/")[0]] = str(path)
    usable = [v for v in READ_FORMATS if {"jobs", "nodes", "job"} <= set(found.get(v, {}))]
    if not usable:
        offered = ", ".join(sorted(found)) or "none"
        raise StateParseError(
            f"slurmrestd offers the Slurm API in versions {offered}; the bridge reads "
            f"{', '.join(READ_FORMATS)} (load openapi/slurmctld, or set state_source = "
            '"json")'
        )
    version = usable[-1]
    return RestApi(version=version, **found[version])


class SlurmRestClient:
    def __init__(
        self,
        *,
        socket: Path | None,
        base_url: str = "http://localhost",
        token: str | None = None,
        user: str | None = None,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {}
        if token:  # JWT over TCP (AuthAltTypes=auth/jwt)
            headers = {"X-SLURM-USER-TOKEN": token, "X-SLURM-USER-NAME": user or "root"}
        if transport is None and socket:
            transport = httpx.HTTPTransport(uds=str(socket))
        self._http = httpx.Client(
            base_url=base_url, transport=transport, headers=headers, timeout=timeout_s
        )
        self._api: RestApi | None = None

    @property
    def api(self) -> RestApi:
        """The API version read and written, discovered on first use."""
        if self._api is None:
            self._api = discover(self._openapi())
            log.info("slurmrestd: jobs and nodes read, jobs updated at %s", self._api.jobs)
        return self._api

    def _openapi(self) -> dict[str, Any]:
        *first, last = OPENAPI_PATHS
        for path in first:
            try:
                return self._get(path)
            except CommandError as exc:
                if "HTTP 404" not in exc.reason:
                    raise
        return self._get(last)

    def _get(self, path: str) -> dict[str, Any]:
        try:
            response = self._http.get(path)
        except httpx.HTTPError as exc:
            raise CommandError(["slurmrestd", "GET", path], str(exc)) from None
        if response.status_code != 200:
            raise CommandError(
                ["slurmrestd", "GET", path], f"HTTP {response.status_code}", response.text
            )
        try:
            doc = response.json()
        except ValueError as exc:
            raise StateParseError(f"slurmrestd GET {path} answered invalid JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise StateParseError(f"slurmrestd GET {path} answered {type(doc).__name__}")
        return doc

    def jobs(self) -> dict[str, Any]:
        return self._get(self.api.jobs)

    def nodes(self) -> dict[str, Any]:
        return self._get(self.api.nodes)

    def set_time_limit(self, job_id: str, minutes: int) -> None:
        """Set a job's time limit (minutes)."""
        api = self.api
        path = api.job.replace("{job_id}", job_id)
        try:
            response = self._http.post(path, json={"time_limit": api.number(minutes)})
        except httpx.HTTPError as exc:
            raise CommandError(["slurmrestd", "POST", path], str(exc)) from None
        if response.status_code != 200:
            raise CommandError(
                ["slurmrestd", "POST", path], f"HTTP {response.status_code}", response.text
            )

    def close(self) -> None:
        self._http.close()
