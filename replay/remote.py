"""Replay over HTTP: the simulated cluster asks a running service what to do.

:class:`RemoteScheduler` takes both roles the simulator gives the dispatch core: it is
the dispatcher (each call posts the snapshot to ``/dispatch``) and the predictor (the
service predicts; a started job's duration is the prediction the service returned with
its start). Finished jobs are posted in batches before the next dispatch, as a bridge
would, so the service learns exactly what an in-process predictor would have learnt. It
speaks through the bridge's client and the shared codec.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from cpsched.core import Decision, Job, Snapshot
from cpsched.predictor.base import FinishedJob, Memory
from cpsched.runtime.codec_client import decision_from_wire, finished_to_wire, snapshot_to_wire
from cpsched.wire.client import ServiceClient
from cpsched.wire.errors import ServiceError
from cpsched.wire.schemas import FinishedBatch, FinishedJobIn

log = logging.getLogger(__name__)

BATCH = 1000
"""Finished jobs per POST (the service takes up to 10,000)."""

Answer = TypeVar("Answer")


class RemoteScheduler:
    """Dispatcher and predictor for the simulator, both answered by the service."""

    name = "service"
    memory = Memory()  # the service keeps the history

    def __init__(
        self,
        base_url: str,
        cluster: str,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        retire: bool = False,
    ) -> None:
        self.client = ServiceClient(base_url, token or "", cluster, timeout_s=timeout)
        self.retire = retire
        """Retire the cluster at the service when the replay is done (its history and
        audit are the replay's only)."""
        self._finished: list[FinishedJobIn] = []
        self._predicted: dict[str, int] = {}
        self._names: tuple[str, ...] = ()
        self.http_s = 0.0
        """Seconds spent in HTTP calls (the service's work included)."""
        self.calls = 0

    # -- the predictor role -------------------------------------------------------------

    def observe(self, finished: FinishedJob) -> None:
        self._finished.append(
            finished_to_wire(finished.job, self._names, finished.start, finished.end, "completed")
        )

    def predict(self, job: Job, t: int) -> int:
        # A start's prediction came with the decision; before that the service keeps its
        # own, and the simulator's copy of it is never read (the service dispatches).
        return self._predicted.pop(job.id, job.time_limit)

    # -- the dispatcher role ------------------------------------------------------------

    def decide(self, snapshot: Snapshot, durations: Mapping[str, int]) -> Decision:
        self._names = snapshot.resource_names
        self.flush()
        answer = self._timed(self.client.dispatch, snapshot_to_wire(snapshot))
        if answer.rejected:
            raise ServiceError(
                f"the service rejected jobs of a replayed snapshot: {answer.rejected[0].reason}"
            )
        self._predicted.update({s.job_id: s.predicted_run_time for s in answer.starts})
        return decision_from_wire(answer, snapshot)

    def flush(self) -> None:
        """Post the finished jobs not yet acknowledged."""
        while self._finished:
            batch = self._finished[:BATCH]
            self._timed(self.client.post_finished, FinishedBatch(jobs=batch))
            del self._finished[: len(batch)]

    def _timed(self, call: Callable[[Answer], object], body: Answer) -> Any:
        began = time.perf_counter()
        try:
            return call(body)
        finally:
            self.http_s += time.perf_counter() - began
            self.calls += 1

    def close(self) -> None:
        try:
            if self.retire:
                self.client.retire()
        except ServiceError as exc:  # the replay's outcome stands; its cluster stays
            log.warning("the replay's cluster was not retired at the service: %s", exc)
        finally:
            self.client.close()
