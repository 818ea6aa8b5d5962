"""The multifactor priority the bridge computes for the jobs Slurm holds for cpsched."""

from __future__ import annotations

from dataclasses import replace

from cpsched.slurm_bridge.site_priority import (
    PriorityInputs,
    PriorityWeights,
    config_values,
    multifactor,
    parse_fairshare,
    weights_of,
)
from tests.slurm_bridge.fakes import held

CONFIG = """Configuration data as of 2026-11-24T17:40:00
ClusterName             = testbed
PriorityMaxAge          = 1-00:00:00
PriorityFavorSmall      = No
PriorityType            = priority/multifactor
PriorityWeightAge       = 1000
PriorityWeightAssoc     = 0
PriorityWeightFairShare = 10000
PriorityWeightJobSize   = 1000
PriorityWeightPartition = 1000
PriorityWeightQOS       = 2000
PriorityWeightTRES      = cpu=100
"""
# sshare -P -n -a -o Account,User,FairShare
SSHARE = """root||
root|root|1.000000
research||
research|alice|0.250000
research|bob|junk
"""


def test_weights_come_from_the_config_and_say_what_is_left_out() -> None:
    weights = weights_of(config_values(CONFIG))
    assert weights == PriorityWeights(
        age=1000,
        fairshare=10000,
        job_size=1000,
        partition=1000,
        qos=2000,
        max_age_s=86400,
        favor_small=False,
        not_modelled=("PriorityWeightTRES",),
    )
    assert weights_of(config_values(CONFIG.replace("multifactor", "basic"))) is None


def test_fairshare_factors_are_per_user_association() -> None:
    assert parse_fairshare(SSHARE) == {("root", "root"): 1.0, ("research", "alice"): 0.25}


def test_the_priority_sums_the_weighted_factors() -> None:
    inputs = PriorityInputs(
        weights=weights_of(config_values(CONFIG)),  # type: ignore[arg-type]
        fairshare={("research", "alice"): 0.25},
        qos_priority={"normal": 50, "high": 100},
        partition_factor={"batch": 1, "fast": 4},
        total_nodes=4,
        total_cpus=24,
    )
    job = held("j", cpu=2)  # submitted at 100
    job = replace(job, user="alice", rules=replace(job.rules, qos="normal", account="research"))
    # age 43,200 s of a 1-day maximum: 0.5; size (1/4 + 2/24) / 2; partition 1/4; QOS 1/2
    expected = 500 + 2500 + 1000 * (0.25 + 2 / 24) / 2 + 250 + 1000
    assert multifactor(job, 100 + 43_200, inputs) == int(expected)
    fast = replace(job, partition="batch,fast")  # the best of its partitions
    assert multifactor(fast, 100 + 43_200, inputs) == int(expected) + 750
    begins_later = replace(job, rules=replace(job.rules, begin=100 + 86_400))
    assert multifactor(begins_later, 100 + 43_200, inputs) == int(expected) - 500
