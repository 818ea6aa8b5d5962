"""Whether the workload manager would start a pending job now, whatever the nodes.

A job that waits on a dependency, a begin time, a QOS or association limit, a partition
that is down... is *held back*: the bridge sends it as not eligible (the service then
never starts it) and never releases it itself.
"""

from __future__ import annotations

from cpsched.slurm_bridge.model import JobView

SLURM_WAITING_ONLY_FOR_ROOM = ("", "None", "Priority", "Resources", "JobHeldUser", "JobHeldAdmin")
"""Slurm's pending reasons that say nothing against starting the job now: it waits for
room or its turn (or is held, by cpsched in active mode). Any other reason (a QOS or
association limit, a partition down or over its limits, licenses...) is a rule the
job breaks now: such a job is sent as not eligible and never released."""
_ROOM_PREFIXES = ("ReqNodeNotAvail", "Reservation")  # where, not whether: the core decides


def slurm_blocked(reason: str) -> str:
    """Slurm's pending reason when it is a rule the job breaks now; "" otherwise."""
    reason = reason.strip()
    if reason in SLURM_WAITING_ONLY_FOR_ROOM or reason.startswith(_ROOM_PREFIXES):
        return ""
    return reason


def held_back(job: JobView, now: int) -> str | None:
    """Why the workload manager would not start ``job`` now whatever the nodes, or None."""
    rules = job.rules
    if rules.dependency:
        failed = "failed" in rules.dependency.lower()
        return "DependencyNeverSatisfied" if failed else f"Dependency ({rules.dependency})"
    if rules.begin is not None and rules.begin > now:
        return f"BeginTime ({rules.begin})"
    return rules.blocked or None
