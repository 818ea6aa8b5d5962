"""Slurm's QOS and association limits: read from sacctmgr, counted against running jobs,
and a held job that would go over one is held back, alone or beside the cycle's starts."""

from __future__ import annotations

from dataclasses import replace

from cpsched.slurm_bridge.apply import apply_decision
from cpsched.slurm_bridge.limits import (
    SiteLimits,
    hold_back_over_limits,
    over_limit,
    parse_assocs,
    parse_qos,
    usage_of,
)
from cpsched.slurm_bridge.model import ClusterState, JobView
from cpsched.slurm_bridge.slurm_json import job_rules
from cpsched.slurm_bridge.slurm_shape import SlurmRequest
from cpsched.slurm_bridge.slurm_text import job_extras
from cpsched.wire.schemas import DecisionOut
from tests.slurm_bridge.fakes import FakeCluster, decision, held, node, running

# sacctmgr -P -n show qos format=QOS_FORMAT / show assoc format=ASSOC_FORMAT, as the
# Slurm 22.05 test bed prints them (plus lines for what is not counted).
QOS = """normal|||||||
capped|||cpu=4||||
busy|cpu=8,mem=1000|3||2|||
perjob|||||||cpu=16,gres/gpu=2
memonly|mem=100G||||||
"""
ASSOCS = """testbed|root|||||||
testbed|research|||cpu=10|||
testbed|research|root||cpu=12||5|
testbed|research|alice|gpu|cpu=1||1|
other|research|root||cpu=1|1||
"""


def limits() -> SiteLimits:
    return SiteLimits(parse_qos(QOS), parse_assocs(ASSOCS, "testbed"))


def in_qos(job: JobView, qos: str, user: str = "root", account: str = "research") -> JobView:
    return replace(job, user=user, rules=replace(job.rules, qos=qos, account=account))


def test_only_the_counted_limits_are_read() -> None:
    qos = parse_qos(QOS)
    assert set(qos) == {"capped", "busy", "perjob"}  # normal: none; memonly: memory only
    assert qos["capped"].per_user.tres == {"cpu": 4}
    assert qos["busy"].whole.tres == {"cpu": 8} and qos["busy"].whole.jobs == 3
    assert qos["busy"].per_user.jobs == 2
    assert qos["perjob"].per_job == {"cpu": 16}
    assocs = parse_assocs(ASSOCS, "testbed")
    # another cluster's and a per-partition association are left out
    assert set(assocs) == {("research", ""), ("research", "root")}
    assert assocs[("research", "root")].jobs == 5


def test_a_job_over_its_qos_per_user_cpus_is_held_back_with_slurms_reason() -> None:
    first = in_qos(running("r1", {"n1": 4}), "capped")
    second = in_qos(held("h1", cpu=4), "capped")
    other_user = in_qos(held("h2", cpu=4), "capped", user="alice")
    jobs = hold_back_over_limits([first, second, other_user], limits())
    assert jobs[1].rules.blocked == "QOSMaxCpuPerUserLimit"
    assert jobs[2].rules.blocked == ""  # alice uses nothing of the QOS yet


def test_group_job_account_and_per_job_limits() -> None:
    lim = limits()
    busy = [in_qos(running(f"r{i}", {"n1": 1}), "busy", user=f"u{i}") for i in range(3)]
    assert over_limit(in_qos(held("h"), "busy", user="u9"), lim, usage_of(busy)) == (
        "QOSGrpJobsLimit"
    )
    two = [in_qos(running(f"r{i}", {"n1": 1}), "busy") for i in range(2)]
    assert over_limit(in_qos(held("h"), "busy"), lim, usage_of(two)) == "QOSMaxJobsPerUserLimit"
    assert over_limit(in_qos(held("h", cpu=17), "perjob"), lim, usage_of([])) == (
        "QOSMaxCpuPerJobLimit"
    )
    eleven = [in_qos(running("r", {"n1": 11}), "normal")]
    assert over_limit(in_qos(held("h", cpu=2), "normal"), lim, usage_of(eleven)) == (
        "AssocGrpCpuLimit"  # the user association's 12
    )
    nine = [in_qos(running("r", {"n1": 9}), "normal", user="bob")]
    assert over_limit(in_qos(held("h", cpu=2), "normal", user="carol"), lim, usage_of(nine)) == (
        "AssocGrpCpuLimit"  # the account's 10, over its users
    )
    assert over_limit(in_qos(held("h", cpu=1), "normal", user="carol"), lim, usage_of(nine)) == ""


def test_without_limits_nothing_is_held_back() -> None:
    job = in_qos(held("h", cpu=64), "capped")
    assert hold_back_over_limits([job], SiteLimits()) == [job]


def test_two_starts_each_within_a_limit_do_not_go_over_it_together() -> None:
    a, b = in_qos(held("a", cpu=3), "capped"), in_qos(held("b", cpu=1), "capped")
    c = in_qos(held("c", cpu=2), "capped")
    state = ClusterState(
        time=1000,
        nodes={"n1": node("n1", cpu=8)},
        jobs=hold_back_over_limits([a, b, c], limits()),
        limits=limits(),
    )
    assert [j.rules.blocked for j in state.jobs] == ["", "", ""]  # each alone fits in 4
    cluster = FakeCluster(state)
    plan = decision(starts={"a": {"n1": 1}, "c": {"n1": 1}, "b": {"n1": 1}})
    result = apply_decision(DecisionOut.model_validate(plan), state, cluster)
    assert sorted(result.started) == ["a", "b"]
    assert "QOSMaxCpuPerUserLimit" in result.refused["c"]


def test_both_readers_take_the_jobs_qos_and_account() -> None:
    line = "JobId=7 JobName=x UserId=root(0) Account=research QOS=capped NumNodes=1 "
    assert job_extras(line)["7"].rules.qos == "capped"
    assert job_extras(line)["7"].rules.account == "research"
    raw = {"qos": "capped", "account": "research", "state_reason": "JobHeldUser"}
    rules = job_rules(
        raw,
        SlurmRequest(
            cpus=1,
            tasks=1,
            node_count=1,
            max_nodes=0,
            cpus_per_task=None,
            mem_per_cpu=None,
            mem_per_node=None,
            gres_per_node={},
            gres_per_task={},
            gres_per_job={},
        ),
    )
    assert (rules.qos, rules.account, rules.blocked) == ("capped", "research", "")


def test_a_released_job_slurm_has_not_run_yet_counts_against_the_limit() -> None:
    released = replace(in_qos(held("r", cpu=4), "capped"), held_for_us=False)
    waiting = in_qos(held("h", cpu=1), "capped")
    jobs = hold_back_over_limits([released, waiting], limits())
    assert jobs[1].rules.blocked == "QOSMaxCpuPerUserLimit"
