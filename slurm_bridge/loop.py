"""One bridge cycle, and the loop that runs cycles without ever crash-looping.

A cycle: read state → re-hold pins that did not start → ask the service → apply (or,
in shadow mode, record) → deliver finished jobs → write metrics. When the service is
unreachable or late, the configured fallback applies; it is undone when it returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cpsched.slurm_bridge import shadow
from cpsched.slurm_bridge import state_file as bookkeeping
from cpsched.slurm_bridge.apply import ApplyResult, apply_decision
from cpsched.slurm_bridge.backend import WorkloadManager
from cpsched.slurm_bridge.config import BridgeSettings
from cpsched.slurm_bridge.errors import BridgeError, CommandError
from cpsched.slurm_bridge.metrics import BridgeMetrics
from cpsched.slurm_bridge.model import ClusterState, JobView
from cpsched.slurm_bridge.snapshot import dispatch_request, finished_batch
from cpsched.wire.client import ServiceClient
from cpsched.wire.errors import ServiceError, ServiceUnavailable
from cpsched.wire.schemas import DecisionOut, FinishedBatch

log = logging.getLogger("slurm_bridge.loop")
BATCH = 1000


@dataclass
class CycleReport:
    time: int = 0
    held: int = 0
    pending: int = 0
    running: int = 0
    decision: DecisionOut | None = None
    applied: ApplyResult | None = None
    service_error: str | None = None
    fallback: str | None = None  # what the fallback did this cycle
    rehold: list[str] = field(default_factory=list)
    reclaimed: list[str] = field(default_factory=list)  # taken back from the fallback
    finished_posted: int = 0
    finished_duplicates: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Bridge:
    def __init__(
        self,
        settings: BridgeSettings,
        backend: WorkloadManager,
        client: ServiceClient,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.client = client
        self.clock = clock
        self.book = bookkeeping.load(settings.state_file)
        self.metrics = BridgeMetrics()
        self.outage_since: float | None = None
        self.seen: dict[str, JobView] = {}  # last view of each job, for finished posts

    # ---- one cycle -------------------------------------------------------------
    def cycle(self) -> CycleReport:
        report = CycleReport()
        t0 = time.perf_counter()
        state = self.backend.read_state()
        report.timings["read_s"] = time.perf_counter() - t0
        report.time = state.time
        report.held, report.pending, report.running = (
            len(state.held),
            len(state.pending),
            len(state.running),
        )
        for job in state.jobs:
            self.seen[job.id] = job
        shadow_mode = self.settings.mode == "shadow"
        if not shadow_mode:
            report.rehold = self._rehold_stale_pins(state)
        request, notes = dispatch_request(
            state, shadow=shadow_mode, extensions=self.book.extensions
        )
        report.notes += notes
        t1 = time.perf_counter()
        try:
            decision = self.client.dispatch(request)
        except ServiceUnavailable as exc:
            report.timings["post_s"] = time.perf_counter() - t1
            report.service_error = str(exc)
            self.metrics.inc("service_failures_total")
            if self.outage_since is None:  # once per outage: logs stay quiet
                log.warning("service unavailable", extra={"error": str(exc)})
                self.outage_since = self.clock()
            if not shadow_mode:
                report.fallback = self._fallback(state)
        else:
            report.timings["post_s"] = time.perf_counter() - t1
            report.decision = decision
            self.metrics.set("decision_seconds", decision.diagnostics.wall_ms / 1000.0)
            if self.outage_since is not None or self.book.fallback_active:
                report.reclaimed = self._end_fallback(state)
            t2 = time.perf_counter()
            if shadow_mode:
                shadow.record(self.settings.shadow_log_path, state, decision)
            else:
                report.applied = self._apply(decision, state)
            report.timings["apply_s"] = time.perf_counter() - t2
        t3 = time.perf_counter()
        self._deliver_finished(state, report)
        report.timings["finished_s"] = time.perf_counter() - t3
        self.book.forget_old(state.time)
        bookkeeping.save(self.settings.state_file, self.book)
        self._record_metrics(report)
        return report

    # ---- pieces ----------------------------------------------------------------
    def _apply(self, decision: DecisionOut, state: ClusterState) -> ApplyResult:
        result = apply_decision(decision, state, self.backend)
        now = self.clock()
        for job_id, nodes in result.started.items():
            self.book.pinned[job_id] = bookkeeping.Pin(nodes=nodes, at=now)
            self.book.started[job_id] = nodes
        for job_id in result.extended:
            self.book.extensions[job_id] = self.book.extensions.get(job_id, 0) + 1
        self.metrics.inc("jobs_started_total", len(result.started))
        self.metrics.inc("extensions_total", len(result.extended))
        self.metrics.inc("starts_refused_total", len(result.refused))
        self.metrics.inc("command_failures_total", len(result.failed))
        return result

    def _rehold_stale_pins(self, state: ClusterState) -> list[str]:
        """Jobs released onto nodes that turned busy: hold, unpin, plan again."""
        reheld: list[str] = []
        now = self.clock()
        for job_id, pin in list(self.book.pinned.items()):
            job = state.job(job_id)
            if job is None or job.state != "pending":
                del self.book.pinned[job_id]
                continue
            if job.held_for_us:  # someone (an admin) held it again: nothing pinned runs
                del self.book.pinned[job_id]
                continue
            if now - pin.at < self.settings.pin_grace_s:
                continue
            try:
                self.backend.hold(job_id, unpin=True)
            except CommandError as exc:
                log.error("re-hold failed", extra={"job": job_id, "error": str(exc)})
                continue
            del self.book.pinned[job_id]
            reheld.append(job_id)
            log.warning(
                "pinned job did not start; held again", extra={"job": job_id, "nodes": pin.nodes}
            )
        self.metrics.inc("reheld_total", len(reheld))
        return reheld

    def _fallback(self, state: ClusterState) -> str:
        now = self.clock()
        if self.outage_since is None:
            self.outage_since = now
        if self.settings.fallback == "hold" or now - self.outage_since < (
            self.settings.fallback_after_s
        ):
            if not self.book.fallback_active:
                log.warning("service unavailable: held jobs stay held (fallback=hold)")
            self.book.fallback_active = True
            self.metrics.inc("fallback_cycles_total")
            return "hold"
        released: list[str] = []
        for job in state.held:
            try:
                self.backend.release_to_native(job.id)
            except CommandError as exc:
                log.error("fallback release failed", extra={"job": job.id, "error": str(exc)})
                continue
            self.book.fallback_released[job.id] = now
            released.append(job.id)
        if released or not self.book.fallback_active:
            log.warning(
                "service unavailable: jobs handed to Slurm's scheduler (fallback=release)",
                extra={"jobs": len(released)},
            )
        self.book.fallback_active = True
        self.metrics.inc("fallback_cycles_total")
        self.metrics.inc("fallback_released_total", len(released))
        return f"release:{len(released)}"

    def _end_fallback(self, state: ClusterState) -> list[str]:
        """The service is back: take back jobs the fallback gave Slurm, if still pending."""
        reclaimed: list[str] = []
        for job_id in list(self.book.fallback_released):
            job = state.job(job_id)
            if job is not None and job.state == "pending" and not job.held_for_us:
                try:
                    self.backend.hold(job_id, unpin=False)
                except CommandError as exc:
                    log.error("reclaim failed", extra={"job": job_id, "error": str(exc)})
                    continue
                reclaimed.append(job_id)
            del self.book.fallback_released[job_id]
        log.warning("service back: fallback ended", extra={"reclaimed": len(reclaimed)})
        self.outage_since = None
        self.book.fallback_active = False
        return reclaimed

    def _deliver_finished(self, state: ClusterState, report: CycleReport) -> None:
        try:
            ended = self.backend.finished_jobs(state)
        except BridgeError as exc:
            report.notes.append(f"finished jobs unreadable: {exc}")
            return
        # Prefer what squeue -t all says (sacct -c misreads names with spaces).
        from_squeue = {j.id: j for j in state.finished}
        fresh: dict[str, JobView] = {}
        for job in ended:
            if job.id in self.book.delivered or job.start is None or job.end is None:
                continue
            best = from_squeue.get(job.id, job)
            known = self.seen.get(job.id)
            if known is not None and best is job:  # keep sacct's times, the richer shape
                best = JobView(
                    **{**_fields(known), "state": job.state, "start": job.start, "end": job.end}
                )
            fresh[job.id] = best
        wire = finished_batch(fresh.values())
        for i in range(0, len(wire), BATCH):
            chunk = wire[i : i + BATCH]
            try:
                ack = self.client.post_finished(FinishedBatch(jobs=chunk))
            except ServiceError as exc:
                report.notes.append(f"finished jobs not delivered yet: {exc}")
                return
            for sent in chunk:
                self.book.delivered[sent.id] = sent.end
                self.seen.pop(sent.id, None)
            report.finished_posted += ack.stored
            report.finished_duplicates += ack.duplicates
            # persist after every acknowledged chunk: a crash here must not re-count
            bookkeeping.save(self.settings.state_file, self.book)
        self.metrics.inc("finished_posted_total", report.finished_posted)

    def _record_metrics(self, report: CycleReport) -> None:
        self.metrics.inc("cycles_total")
        self.metrics.set(
            "queue_jobs", report.held if self.settings.mode == "active" else report.pending
        )
        self.metrics.set("running_jobs", report.running)
        self.metrics.set("fallback_active", 1.0 if self.book.fallback_active else 0.0)
        for phase, seconds in report.timings.items():
            self.metrics.set(f'cycle_phase_seconds{{phase="{phase[:-2]}"}}', seconds)
        if self.settings.metrics_file is not None:
            self.metrics.write(
                self.settings.metrics_file, cluster=self.settings.cluster, mode=self.settings.mode
            )

    # ---- forever -----------------------------------------------------------------
    def run(
        self,
        *,
        stop: Callable[[], bool] = lambda: False,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Cycle every poll interval; on errors back off exponentially, never exit."""
        failures = 0
        while not stop():
            try:
                report = self.cycle()
            except Exception as exc:  # a bad cycle must never kill the daemon
                if not isinstance(exc, BridgeError):
                    log.exception("unexpected error in cycle")
                failures += 1
                self.metrics.inc("cycle_errors_total")
                delay = min(
                    self.settings.backoff_max_s,
                    self.settings.poll_interval_s * 2 ** min(failures, 16),
                )
                log.error("cycle failed; retrying", extra={"error": str(exc), "in_s": delay})
                sleep(delay)
                continue
            if report.service_error:
                failures += 1
                delay = min(
                    self.settings.backoff_max_s,
                    self.settings.poll_interval_s * 2 ** min(failures - 1, 16),
                )
            else:
                failures = 0
                delay = self.settings.poll_interval_s
            log.info("cycle", extra=_summary(report))
            sleep(delay)


def _fields(job: JobView) -> dict:
    return {name: getattr(job, name) for name in job.__slots__}


def _summary(report: CycleReport) -> dict[str, object]:
    return {
        "held": report.held,
        "running": report.running,
        "started": len(report.applied.started) if report.applied else 0,
        "extended": len(report.applied.extended) if report.applied else 0,
        "refused": len(report.applied.refused) if report.applied else 0,
        "fallback": report.fallback,
        "finished_posted": report.finished_posted,
        "service_error": report.service_error,
    }
