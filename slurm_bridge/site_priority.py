"""Slurm's multifactor priority for the jobs cpsched holds.

A held job has priority 0 in Slurm, and Slurm computes no priority factors for it
(``sprio`` lists only jobs with a priority). So in active mode the site's order would be
unknown; the bridge computes the priority the job would have, as ``priority/multifactor``
does, from the site's weights (``scontrol show config``), the fair-share factors
(``sshare``), the QOS priorities (``sacctmgr``) and the partitions' ``PriorityJobFactor``:

    weight_age × age + weight_fairshare × fair share + weight_jobsize × job size
    + weight_partition × partition + weight_qos × QOS

each factor between 0 and 1: age is the time since submission (or ``--begin``) over
``PriorityMaxAge`` (a held job is not eligible in Slurm's eyes, so Slurm's own age would
not grow: counting from submission gives what the job would have without cpsched's hold);
job size the mean of its shares of the nodes and of the CPUs (as Slurm 22.05 computes it,
measured on the test bed; one minus it with ``PriorityFavorSmall``, not checked);
partition and QOS their priority over the largest one. Not included: the association,
site, nice and TRES factors (their weights are read and reported when not zero) and
``PriorityFlags`` other than the default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cpsched.slurm_bridge.model import JobView

WEIGHT_KEYS = {
    "age": "PriorityWeightAge",
    "fairshare": "PriorityWeightFairShare",
    "job_size": "PriorityWeightJobSize",
    "partition": "PriorityWeightPartition",
    "qos": "PriorityWeightQOS",
}
NOT_MODELLED = ("PriorityWeightAssoc", "PriorityWeightTRES", "PrioritySiteFactorPlugin")


@dataclass(frozen=True, slots=True)
class PriorityWeights:
    age: int = 0
    fairshare: int = 0
    job_size: int = 0
    partition: int = 0
    qos: int = 0
    max_age_s: int = 7 * 86400
    favor_small: bool = False
    not_modelled: tuple[str, ...] = ()
    """The site's settings this computation leaves out (non-zero weights, plugins)."""


def config_values(scontrol_show_config: str) -> dict[str, str]:
    """``scontrol show config`` → key → value."""
    found: dict[str, str] = {}
    for line in scontrol_show_config.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found[key.strip()] = value.strip()
    return found


def _seconds(text: str) -> int | None:
    """Slurm's ``[days-]hh:mm:ss`` → seconds."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d+):(\d+)", text)
    if not match:
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def weights_of(config: dict[str, str]) -> PriorityWeights | None:
    """The multifactor weights, or None when the site does not use priority/multifactor."""
    if config.get("PriorityType") != "priority/multifactor":
        return None

    def weight(key: str) -> int:
        value = config.get(key, "0")
        return int(value) if value.isdigit() else 0

    unused = tuple(
        key
        for key in NOT_MODELLED
        if (value := config.get(key, "")) and value not in {"0", "(null)", "N/A"}
    )
    return PriorityWeights(
        **{name: weight(key) for name, key in WEIGHT_KEYS.items()},
        max_age_s=_seconds(config.get("PriorityMaxAge", "")) or 7 * 86400,
        favor_small=config.get("PriorityFavorSmall", "No").lower() in {"yes", "1"},
        not_modelled=unused,
    )


SSHARE_ARGV_TAIL = ["-P", "-n", "-a", "-o", "Account,User,FairShare"]


def parse_fairshare(sshare: str) -> dict[tuple[str, str], float]:
    """``sshare -P -n -a -o Account,User,FairShare`` → (account, user) → factor."""
    found: dict[tuple[str, str], float] = {}
    for line in sshare.splitlines():
        cols = line.split("|")
        if len(cols) < 3 or not cols[1]:
            continue  # an account's own line: its users' lines carry the factors
        try:
            found[(cols[0].strip(), cols[1].strip())] = float(cols[2])
        except ValueError:
            continue
    return found


@dataclass(frozen=True, slots=True)
class PriorityInputs:
    """What the factors are computed from, read every minute at most."""

    weights: PriorityWeights
    fairshare: dict[tuple[str, str], float]
    qos_priority: dict[str, int]
    partition_factor: dict[str, int]
    total_nodes: int
    total_cpus: int


def _share(value: int, largest: int) -> float:
    return value / largest if largest > 0 else 0.0


def multifactor(job: JobView, now: int, inputs: PriorityInputs) -> int:
    """The priority Slurm's multifactor plugin would give ``job`` at ``now`` (>= 1)."""
    w = inputs.weights
    since = max(job.submit, job.rules.begin or 0)
    age = min(1.0, max(0, now - since) / w.max_age_s)
    fairshare = inputs.fairshare.get((job.rules.account, job.user), 0.0)
    cpus = job.shape.cpus_asked  # as asked, not the whole cores it would hold
    nodes = job.rules.min_nodes or (job.shape.units if job.shape.one_unit_per_node else 1)
    size = (_share(nodes, inputs.total_nodes) + _share(cpus, inputs.total_cpus)) / 2
    if w.favor_small:
        size = 1.0 - size
    partitions = [p for p in job.partition.split(",") if p]
    largest = max(inputs.partition_factor.values(), default=1)
    partition = max(
        (_share(inputs.partition_factor.get(p, 1), largest) for p in partitions), default=0.0
    )
    qos = _share(
        inputs.qos_priority.get(job.rules.qos, 0), max(inputs.qos_priority.values(), default=0)
    )
    total = (
        w.age * age
        + w.fairshare * fairshare
        + w.job_size * size
        + w.partition * partition
        + w.qos * qos
    )
    return max(1, int(total))
