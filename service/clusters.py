"""The service's clusters: each one's runtime, built on first use (its predictor rebuilt
from the stored history) or by a background warm-up after a start, and retired on request.

One cluster's build holds back only calls for that cluster: the registry's lock is held
only to find or record a runtime, never while one is built.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import Row
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from cpsched.core import Job
from cpsched.errors import CpschedError
from cpsched.service.cluster import ClusterRuntime
from cpsched.service.kept_state import KeptState
from cpsched.service.metrics import ERROR_BUCKETS, ServiceMetrics
from cpsched.service.settings import ServiceSettings
from cpsched.service.store import history, retention
from cpsched.wire.schemas import end_state

log = logging.getLogger(__name__)

RETIRE_BATCH = 5000
"""Rows per delete transaction when a cluster is retired."""


class UnknownCluster(CpschedError):
    """The service has no such cluster (404)."""


class ClusterRegistry:
    def __init__(
        self,
        settings: ServiceSettings,
        sessions: sessionmaker[Session],
        metrics: ServiceMetrics,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.metrics = metrics
        self._runtimes: dict[str, ClusterRuntime] = {}
        self._runtimes_lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}  # cluster → held while it is built
        self._stop_warm_up = threading.Event()
        self._warm_up: threading.Thread | None = None

    def runtime(self, cluster: str) -> ClusterRuntime:
        """The cluster's runtime, its predictor rebuilt from the stored history on first use.

        One cluster's rebuild holds back only calls for that cluster: others (and the
        background warm-up of the rest) go on meanwhile."""
        with self._runtimes_lock:
            found = self._runtimes.get(cluster)
            if found is not None:
                return found
            loading = self._loading.setdefault(cluster, threading.Lock())
        with loading:
            with self._runtimes_lock:
                found = self._runtimes.get(cluster)
            if found is not None:
                return found
            runtime = self._load(cluster)
            with self._runtimes_lock:
                self._runtimes[cluster] = runtime
                self._loading.pop(cluster, None)
            return runtime

    def _load(self, cluster: str) -> ClusterRuntime:
        with self.sessions.begin() as session:
            cluster_id = history.cluster_id(session, cluster)
        runtime = ClusterRuntime(cluster, cluster_id, self.settings.policy(cluster))
        began = time.perf_counter()
        # The error metric sums every stored prediction: a scan the database does in the
        # meantime (on SQLite in C, the interpreter free), not before the rebuild.
        with ThreadPoolExecutor(1, thread_name_prefix=f"errors-{cluster}") as pool:
            errors_read = pool.submit(self._prediction_errors, cluster_id)
            self._restore(runtime, cluster_id)
            errors = errors_read.result()
        for predictor, counts in errors.items():  # the metric survives a restart
            self.metrics.restore_prediction_errors(
                cluster, predictor, counts.at_most, counts.count, counts.total
            )
        self.metrics.deadline.labels(cluster).set(runtime.policy.deadline)
        if runtime.observed:
            log.info(
                "cluster %s: predictor rebuilt from %d finished jobs in %.2f s%s",
                cluster,
                runtime.observed,
                time.perf_counter() - began,
                ", its stored model loaded" if runtime.stored_model is not None else "",
            )
        return runtime

    def _prediction_errors(self, cluster_id: int) -> dict[str, history.ErrorCounts]:
        with self.sessions() as session:
            return history.start_prediction_errors(session, cluster_id, ERROR_BUCKETS)

    def _restore(self, runtime: ClusterRuntime, cluster_id: int) -> None:
        """Give ``runtime`` what the database keeps of it: its predictor's history and
        model, its guarantees and lease."""
        with self.sessions() as session:
            # What the predictor remembers, not the whole history (bounded reads).
            rows = history.remembered(session, cluster_id, runtime.predictor.memory)
            kept = history.cluster_state(session, cluster_id)
            model = history.fitted_model(session, cluster_id, runtime.model_name)
            if kept is not None:
                runtime.restore(
                    KeptState.from_row(kept.guarantees, kept.writer, kept.writer_seen),
                    time.time(),
                    time.monotonic(),
                )
        names = runtime.resource_names
        runtime.relearn(
            (
                (_stored_job(row, names), row.start_time, row.end_time, end_state(row.state))
                for row in rows
            ),
            model,
        )

    def store_model(self, runtime: ClusterRuntime) -> None:
        """Store the cluster's predictor's model if it fitted one the database lacks (a
        restart then predicts with it at once). A database error is logged: the model is
        stored with the next one, or fitted again after a restart. One store at a time per
        cluster: two finished-job batches at once store a new model once."""
        with runtime.model_lock:
            pending = runtime.model_to_store()
            if pending is None:
                return
            model, data = pending
            try:
                with self.sessions.begin() as session:
                    history.save_fitted_model(
                        session, runtime.cluster_id, runtime.model_name, data, time.time()
                    )
            except SQLAlchemyError as exc:
                log.warning(
                    "cluster %s: the predictor's new model was not stored: %s", runtime.name, exc
                )
                return
            runtime.stored_model = model

    def existing(self, cluster: str) -> ClusterRuntime | None:
        """The cluster's runtime if it was ever written to; reads never create a cluster."""
        with self._runtimes_lock:
            found = self._runtimes.get(cluster)
        if found is not None:
            return found
        with self.sessions() as session:
            if history.find_cluster(session, cluster) is None:
                return None
        return self.runtime(cluster)

    def warm_up(self, stop: threading.Event | None = None) -> None:
        """Rebuild every stored cluster's predictor now rather than on its first request
        (until ``stop`` is set)."""
        with self.sessions() as session:
            names = history.cluster_names(session)
        for name in names:
            if stop is not None and stop.is_set():
                return
            self.runtime(name)

    def warm_up_in_background(self) -> None:
        """:meth:`warm_up` in a thread of its own, so that the start-up (and ``/healthz``)
        does not wait for it however many clusters there are: a cluster asked for before
        its turn is built by that call."""

        def run() -> None:
            try:
                self.warm_up(self._stop_warm_up)
            except SQLAlchemyError as exc:  # each cluster is built on first use anyway
                log.warning("warm-up stopped: %s", exc)

        self._stop_warm_up.clear()
        self._warm_up = threading.Thread(target=run, name="warm-up", daemon=True)
        self._warm_up.start()

    def retire(self, cluster: str) -> dict[str, int]:
        """Forget ``cluster``: its finished jobs, predictions and audit trail, deleted in
        batches (a transaction each), then the cluster itself, its runtime and its
        metrics. Rows deleted per table; :class:`UnknownCluster` if it has none."""
        with self._runtimes_lock:
            runtime = self._runtimes.pop(cluster, None)
        with self.sessions() as session:
            cluster_id = history.find_cluster(session, cluster)
        if cluster_id is None:
            raise UnknownCluster(f"cluster {cluster} is unknown to this service")
        if runtime is not None:
            with runtime.lock:  # a dispatch in flight finishes first
                runtime.close()
        deleted = retention.delete_cluster(self.sessions, cluster_id, RETIRE_BATCH)
        self.metrics.forget(cluster)
        log.warning("cluster %s retired: %s rows deleted", cluster, deleted)
        return deleted

    def close(self) -> None:
        """Stop the warm-up, release every runtime's dispatcher and predictor (a running
        fit ends first) and store the models fitted since the last store."""
        self._stop_warm_up.set()
        if self._warm_up is not None:
            self._warm_up.join(timeout=30)
            self._warm_up = None
        for runtime in self._runtimes.values():
            runtime.close()
            self.store_model(runtime)


def _stored_job(row: Row[Any], names: tuple[str, ...]) -> Job:
    """The core job of a stored finished one (a row of ``history.remembered``), as
    :func:`~cpsched.service.cluster.finished_core_job` makes it of the wire job it was.
    Not validated again: the row was valid when stored, and a bound tightened since (user
    names were 1,024 characters once) must not stop a restart."""
    per_unit: dict[str, int] = row.per_unit
    names = (*names, *(name for name in per_unit if name not in names))
    return Job(
        id=row.job_id,
        submit=row.submit_time,
        time_limit=row.time_limit,
        units=row.units,
        unit_request=tuple(per_unit.get(name, 0) for name in names),
        user=row.user_name,
        group=row.group_name,
        name=row.job_name,
        queue=row.partition,
        resource_names=names,
    )
