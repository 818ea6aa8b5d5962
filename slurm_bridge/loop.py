"""One bridge cycle, and the loop that runs cycles without ever crash-looping.

A cycle: read state → re-hold pins that did not start → ask the service → apply (or,
in shadow mode, record) → deliver finished jobs → write metrics. When the service is
unreachable or late, the configured fallback applies; it is undone when it returns.
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from cpsched.slurm_bridge import shadow
from cpsched.slurm_bridge import state_file as bookkeeping
from cpsched.slurm_bridge.apply import ApplyResult, apply_decision
from cpsched.slurm_bridge.audit import Audit
from cpsched.slurm_bridge.backend import WorkloadManager
from cpsched.slurm_bridge.config import BridgeSettings
from cpsched.slurm_bridge.errors import BridgeError, CommandError
from cpsched.slurm_bridge.finished import pick_finished
from cpsched.slurm_bridge.metrics import BridgeMetrics
from cpsched.slurm_bridge.model import ClusterState, JobView
from cpsched.slurm_bridge.pacing import Pacer, WakeFile
from cpsched.slurm_bridge.snapshot import dispatch_request, finished_batch
from cpsched.wire.client import ServiceClient
from cpsched.wire.errors import ServiceError, ServiceRejected
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
    misplaced: dict[str, dict[str, int]] = field(default_factory=dict)  # job → real split
    unpinned: list[str] = field(default_factory=list)  # jobs whose pin reservation went
    settling: bool = False  # the release fallback just ended: nothing applied this cycle
    reclaimed: list[str] = field(default_factory=list)  # taken back from the fallback
    finished_posted: int = 0
    finished_duplicates: int = 0
    finished_refused: dict[str, str] = field(default_factory=dict)  # job → why
    finished_disbelieved: dict[str, str] = field(default_factory=dict)  # job → why
    left_out: dict[str, str] = field(default_factory=dict)  # job → why it was not decided
    standby: bool = False  # another bridge holds the cluster's writer lease
    handed_over: list[str] = field(default_factory=list)  # refused, given to the manager
    trials_ended: list[str] = field(default_factory=list)  # put back in the queue, held
    next_trial_s: float | None = None  # seconds until the next trial is due to end
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
        if not self.book.writer_id:
            self.book.writer_id = f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"
        if self.client.writer is None:
            self.client.writer = self.book.writer_id
        self.standby = False
        """Another bridge dispatches for the cluster (the service refused this one's
        dispatch with 423): this one changes nothing until it may take over."""
        self.metrics = BridgeMetrics()
        self.audit = Audit(settings.audit_log_path)
        self.outage_since: float | None = None
        self._outage_cause: str | None = None
        self.seen: dict[str, JobView] = {}  # last view of each job, for finished posts
        self.history: frozenset[str] | None = None  # ended jobs of the first read
        self.finished_read_at: int | None = None  # when the ended jobs' record was read
        self.disbelieved: set[str] = set()  # ended records not believed, said once
        self.drift_since: dict[str, float] = {}  # task job → first deferred for its split
        self.left_out: dict[str, str] = {}  # jobs left out of the decision, said once

    # ---- one cycle -------------------------------------------------------------
    def cycle(self) -> CycleReport:
        report = CycleReport()
        t0 = time.perf_counter()
        state = self._with_first_submits(self.backend.read_state())
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
        if not shadow_mode and not self.standby:
            report.misplaced = self._check_landed(state)
            report.rehold = self._rehold_stale_pins(state)
            report.unpinned = self.backend.settle(state)
            for job_id in report.unpinned:
                self.audit.record(state.time, "unpinned", job=job_id)
            self.metrics.inc("pins_removed_total", len(report.unpinned))
            report.trials_ended = self._end_trials(state)
            if report.trials_ended:  # back in the queue now: neither running nor queued here
                gone = set(report.trials_ended)
                state = replace(state, jobs=[j for j in state.jobs if j.id not in gone])
        request, notes = dispatch_request(
            state,
            shadow=shadow_mode,
            extensions=self.book.extensions,
            starting={
                j: (int(p.at), p.allocation) for j, p in self.book.pinned.items() if p.allocation
            },
            splits_tasks=self.backend.splits_tasks,
            pins_splits=self.backend.pins_splits,
            left_out=report.left_out,
            trials=self.book.trials,
            ends_trials=self.backend.ends_trials,
        )
        report.notes += notes
        # Jobs Slurm listed but the bridge could not read: left out like the above
        report.left_out.update(dict(state.unreadable))
        t1 = time.perf_counter()
        try:
            decision = self.client.dispatch(request)
        except ServiceError as exc:
            report.timings["post_s"] = time.perf_counter() - t1
            report.service_error = str(exc)
            if isinstance(exc, ServiceRejected) and exc.status == 423:
                # Another bridge dispatches for the cluster: wait, change nothing (a
                # fallback release would hand its held jobs to the workload manager).
                report.standby = True
                self._enter_standby(state, exc)
            else:
                self.metrics.inc("service_failures_total")
                self._log_service_failure(exc)
                if not shadow_mode:
                    report.fallback = self._fallback(state)
        else:
            report.timings["post_s"] = time.perf_counter() - t1
            report.decision = decision
            if self.standby:
                self.standby = False
                log.warning("this bridge now dispatches for the cluster (no longer a standby)")
                self.audit.record(state.time, "active")
            report.left_out.update(
                {r.job_id: f"refused by the service: {r.reason}" for r in decision.rejected}
            )
            self.metrics.set("decision_seconds", decision.diagnostics.wall_ms / 1000.0)
            ended_fallback = self.outage_since is not None or self.book.fallback_active
            if ended_fallback:
                report.reclaimed = self._end_fallback(state)
            t2 = time.perf_counter()
            if shadow_mode:
                shadow.record(self.settings.shadow_log_path, state, decision)
            elif ended_fallback and self.settings.fallback == "release":
                # Jobs handed to Slurm's scheduler may be starting at this very moment on
                # nodes this state shows free: apply nothing until a read after the
                # reclaim (the next cycle, one gap later).
                report.settling = True
            else:
                report.applied = self._apply(decision, state, report.unpinned)
                report.handed_over = self._hand_over_refused(state, decision)
            report.timings["apply_s"] = time.perf_counter() - t2
        self._report_left_out(state, report.left_out)
        t3 = time.perf_counter()
        self._deliver_finished(state, report)
        report.timings["finished_s"] = time.perf_counter() - t3
        self.book.forget_old(state.time)
        bookkeeping.save(self.settings.state_file, self.book)
        report.next_trial_s = self._next_trial_end(state)
        self._record_metrics(report)
        return report

    # ---- pieces ----------------------------------------------------------------
    def _apply(
        self, decision: DecisionOut, state: ClusterState, unpinned: list[str]
    ) -> ApplyResult:
        starting = {job_id: pin.allocation for job_id, pin in self.book.pinned.items()}
        now = self.clock()
        wait = self.settings.split_drift_wait_s
        may_drift = {job for job, since in self.drift_since.items() if now - since >= wait}
        if wait <= 0:  # no waiting for a steady split at all
            may_drift = {start.job_id for start in decision.starts}
        result = apply_decision(decision, state, self.backend, starting, may_drift, unpinned)
        drifting = result.drifting()
        self.drift_since = {job: self.drift_since.get(job, now) for job in drifting}
        trials = {s.job_id: s.trial_s for s in decision.starts if s.trial_s is not None}
        for job_id, allocation in result.started.items():
            view = state.job(job_id)
            per_unit = dict(view.shape.per_unit) if view is not None else {}
            self.book.pinned[job_id] = bookkeeping.Pin(
                at=now, allocation=allocation, per_unit=per_unit
            )
            trial = trials.get(job_id)
            if trial is None:
                self.book.trials.pop(job_id, None)
                self.audit.record(state.time, "start", job=job_id, allocation=allocation)
            else:
                self.book.trials[job_id] = trial
                self.audit.record(
                    state.time, "trial_start", job=job_id, allocation=allocation, trial_s=trial
                )
        self.metrics.inc("trials_started_total", len(trials.keys() & result.started.keys()))
        for job_id, why in result.refused.items():
            self.audit.record(state.time, "refused", job=job_id, why=why)
        for job_id, why in result.deferred.items():
            self.audit.record(state.time, "deferred", job=job_id, why=why)
        for job_id, (decided, split) in result.adjusted.items():
            self.audit.record(state.time, "adjusted", job=job_id, decided=decided, split=split)
        for job_id, why in result.failed.items():
            self.audit.record(state.time, "command_failed", job=job_id, error=why)
        for job_id, limit in result.extended.items():
            self.book.extensions[job_id] = self.book.extensions.get(job_id, 0) + 1
            self.audit.record(state.time, "extended", job=job_id, limit_s=limit)
        self.metrics.inc("jobs_started_total", len(result.started))
        self.metrics.inc("starts_deferred_total", len(result.deferred))
        self.metrics.inc("starts_deferred_for_split_total", len(drifting))
        self.metrics.inc("starts_adjusted_total", len(result.adjusted))
        self.metrics.inc("extensions_total", len(result.extended))
        self.metrics.inc("starts_refused_total", len(result.refused))
        self.metrics.inc("command_failures_total", len(result.failed))
        return result

    def _check_landed(self, state: ClusterState) -> dict[str, dict[str, int]]:
        """Jobs released since the last cycle that now run: where they really are.

        Each is compared with the allocation decided for it, resource by resource on
        each node: running on a node not decided, or holding more of a resource on a
        node than decided, is a mismatch (holding less is not: a ``-N 2 -n 7`` job
        decided 4 CPUs per node runs 4 + 3). A mismatch is logged, audited and counted
        (``placement_mismatch_total``); the snapshot sent next carries the real
        allocation, read from Slurm, anyway."""
        misplaced: dict[str, dict[str, int]] = {}
        for job_id, pin in list(self.book.pinned.items()):
            job = state.job(job_id)
            if job is None or job.state != "running":
                continue
            del self.book.pinned[job_id]
            if pin.allocation and pin.per_unit and not _within(job, pin):
                misplaced[job_id] = dict(job.allocation)
                log.warning(
                    "job runs on an allocation other than decided",
                    extra={"job": job_id, "decided": pin.allocation, "real": job.allocation},
                )
                self.audit.record(
                    state.time,
                    "placement_mismatch",
                    job=job_id,
                    decided=pin.allocation,
                    real=job.allocation,
                )
        self.metrics.inc("placement_mismatch_total", len(misplaced))
        return misplaced

    def _with_first_submits(self, state: ClusterState) -> ClusterState:
        """``state`` with the jobs a trial put back at their first submit time (Slurm
        resets it when it requeues a job): back in the queue at their place, their wait
        counted from their submission. Jobs gone are forgotten."""
        submits = self.book.requeued_submits
        if not submits:
            return state
        present = {job.id for job in state.jobs}
        for job_id in submits.keys() - present:
            del submits[job_id]
        return replace(
            state,
            jobs=[
                replace(job, submit=submits[job.id]) if job.id in submits else job
                for job in state.jobs
            ],
        )

    def _end_trials(self, state: ClusterState) -> list[str]:
        """Trial runs that have lasted their seconds: each job still running is put back
        in the queue, held for cpsched (it runs again, from its start, when the service
        starts it again). A trial whose job ended, or was held again before it started,
        is forgotten; one that cannot be put back (the command failed) runs on to its
        end, as an ordinary start, and is said so."""
        ended: list[str] = []
        for job_id, seconds in list(self.book.trials.items()):
            job = state.job(job_id)
            if job is None or job.state not in {"pending", "running"}:
                del self.book.trials[job_id]  # ended (within its trial) or gone
                continue
            if job.state == "pending":
                if job_id not in self.book.pinned:  # not starting (any more): no trial
                    del self.book.trials[job_id]
                continue
            if job.ending or job.start is None or state.time < job.start + seconds:
                continue
            del self.book.trials[job_id]
            try:
                self.backend.requeue_hold(job_id)
            except CommandError as exc:
                log.error(
                    "trial run not ended: the job runs on",
                    extra={"job": job_id, "error": str(exc)},
                )
                self.audit.record(state.time, "trial_not_ended", job=job_id, error=str(exc))
                self.metrics.inc("trials_not_ended_total")
                continue
            ended.append(job_id)
            self.book.requeued_submits[job_id] = job.submit
            self.audit.record(
                state.time, "trial_requeued", job=job_id, ran_s=state.time - job.start
            )
        if ended:
            log.info("trial runs ended; jobs back in the queue", extra={"jobs": ended[:20]})
        self.metrics.inc("trials_requeued_total", len(ended))
        return ended

    def _next_trial_end(self, state: ClusterState) -> float | None:
        """Seconds until the earliest running trial is due to end (None: none runs)."""
        ends = [
            job.start + seconds
            for job_id, seconds in self.book.trials.items()
            if (job := state.job(job_id)) is not None
            and job.state == "running"
            and job.start is not None
        ]
        return max(0.0, min(ends) - state.time) if ends else None

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
                "pinned job did not start; held again",
                extra={"job": job_id, "allocation": pin.allocation},
            )
            self.audit.record(state.time, "reheld", job=job_id, allocation=pin.allocation)
        self.metrics.inc("reheld_total", len(reheld))
        return reheld

    def _log_service_failure(self, exc: ServiceError) -> None:
        """Once per outage (logs stay quiet), and again when the cause changes: what
        failed, the fallback in force, and what to fix."""
        cause = f"HTTP {exc.status}" if isinstance(exc, ServiceRejected) else "unavailable"
        if self.outage_since is not None and cause == self._outage_cause:
            return
        if self.outage_since is None:
            self.outage_since = self.clock()
        self._outage_cause = cause
        mode: str = self.settings.fallback
        if mode == "release" and self.settings.fallback_after_s > 0:
            mode += f" after {self.settings.fallback_after_s:g} s"
        extra = {"error": str(exc), "fallback": mode}
        if isinstance(exc, ServiceRejected):
            log.error(f"service refused the bridge's request: {exc.what_to_fix}", extra=extra)
        else:
            log.warning("service unavailable", extra=extra)

    def _fallback(self, state: ClusterState) -> str:
        now = self.clock()
        if self.outage_since is None:
            self.outage_since = now
        if self.settings.fallback == "hold" or now - self.outage_since < (
            self.settings.fallback_after_s
        ):
            if not self.book.fallback_active:
                if self.settings.fallback == "hold":
                    log.warning("service unavailable: held jobs stay held (fallback=hold)")
                else:
                    log.warning(
                        "service unavailable: held jobs stay held until the outage lasts "
                        f"{self.settings.fallback_after_s:g} s (fallback=release)"
                    )
                self.audit.record(state.time, "fallback", mode="hold")
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
                "service unavailable: jobs handed to the workload manager's own scheduler "
                "(fallback=release)",
                extra={"jobs": len(released), "backend": self.backend.name},
            )
            self.audit.record(state.time, "fallback", mode="release", released=released)
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
        self.audit.record(state.time, "fallback_ended", reclaimed=reclaimed)
        self.outage_since = None
        self._outage_cause = None
        self.book.fallback_active = False
        return reclaimed

    def _deliver_finished(self, state: ClusterState, report: CycleReport) -> None:
        # squeue -t all's ended jobs too: slurmdbd learns of an end some seconds later
        ended = state.ended_after_start
        recorded: list[JobView] = []
        reading = (
            self.finished_read_at is None
            or state.time - self.finished_read_at >= self.settings.finished_read_s
        )
        if reading:
            self.finished_read_at = state.time
            try:
                recorded = self.backend.finished_jobs(state)
            except BridgeError as exc:
                report.notes.append(f"finished jobs unreadable: {exc}")
        ended = [*recorded, *ended]
        if self.history is None:  # the first read only: later ones may hold forged lines
            self.history = frozenset(j.id for j in recorded)
        fresh, disbelieved = pick_finished(
            (j for j in ended if j.id not in self.book.delivered),
            state,
            self.seen,
            unseen_believed=self.history if self.backend.finished_forgeable else None,
        )
        if reading:  # between reads only squeue's views, which are always believed
            self._disbelieve(state, disbelieved, report)
        wire, refused = finished_batch(fresh.values())
        for job_id, why in refused.items():
            self._refused_finished(state, job_id, fresh[job_id].end or state.time, why, report)
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
            for refusal in ack.refused:
                end = self.book.delivered.get(refusal.job_id, state.time)
                self._refused_finished(state, refusal.job_id, end, refusal.reason, report)
            report.finished_posted += ack.stored
            report.finished_duplicates += ack.duplicates
            # persist after every acknowledged chunk: a crash here must not re-count
            bookkeeping.save(self.settings.state_file, self.book)
        self.metrics.inc("finished_posted_total", report.finished_posted)

    def _enter_standby(self, state: ClusterState, exc: ServiceRejected) -> None:
        """Said once when this bridge becomes a standby; counted every cycle."""
        if not self.standby:
            self.standby = True
            log.warning(
                "standby: another bridge dispatches for this cluster; this one waits",
                extra={"writer": self.book.writer_id, "error": exc.detail[:500]},
            )
            self.audit.record(state.time, "standby", writer=self.book.writer_id)
        self.metrics.inc("standby_cycles_total")

    def _hand_over_refused(self, state: ClusterState, decision: DecisionOut) -> list[str]:
        """Held jobs the service refused, handed to the workload manager's own scheduler
        (``refused = "release"``): it knows its own rules, and a job cpsched cannot model
        must not wait for ever. Each is released once (it is not cpsched's afterwards)."""
        if self.settings.refused != "release":
            return []
        handed: list[str] = []
        for rejected in decision.rejected:
            job = state.job(rejected.job_id)
            if job is None or not job.held_for_us:
                continue
            try:
                self.backend.release_to_native(job.id)
            except CommandError as exc:
                log.error(
                    "release of a refused job failed", extra={"job": job.id, "error": str(exc)}
                )
                continue
            self.audit.record(state.time, "handed_over", job=job.id, why=rejected.reason)
            handed.append(job.id)
        if handed:
            log.warning(
                "jobs the service refused handed to the workload manager's own scheduler",
                extra={"jobs": handed[:20], "count": len(handed), "backend": self.backend.name},
            )
        self.metrics.inc("refused_handed_over_total", len(handed))
        return handed

    def _report_left_out(self, state: ClusterState, left_out: dict[str, str]) -> None:
        """Jobs not decided this cycle (the snapshot could not carry them, or the service
        refused them) while every other job was: each said once per reason (one log line
        a cycle, each in the audit), counted, and their number kept as a gauge."""
        new = {job: why for job, why in left_out.items() if self.left_out.get(job) != why}
        for job_id, why in new.items():
            self.audit.record(state.time, "left_out", job=job_id, why=why)
        if new:
            first = min(new)
            log.warning(
                "jobs left out of the decision",
                extra={
                    "jobs": sorted(new)[:20],
                    "count": len(new),
                    "job": first,
                    "why": new[first],
                },
            )
        self.metrics.inc("jobs_left_out_total", len(new))
        self.metrics.set("jobs_left_out", len(left_out))
        self.left_out = dict(left_out)

    def _disbelieve(
        self, state: ClusterState, disbelieved: dict[str, str], report: CycleReport
    ) -> None:
        """Ended records not believed: not posted, nor marked delivered (the job's true
        end may come later), and said once each (one log line a cycle, each in the audit)."""
        new = sorted(disbelieved.keys() - self.disbelieved)
        for job_id in new:
            self.audit.record(
                state.time, "finished_disbelieved", job=job_id, why=disbelieved[job_id]
            )
        if new:
            log.warning(
                "ended records not believed; not posted",
                extra={"jobs": new[:20], "count": len(new), "why": disbelieved[new[0]]},
            )
            self.metrics.inc("finished_disbelieved_total", len(new))
        report.finished_disbelieved = disbelieved
        self.disbelieved = set(disbelieved)

    def _refused_finished(
        self, state: ClusterState, job_id: str, end: int, why: str, report: CycleReport
    ) -> None:
        """A finished job the service will not store: reported once, never re-sent (it
        would be refused again and must not hold back the jobs after it)."""
        self.book.delivered[job_id] = end
        self.seen.pop(job_id, None)
        report.finished_refused[job_id] = why
        self.metrics.inc("finished_refused_total")
        log.error("finished job refused; not sent again", extra={"job": job_id, "why": why})
        self.audit.record(state.time, "finished_refused", job=job_id, why=why)

    def _record_metrics(self, report: CycleReport) -> None:
        self.metrics.inc("cycles_total")
        self.metrics.set(
            "queue_jobs", report.held if self.settings.mode == "active" else report.pending
        )
        self.metrics.set("running_jobs", report.running)
        self.metrics.set("fallback_active", 1.0 if self.book.fallback_active else 0.0)
        self.metrics.set("standby", 1.0 if self.standby else 0.0)
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
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """Cycle on cluster events, when the service returns, and every poll interval;
        on errors of the cycle itself back off exponentially; never exit."""
        pacer = Pacer(
            wake=WakeFile(self.settings.wake_file_path),
            healthy=self.client.healthy,
            clock=monotonic,
            sleep=sleep,
            min_gap_s=self.settings.min_cycle_gap_s,
            probe_s=self.settings.probe_interval_s,
        )
        failures = 0
        while not stop():
            started = monotonic()
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
            failures = 0
            log.info("cycle", extra=_summary(report))
            # Deferred starts (and a cycle that applied nothing while the release fallback
            # ended) are planned again as soon as the cycle gap allows.
            deferred = report.applied is not None and bool(report.applied.deferred)
            soon = deferred or report.settling
            delay = self.settings.min_cycle_gap_s if soon else self.settings.poll_interval_s
            if report.next_trial_s is not None:  # a trial ends on time, not a poll later
                delay = max(self.settings.min_cycle_gap_s, min(delay, report.next_trial_s))
            woke = pacer.wait(started, delay, outage=report.service_error is not None)
            self.metrics.inc(f'cycles_started_total{{by="{woke}"}}')


def _within(job: JobView, pin: bookkeeping.Pin) -> bool:
    """Whether the running job holds, on every node, no more than was decided for it."""
    for node, units in job.allocation.items():
        decided = pin.allocation.get(node, 0)
        for resource, amount in job.shape.per_unit.items():
            if amount * units > pin.per_unit.get(resource, 0) * decided:
                return False
    return True


def _summary(report: CycleReport) -> dict[str, object]:
    return {
        "held": report.held,
        "running": report.running,
        "started": len(report.applied.started) if report.applied else 0,
        "extended": len(report.applied.extended) if report.applied else 0,
        "refused": len(report.applied.refused) if report.applied else 0,
        "deferred": len(report.applied.deferred) if report.applied else 0,
        "misplaced": len(report.misplaced),
        "reheld": len(report.rehold),
        "unpinned": len(report.unpinned),
        "fallback": report.fallback,
        "trials_ended": len(report.trials_ended),
        "finished_posted": report.finished_posted,
        "service_error": report.service_error,
    }
