"""A decision as the wire's answer (:class:`~cpsched.wire.schemas.DecisionOut`): starts on
node names, extensions, the plan and the diagnostics, with the notes bounded."""

from __future__ import annotations

from collections.abc import Mapping

from cpsched.core import Decision, Snapshot
from cpsched.wire.schemas import (
    DecisionOut,
    DiagnosticsOut,
    ExtensionOut,
    RejectedJobOut,
    StartOut,
)


def to_decision_out(
    *,
    cluster: str,
    snapshot: Snapshot,
    decision: Decision,
    predicted: Mapping[str, int],
    rejected: list[RejectedJobOut],
    notes: list[str],
    wall_ms: float,
    solve_ms: float,
    dry_run: bool,
    decision_id: int | None,
    snapshot_digest: str = "",
) -> DecisionOut:
    nodes = snapshot.nodes
    d = decision.diagnostics
    return DecisionOut(
        cluster=cluster,
        snapshot_digest=snapshot_digest,
        decision_id=decision_id,
        time=snapshot.time,
        dry_run=dry_run,
        starts=[
            StartOut(
                job_id=s.job_id,
                allocation={nodes[node].name: units for node, units in s.allocation},
                predicted_run_time=predicted[s.job_id],
                may_drift=s.may_drift,
                trial_s=s.trial,
            )
            for s in decision.starts
        ],
        extensions=[
            ExtensionOut(job_id=e.job_id, new_time_limit=e.new_limit, reason=e.reason)
            for e in decision.extensions
        ],
        planned=dict(decision.planned) if decision.planned is not None else None,
        rejected=rejected,
        diagnostics=DiagnosticsOut(
            dispatcher=d.dispatcher,
            solver_status=d.solver_status,
            fallback=d.fallback,
            fallback_reason=d.fallback_reason,
            restarts=d.restarts,
            wall_ms=round(wall_ms, 3),
            solve_ms=round(solve_ms, 3),
            model_variables=d.model_variables,
            model_constraints=d.model_constraints,
            model_intervals=d.model_intervals,
            split_waiting=d.split_waiting,
            split_dropped=d.split_dropped,
            guaranteed=d.guaranteed,
            guarantees_broken=d.guarantees_broken,
            partial=d.partial,
            notes=_at_most([*notes, *d.notes], MAX_NOTES),
        ),
    )


MAX_NOTES = 50
"""Notes an answer carries (one per over-committed node or skipped job could be many)."""


def _at_most(notes: list[str], most: int) -> list[str]:
    if len(notes) <= most:
        return notes
    return [*notes[: most - 1], f"... and {len(notes) - most + 1} more notes"]
