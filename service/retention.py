"""The retention task: a background thread that prunes each cluster's history every
``retention.interval_s`` (:mod:`cpsched.service.store.retention` says what is kept),
off the request path, and keeps the database's size and oldest rows in ``/metrics``."""

from __future__ import annotations

import logging
import threading
import time
from functools import cache

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from cpsched.predictor.base import Memory
from cpsched.service.cluster import build_predictor
from cpsched.service.metrics import ServiceMetrics
from cpsched.service.settings import ServiceSettings
from cpsched.service.store.models import Cluster
from cpsched.service.store.retention import PruneReport, database_bytes, prune_cluster

log = logging.getLogger("cpsched.retention")
FIRST_PASS_S = 60.0
"""The first pass waits this long after the start: the start-up rebuild comes first."""


class RetentionTask:
    def __init__(
        self,
        settings: ServiceSettings,
        sessions: sessionmaker[Session],
        metrics: ServiceMetrics,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.metrics = metrics
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._memory_of = cache(self._memory)

    def _memory(self, cluster: str) -> Memory:
        """What the cluster's predictor learns from on a restart (kept whatever its age)."""
        return build_predictor(self.settings.policy(cluster)).memory

    def run_once(self) -> PruneReport:
        """One pass over every cluster; its figures go to the metrics."""
        retention = self.settings.retention
        report = PruneReport()
        with self.sessions() as session:
            clusters = session.execute(select(Cluster.id, Cluster.name).order_by(Cluster.id)).all()
        for cluster_id, name in clusters:
            if self._stop.is_set():
                break
            prune_cluster(
                self.sessions,
                cluster_id,
                retention.keep_days(),
                retention.batch_rows,
                self._memory_of(name),
                report,
                name,
            )
        for kind, count in report.deleted.items():
            self.metrics.pruned.labels(kind).inc(count)
        for name, kinds in report.oldest.items():
            for kind, at in kinds.items():
                if at is not None:
                    self.metrics.history_oldest.labels(name, kind).set(at)
        with self.sessions() as session:
            self.metrics.database_bytes.set(database_bytes(session))
        return report

    def _loop(self) -> None:
        wait = FIRST_PASS_S
        while not self._stop.wait(wait):
            began = time.monotonic()
            try:
                report = self.run_once()
            except SQLAlchemyError as exc:
                self.metrics.prune_failures.inc()
                log.warning("retention pass failed; the next pass tries again: %s", exc)
            else:
                if any(report.deleted.values()):
                    log.info(
                        "retention pass: deleted %s in %.1f s",
                        report.deleted,
                        time.monotonic() - began,
                    )
            wait = self.settings.retention.interval_s

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="retention", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
