"""The HTTP client of the cpsched service's API v1: the bridge's and the replay's.

Every failure is a typed :class:`~cpsched.wire.errors.ServiceError`: unavailable (no
answer, 5xx, an unexpected body: the caller's fallback applies) or rejected (4xx).
"""

from __future__ import annotations

from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from cpsched.wire.deltas import HeldSnapshot, delta_between
from cpsched.wire.errors import ServiceRejected, ServiceUnavailable
from cpsched.wire.schemas import (
    WRITER_HEADER,
    ClusterRetiredOut,
    DecisionOut,
    DispatchRequest,
    FinishedAck,
    FinishedBatch,
)

Answer = TypeVar("Answer", bound=BaseModel)

RESEND_WHOLE = {404, 409, 422}
"""A delta refused with these is sent again whole: the service predates deltas (404),
holds another base (409), or finds the delta inconsistent with it (422; the whole
snapshot then gets the real error, if any)."""


class ServiceClient:
    """Calls on one cluster's resources, with a bearer token; ``timeout_s`` per call."""

    def __init__(
        self,
        base_url: str,
        token: str,
        cluster: str,
        *,
        timeout_s: float,
        transport: httpx.BaseTransport | None = None,
        deltas: bool = True,
        writer: str | None = None,
    ) -> None:
        self.cluster = cluster
        self.deltas = deltas
        """Whether snapshots after the first go as deltas (turned off by a service
        without ``/dispatch/delta``)."""
        self._held: HeldSnapshot | None = None
        self.writer = writer
        """Sent with each dispatch (``X-Cpsched-Writer``): the service lets one writer
        dispatch per cluster (a bridge's host and id; None for a replay)."""
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"} if token else {},
            timeout=timeout_s,
            transport=transport,
        )

    def _post(
        self, path: str, body: BaseModel, answer: type[Answer], *, as_writer: bool = False
    ) -> Answer:
        headers = {"Content-Type": "application/json"}
        if as_writer and self.writer:
            headers[WRITER_HEADER] = self.writer
        try:
            response = self._http.post(path, content=body.model_dump_json(), headers=headers)
        except httpx.TimeoutException:
            raise ServiceUnavailable(
                f"service did not answer {path} within the deadline; fallback applies"
            ) from None
        except httpx.TransportError as exc:
            raise ServiceUnavailable(f"service unreachable ({exc}); fallback applies") from None
        if response.status_code >= 500:
            raise ServiceUnavailable(
                f"service failed on {path} with HTTP {response.status_code}: {response.text[:300]}"
            )
        if response.status_code >= 400:
            raise ServiceRejected(response.status_code, response.text)
        try:
            return answer.model_validate_json(response.content)
        except ValidationError as exc:
            raise ServiceUnavailable(
                f"service answered {path} with an unexpected body ({exc.error_count()} errors); "
                "are bridge and service the same version?"
            ) from None

    def dispatch(self, request: DispatchRequest) -> DecisionOut:
        """The service's decision on ``request``: sent as a delta against the snapshot of
        the previous answer when the service still holds it (:mod:`cpsched.wire.deltas`),
        else whole."""
        path = f"/v1/clusters/{self.cluster}/dispatch"
        held, self._held = self._held, None  # a failed call leaves no base: next is whole
        answer: DecisionOut | None = None
        delta = delta_between(held, request) if held is not None else None
        if delta is not None:
            try:
                answer = self._post(f"{path}/delta", delta, DecisionOut, as_writer=True)
            except ServiceRejected as exc:
                if exc.status not in RESEND_WHOLE:
                    raise
                if exc.status == 404:
                    self.deltas = False  # a service that predates deltas
        if answer is None:
            answer = self._post(path, request, DecisionOut, as_writer=True)
        if self.deltas and answer.snapshot_digest:
            self._held = HeldSnapshot.of(request, answer.snapshot_digest)
        return answer

    def post_finished(self, batch: FinishedBatch) -> FinishedAck:
        return self._post(f"/v1/clusters/{self.cluster}/jobs/finished", batch, FinishedAck)

    def retire(self) -> ClusterRetiredOut:
        """Delete the cluster at the service: its history, predictions and audit trail."""
        try:
            response = self._http.delete(f"/v1/clusters/{self.cluster}")
        except httpx.TransportError as exc:
            raise ServiceUnavailable(f"service unreachable ({exc})") from None
        if response.status_code >= 500:
            raise ServiceUnavailable(f"service failed to retire the cluster: {response.text[:300]}")
        if response.status_code >= 400:
            raise ServiceRejected(response.status_code, response.text)
        return ClusterRetiredOut.model_validate_json(response.content)

    def healthy(self) -> bool:
        try:
            return self._http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def close(self) -> None:
        self._http.close()
