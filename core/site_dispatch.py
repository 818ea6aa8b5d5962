"""The site's rules around any dispatcher: ineligible jobs out, nothing against the rules.

Every dispatcher places with :class:`~cpsched.core.site_placement.SitePlacement`, so it
honours the rules where it places; this wrapper does the rest, the same for all:

* jobs the workload manager holds back (``Constraints.eligible`` false, a time limit over
  every partition's MaxTime, a reservation not in its window) are taken out of the queue
  the dispatcher sees: they never start, and FCFS or EASY do not stop at them, as the
  workload manager itself skips them;
* a start that still breaks a rule (a CP model that placed units itself) is dropped,
  with a note: the job waits for the next call. The CP dispatchers validate their own
  decisions against the same rules and fall back when they break one, so this is the
  last guard, not the way rules are met.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import repeat
from operator import attrgetter, is_not

from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.problem import Decision, Snapshot
from cpsched.core.site import ineligible_reason
from cpsched.core.validate_site import site_violations_by_job


def eligible_snapshot(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` without the queued jobs that may not start now, whatever the nodes."""
    site, now = snapshot.site, snapshot.time
    queued = tuple(
        job
        for job in snapshot.queued
        if job.constraints is None
        or ineligible_reason(job.constraints, job.time_limit, site, now) is None
    )
    return snapshot if len(queued) == len(snapshot.queued) else replace(snapshot, queued=queued)


def has_rules(snapshot: Snapshot) -> bool:
    if not snapshot.site.empty:
        return True
    # Whether a queued job has constraints, asked in C (every call of a replay asks).
    return any(map(is_not, map(_constraints, snapshot.queued), repeat(None)))


_constraints = attrgetter("constraints")


class SiteRulesDispatcher:
    """``inner`` on the eligible jobs only, its starts checked against the rules."""

    def __init__(self, inner: Dispatcher) -> None:
        self.inner = inner
        self.name = inner.name

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        if not has_rules(snapshot):
            return self.inner.decide(snapshot, durations)
        eligible = eligible_snapshot(snapshot)
        decision = self.inner.decide(eligible, durations)
        jobs = {job.id: job for job in eligible.queued}
        broken = site_violations_by_job(eligible, decision, jobs)
        if not broken:
            return decision
        notes = tuple(f"start dropped: {why[0]}" for why in broken.values())
        return replace(
            decision,
            starts=tuple(s for s in decision.starts if s.job_id not in broken),
            diagnostics=replace(decision.diagnostics, notes=(*decision.diagnostics.notes, *notes)),
        )

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)  # transparent, as SteadyStarts
