"""Slurm's QOS and association limits, and which held jobs starting now would break them.

A job cpsched holds shows Slurm's hold as its pending reason, never the limit it would
wait on once released (``QOSMaxCpuPerUserLimit``, ``AssocGrpJobsLimit``...): Slurm
checks limits only for jobs it may start. So the bridge reads the limits itself
(``sacctmgr``, once a minute) and counts what the running jobs use of each; a held job
that would go over one is sent as not eligible, with Slurm's reason, and within one
cycle the starts are tallied so that two jobs each within a limit do not go over it
together.

Counted: the ``cpu`` and ``node`` TRES and job counts, for a QOS as a whole (GrpTRES,
GrpJobs), per user (MaxTRESPU, MaxJobsPU) and per account (MaxTRESPA, MaxJobsPA) in it,
per job (MaxTRES); for an association (account and user: GrpTRES, GrpJobs, MaxJobs,
MaxTRES) and for an account as a whole (its own association's GrpTRES and GrpJobs, the
account's direct users only). Not counted: other TRES (memory, GRES), limits over time
(GrpTRESMins, GrpTRESRunMins, GrpWall), parent accounts above the job's own, partition
QOS. Slurm still enforces every limit: a released job it keeps back is held again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from cpsched.slurm_bridge.model import JobView

TRES_COUNTED = ("cpu", "node")
_TRES_WORD = {"cpu": "Cpu", "node": "Node"}

Usage = Counter[tuple[str, ...]]
"""Use per (scope, name..., what): e.g. ("qos-user", "capped", "alice", "cpu") → 12;
what is a TRES name or "jobs"."""


@dataclass(frozen=True, slots=True)
class Caps:
    """Caps on running jobs' TRES (per name) and their count; absent when unlimited."""

    tres: dict[str, int] = field(default_factory=dict)
    jobs: int | None = None

    def __bool__(self) -> bool:
        return bool(self.tres) or self.jobs is not None


@dataclass(frozen=True, slots=True)
class QosLimits:
    whole: Caps = field(default_factory=Caps)  # GrpTRES, GrpJobs
    per_user: Caps = field(default_factory=Caps)  # MaxTRESPU, MaxJobsPU
    per_account: Caps = field(default_factory=Caps)  # MaxTRESPA, MaxJobsPA
    per_job: dict[str, int] = field(default_factory=dict)  # MaxTRES (per job)


@dataclass(frozen=True, slots=True)
class AssocLimits:
    whole: Caps = field(default_factory=Caps)  # GrpTRES, GrpJobs (user "": the account)
    jobs: int | None = None  # MaxJobs
    per_job: dict[str, int] = field(default_factory=dict)  # MaxTRES (per job)


@dataclass(frozen=True, slots=True)
class SiteLimits:
    qos: dict[str, QosLimits] = field(default_factory=dict)
    assocs: dict[tuple[str, str], AssocLimits] = field(default_factory=dict)
    """(account, user) → limits; user "" is the account's own association."""
    qos_priority: dict[str, int] = field(default_factory=dict)
    """Each QOS's priority (for the multifactor priority's QOS factor)."""

    def __bool__(self) -> bool:
        return bool(self.qos) or bool(self.assocs)


QOS_FORMAT = "Name,GrpTRES,GrpJobs,MaxTRESPU,MaxJobsPU,MaxTRESPA,MaxJobsPA,MaxTRES,Priority"
ASSOC_FORMAT = "Cluster,Account,User,Partition,GrpTRES,GrpJobs,MaxJobs,MaxTRES"


def qos_argv(sacctmgr: str) -> list[str]:
    return [sacctmgr, "-P", "-n", "show", "qos", f"format={QOS_FORMAT}"]


def assoc_argv(sacctmgr: str) -> list[str]:
    return [sacctmgr, "-P", "-n", "show", "assoc", f"format={ASSOC_FORMAT}"]


def _tres(text: str) -> dict[str, int]:
    """``cpu=4,node=2,gres/gpu=1`` → the counted TRES only."""
    found: dict[str, int] = {}
    for part in text.split(","):
        name, _, amount = part.partition("=")
        if name in TRES_COUNTED and amount.isdigit():
            found[name] = int(amount)
    return found


def _count(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def parse_qos(text: str) -> dict[str, QosLimits]:
    """``sacctmgr -P -n show qos format=QOS_FORMAT`` → QOS name → its limits (the QOSes
    without any counted limit are left out)."""
    found: dict[str, QosLimits] = {}
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) < 8 or not cols[0]:
            continue
        name, grp_tres, grp_jobs, pu_tres, pu_jobs, pa_tres, pa_jobs, pj_tres = cols[:8]
        limits = QosLimits(
            whole=Caps(_tres(grp_tres), _count(grp_jobs)),
            per_user=Caps(_tres(pu_tres), _count(pu_jobs)),
            per_account=Caps(_tres(pa_tres), _count(pa_jobs)),
            per_job=_tres(pj_tres),
        )
        if limits.whole or limits.per_user or limits.per_account or limits.per_job:
            found[name] = limits
    return found


