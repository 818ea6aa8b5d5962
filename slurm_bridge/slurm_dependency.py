"""Whether a held job's dependency is met, judged from the jobs the bridge read.

Slurm looks at a pending job's dependency again only when its own scheduler considers the
job, which it never does for a job held at priority 0: ``afterok:1(unfulfilled)`` stays so
long after job 1 completed (seen on 22.05 and 24.11), and such a job would be held back
for ever. The bridge therefore judges each clause from the state of the job it names, as
Slurm would: ``after`` once that job started (and ``+minutes`` more passed), ``afterany``
once it ended, ``afterok`` once it completed, ``afternotok`` once it ended otherwise.
Released, the job is checked by Slurm itself before it starts.

Clauses that name a job the bridge did not read (purged from Slurm's memory), a whole
array, ``singleton``, ``aftercorr`` or ``afterburstbuffer`` are not judged: the job stays
held back, as Slurm shows it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from cpsched.slurm_bridge.model import JobView

_CLAUSE = re.compile(
    r"^(after|afterany|afterok|afternotok):(\d+(?:_\d+)?)(?:\+(\d+))?(?:\(\w+\))?$"
)


def met(dependency: str, jobs: Mapping[str, JobView], now: int) -> bool:
    """Whether ``dependency`` (as Slurm lists it: clauses joined by ``,`` for all of them
    or ``?`` for any one) is met by ``jobs`` (id → job)."""
    if not dependency or "(failed)" in dependency:
        return False
    joined_by_any = "?" in dependency
    clauses = dependency.split("?" if joined_by_any else ",")
    results = [_clause_met(clause.strip(), jobs, now) for clause in clauses]
    return any(results) if joined_by_any else all(results)


def _clause_met(clause: str, jobs: Mapping[str, JobView], now: int) -> bool:
    match = _CLAUSE.match(clause)
    if match is None:
        return False
    kind, job_id, minutes = match.group(1), match.group(2), int(match.group(3) or 0)
    other = jobs.get(job_id)
    if other is None:
        return False
    ended = other.state not in {"pending", "running"}
    if kind == "after":
        return other.start is not None and now >= other.start + 60 * minutes
    if kind == "afterany":
        return ended
    if kind == "afterok":
        return other.state == "completed"
    return ended and other.state != "completed"  # afternotok


def settle_dependencies(jobs: list[JobView], now: int) -> list[JobView]:
    """``jobs`` with the dependency of each held job whose dependency is met cleared."""
    by_id = {job.id: job for job in jobs}
    return [
        replace(job, rules=replace(job.rules, dependency=""))
        if job.held_for_us and job.rules.dependency and met(job.rules.dependency, by_id, now)
        else job
        for job in jobs
    ]
