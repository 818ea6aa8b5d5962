"""Trial runs: a job predicted long tried for a minute on what the decision leaves idle.

Most of what a planning dispatcher could still gain is in knowing which queued jobs are
very short (docs/results/predictors.md, "Where the gap is": on KTH, 89% of the summed
bounded slowdown is the jobs that run under a minute, and a third of them are predicted
longer). No predictor read at submission tells them apart well enough; running them does.
:class:`TrialRuns` wraps a dispatcher and, after it has decided, offers what its starts
leave idle now to queued jobs for ``seconds``, each job once:

* a job tried is predicted to run ``seconds`` or longer (one predicted shorter is already
  planned as short) and asks for more than ``seconds``;
* it runs at most ``seconds``: the driver (the replay's simulator) puts it back in the
  queue then unless it has ended, at its place in submission order, with its prediction;
  a job that ends within its trial has simply run;
* the trial takes nothing a start guarantee needs: no job holding one is tried, and no
  trial goes on the nodes of a guarantee due before the trial would end;
* the shortest-predicted jobs first, in queue order among equals, each where the policy's
  allocator puts it; none once the caller's deadline has passed.

What a trial costs is its nodes for ``seconds`` when the job turns out longer, and the
jobs it delays by that much (a planned start on those nodes within the trial). The
running trial is shown to the dispatchers as a job whose limit is the trial's end.

Only a job the workload manager may put back in its queue is tried (``Job.rerunnable``:
Slurm's ``--requeue``, and never a job that went back once); the bridge ends the trial
(Slurm's ``scontrol requeuehold``, PBS's ``qrerun``). The site's rules hold for a trial
as for any start: a job held back by the workload manager is not tried, and the policy's
placement keeps it in its partitions, off other reservations' nodes within its limit,
and so on.
"""

from __future__ import annotations

from dataclasses import replace

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.problem import Decision, Job, Snapshot, Start
from cpsched.core.site import ineligible_reason
from cpsched.core.state import DispatcherState, passed
from cpsched.core.wait_bound import slots_of


class TrialRuns:
    """``inner``, then trial runs of ``seconds`` on what its decision leaves idle."""

    def __init__(
        self, inner: Dispatcher, allocator: Allocator, seconds: int, state: DispatcherState
    ) -> None:
        if seconds < 1:
            raise ValueError(f"a trial run lasts >= 1 second, got {seconds}")
        self.inner = inner
        self.allocator = allocator
        self.seconds = seconds
        self.state = state
        self.name = inner.name

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        observe = getattr(self.allocator, "observe", None)
        if observe is not None:  # the site placement and the allocators that read the snapshot
            observe(snapshot, durations)
        decision = self.inner.decide(snapshot, durations)
        tried = self.state.tried
        # Only the jobs still here can come back: the others started for good or went.
        tried.intersection_update(
            [job.id for job in snapshot.queued] + [rj.job.id for rj in snapshot.running]
        )
        if passed(self.state.deadline):
            return decision
        candidates = self._candidates(snapshot, decision, durations)
        if not candidates:
            return decision
        free = self._idle(snapshot, decision)
        trials: list[Start] = []
        for job in candidates:
            if passed(self.state.deadline):
                break
            if not free.fits_total(job.request):
                continue
            allocation = self.allocator.place(job, free)
            if allocation is None:
                continue
            free.take(allocation, job)
            tried.add(job.id)
            trials.append(Start(job.id, allocation, trial=self.seconds))
        if not trials:
            return decision
        diagnostics = decision.diagnostics
        note = f"{len(trials)} job(s) tried for {self.seconds} s on what was left idle"
        return replace(
            decision,
            starts=(*decision.starts, *trials),
            diagnostics=replace(diagnostics, notes=(*diagnostics.notes, note)),
        )

    def _candidates(
        self, snapshot: Snapshot, decision: Decision, durations: Durations
    ) -> list[Job]:
        """The queued jobs that may be tried, shortest predicted first (queue order
        among equals: the sort is stable)."""
        started = {start.job_id for start in decision.starts}
        tried, guaranteed, seconds = self.state.tried, self.state.guarantees, self.seconds
        site, now = snapshot.site, snapshot.time
        candidates = [
            job
            for job in snapshot.queued
            if job.rerunnable
            and job.layout == "any"
            and (
                job.constraints is None
                or ineligible_reason(job.constraints, job.time_limit, site, now) is None
            )
            and job.time_limit > seconds
            and durations[job.id] >= seconds
            and job.id not in started
            and job.id not in tried
            and job.id not in guaranteed
        ]
        candidates.sort(key=lambda job: durations[job.id])
        return candidates

    def _idle(self, snapshot: Snapshot, decision: Decision) -> FreeCapacity:
        """What is free once the decision's starts run, less the nodes of the start
        guarantees due before a trial would end."""
        free = FreeCapacity.of(snapshot)
        queued = {job.id: job for job in snapshot.queued}
        for start in decision.starts:
            free.take(start.allocation, queued[start.job_id])
        due = snapshot.time + self.seconds
        soon = {job_id: g for job_id, g in self.state.guarantees.items() if g.start < due}
        if not soon:
            return free
        held = {node for slot in slots_of(soon, snapshot.nodes).values() for node, _ in slot or ()}
        rows, total = free.rows(), list(free.total)
        for node in held:
            total = [t - x for t, x in zip(total, rows[node], strict=True)]
            rows[node] = tuple(0 for _ in rows[node])
        return FreeCapacity(rows, total, snapshot.capacity_total, snapshot.nodes)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)  # transparent, as the other wrappers