def parse_qos_priority(text: str) -> dict[str, int]:
    """The same listing → QOS name → its priority."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) >= 9 and cols[0] and cols[8].strip().isdigit():
            found[cols[0]] = int(cols[8])
    return found


def parse_assocs(text: str, cluster: str) -> dict[tuple[str, str], AssocLimits]:
    """``sacctmgr -P -n show assoc format=ASSOC_FORMAT`` → (account, user) → limits, for
    ``cluster``'s associations that apply to all partitions."""
    found: dict[tuple[str, str], AssocLimits] = {}
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) < 8 or cols[0] != cluster or cols[3]:
            continue  # another cluster's, or a per-partition association (not counted)
        _, account, user, _, grp_tres, grp_jobs, max_jobs, pj_tres = cols[:8]
        limits = AssocLimits(
            whole=Caps(_tres(grp_tres), _count(grp_jobs)),
            jobs=_count(max_jobs),
            per_job=_tres(pj_tres),
        )
        if limits.whole or limits.jobs is not None or limits.per_job:
            found[(account, user)] = limits
    return found


def job_tres(job: JobView) -> dict[str, int]:
    """What a job counts against the limits: its CPUs and nodes (a running job's real
    ones, a pending job's request) and, as "jobs", 1."""
    cpu_each = job.shape.per_unit.get("cpu", 0)
    if job.allocation:
        return {"cpu": cpu_each * sum(job.allocation.values()), "node": len(job.allocation)}
    nodes = job.rules.min_nodes or (job.shape.units if job.shape.one_unit_per_node else 1)
    return {"cpu": cpu_each * job.shape.units, "node": nodes}


def _scopes(job: JobView) -> list[tuple[str, ...]]:
    qos, account, user = job.rules.qos, job.rules.account, job.user
    return [
        ("qos", qos),
        ("qos-user", qos, user),
        ("qos-account", qos, account),
        ("assoc", account, user),
        ("account", account),
    ]


def add_use(usage: Usage, job: JobView, sign: int = 1) -> None:
    """Count (``sign`` 1) or uncount (-1) ``job`` in every scope it belongs to."""
    amounts = {**job_tres(job), "jobs": 1}
    for scope in _scopes(job):
        for what, amount in amounts.items():
            usage[(*scope, what)] += sign * amount


def usage_of(jobs: list[JobView]) -> Usage:
    """What the running jobs use of every scope, and the jobs released to start that Slurm
    has not run yet (they will count as soon as it does)."""
    usage: Usage = Counter()
    for job in jobs:
        released = job.state == "pending" and job.tagged and not job.held_for_us
        if job.state == "running" or released:
            add_use(usage, job)
    return usage


def _over(caps: Caps, usage: Usage, scope: tuple[str, ...], want: dict[str, int]) -> str:
    """The first of ``caps`` that ``want`` more would exceed in ``scope``: its TRES name
    or "jobs"; "" when none."""
    for name, cap in caps.tres.items():
        if usage[(*scope, name)] + want.get(name, 0) > cap:
            return name
    if caps.jobs is not None and usage[(*scope, "jobs")] + 1 > caps.jobs:
        return "jobs"
    return ""


def _per_job(caps: dict[str, int], want: dict[str, int]) -> str:
    return next((name for name, cap in caps.items() if want.get(name, 0) > cap), "")


def _word(what: str) -> str:
    return "Jobs" if what == "jobs" else _TRES_WORD.get(what, what.capitalize())


def over_limit(job: JobView, limits: SiteLimits, usage: Usage) -> str:
    """Slurm's pending reason for the first limit ``job`` would break if it started now
    beside ``usage`` (e.g. ``QOSMaxCpuPerUserLimit``); "" when it breaks none."""
    if not limits:
        return ""
    want = job_tres(job)
    qos, account, user = job.rules.qos, job.rules.account, job.user
    q = limits.qos.get(qos)
    if q is not None:
        if what := _per_job(q.per_job, want):
            return f"QOSMax{_word(what)}PerJobLimit"
        if what := _over(q.whole, usage, ("qos", qos), want):
            return f"QOSGrp{_word(what)}Limit"
        if what := _over(q.per_user, usage, ("qos-user", qos, user), want):
            return f"QOSMax{_word(what)}PerUserLimit"
        if what := _over(q.per_account, usage, ("qos-account", qos, account), want):
            return f"QOSMax{_word(what)}PerAccountLimit"
    mine = limits.assocs.get((account, user))
    if mine is not None:
        if what := _per_job(mine.per_job, want):
            return f"AssocMax{_word(what)}PerJobLimit"
        if what := _over(mine.whole, usage, ("assoc", account, user), want):
            return f"AssocGrp{_word(what)}Limit"
        if mine.jobs is not None and usage[("assoc", account, user, "jobs")] + 1 > mine.jobs:
            return "AssocMaxJobsLimit"
    whole = limits.assocs.get((account, ""))
    if whole is not None and (what := _over(whole.whole, usage, ("account", account), want)):
        return f"AssocGrp{_word(what)}Limit"
    return ""


def hold_back_over_limits(jobs: list[JobView], limits: SiteLimits) -> list[JobView]:
    """``jobs`` with each job held for cpsched that would break a limit if it started
    now (beside the running jobs) marked as blocked, with Slurm's reason."""
    if not limits:
        return jobs
    usage = usage_of(jobs)
    marked: list[JobView] = []
    for job in jobs:
        if job.state == "pending" and job.held_for_us and not job.rules.blocked:
            reason = over_limit(job, limits, usage)
            if reason:
                job = replace(job, rules=replace(job.rules, blocked=reason))
        marked.append(job)
    return marked
