"""Walltime-correction directives added to any dispatcher's decision.

When a running job comes within the policy's lead of its current limit, the decision
asks the workload manager to extend the limit. Extensions never shorten a limit and stop
at the policy's cap; every one carries its reason, for the audit trail.
"""

from __future__ import annotations

from dataclasses import replace

from cpsched.core.correction import CorrectionPolicy
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.problem import Decision, Extension, RunningJob, Snapshot


def reservation_cap(snapshot: Snapshot, rj: RunningJob) -> int:
    """The longest limit ``rj`` may have without running into a reservation that starts
    later on one of its nodes (a maintenance window is never extended into)."""
    nodes = {node for node, _ in rj.allocation}
    starts = [
        r.start
        for r in snapshot.site.reservations
        if r.start > snapshot.time and not nodes.isdisjoint(r.nodes)
    ]
    return min(starts) - rj.start if starts else 1 << 62


def extensions_due(snapshot: Snapshot, policy: CorrectionPolicy) -> tuple[Extension, ...]:
    """The extension directives ``policy`` gives for ``snapshot``'s running jobs."""
    if policy.kind == "off":
        return ()
    now = snapshot.time
    due: list[Extension] = []
    for rj in snapshot.running:
        if rj.trial or not policy.due(rj.start, rj.time_limit, now):  # a trial ends as it is
            continue
        new_limit = policy.next_limit(rj.time_limit, rj.extensions)
        if new_limit is not None:
            new_limit = min(new_limit, reservation_cap(snapshot, rj))
        if new_limit is not None and new_limit > rj.time_limit:
            due.append(
                Extension(
                    rj.job.id,
                    new_limit,
                    f"{policy.kind} correction #{rj.extensions + 1}: "
                    f"within {policy.lead} s of its {rj.time_limit} s limit",
                )
            )
    return tuple(due)


class CorrectingDispatcher:
    """``inner``'s decision plus the walltime-correction directives of ``policy``."""

    def __init__(self, inner: Dispatcher, policy: CorrectionPolicy) -> None:
        self.inner = inner
        self.policy = policy
        self.name = inner.name

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        decision = self.inner.decide(snapshot, durations)
        extensions = extensions_due(snapshot, self.policy)
        if not extensions:
            return decision
        return replace(decision, extensions=decision.extensions + extensions)
