"""The PBS backend against a real OpenPBS (built from ../shared/pbs), its scheduler on.

Run inside the PBS root: ``./dev test-pbs`` (``pbs_testbed/pbs-run.sh pytest -m pbs``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cpsched.slurm_bridge.errors import BridgeConfigError
from cpsched.slurm_bridge.pbs import PbsBackend
from cpsched.slurm_bridge.runner import SubprocessRunner
from tests.slurm_bridge.pbs_cluster import NODES, PbsCluster

pytestmark = pytest.mark.pbs


@pytest.fixture
def hooked(pbs: PbsCluster) -> Iterator[PbsCluster]:
    """The cluster with the kit's hook installed (every new job held for cpsched)."""
    pbs.install_hook()
    try:
        yield pbs
    finally:
        pbs.delete_all()
        pbs.remove_hook()


def backend() -> PbsBackend:
    return PbsBackend(runner=SubprocessRunner())


def test_the_bridge_reads_the_real_cluster(pbs: PbsCluster) -> None:
    state = backend().read_state()
    # One node per host: the mom's natural vnode (0 cpus) is left out; gn01 is the GPU
    # host's two vnodes gn01[0] and gn01[1], which serve only gpuq.
    assert sorted(state.nodes) == sorted(NODES)
    assert set(pbs.hosts().values()) == {"pbshead", *NODES}
    assert state.nodes["cn01"].capacity == {"cpu": 4, "mem": 8192}
    assert state.nodes["gn01"].capacity == {"cpu": 8, "mem": 16384, "gpu": 2}
    assert state.nodes["gn01"].partitions == ("gpuq",)
    assert all(node.state == "up" for node in state.nodes.values())


def test_a_plain_qsub_is_accepted_held_and_tagged(hooked: PbsCluster) -> None:
    # No -q: the hook sees job.queue as '' (the default queue is assigned later).
    plain = hooked.qsub("-l", "select=1:ncpus=1", "-l", "walltime=00:05:00")
    in_queue = hooked.qsub("-q", "workq", "-l", "select=1:ncpus=1")
    for job_id in (plain, in_queue):
        info = hooked.job(job_id)
        assert info["job_state"] == "H" and info["Hold_Types"] == "o"
        assert info["Resource_List"]["extsched"] == "True"
    state = backend().read_state()
    assert {job.id for job in state.held} >= {plain, in_queue}


def test_a_users_own_hold_is_kept_and_the_job_is_not_cpscheds(hooked: PbsCluster) -> None:
    mine = hooked.qsub("-h", "-l", "select=1:ncpus=1")
    assert set(hooked.job(mine)["Hold_Types"]) == {"u", "o"}
    state = backend().read_state()
    assert mine not in {job.id for job in state.held}
    hooked.run("qrls", "-h", "u", mine)  # the user lets it go: now it is cpsched's
    assert mine in {job.id for job in backend().read_state().held}


def test_starts_land_on_the_decided_hosts_while_pbs_schedules(hooked: PbsCluster) -> None:
    # PBS's own scheduler would fill cn01 first; cpsched decides cn04, cn03, cn02.
    jobs = [hooked.qsub("-l", "select=1:ncpus=2", "-l", "walltime=00:05:00") for _ in range(3)]
    decided = dict(zip(jobs, ["cn04", "cn03", "cn02"], strict=True))
    bridge = backend()
    bridge.read_state()
    for job_id, vnode in decided.items():
        bridge.start(job_id, {vnode: 1})
    for job_id, vnode in decided.items():
        info = hooked.wait_state(job_id, {"R"})
        assert info["job_state"] == "R", info.get("comment")
        assert hooked.exec_hosts(job_id) == [vnode]


def test_a_multi_chunk_select_runs_one_chunk_per_decided_unit(hooked: PbsCluster) -> None:
    job_id = hooked.qsub("-l", "select=3:ncpus=2:mem=1gb", "-l", "walltime=00:05:00")
    bridge = backend()
    state = bridge.read_state()
    job = state.job(job_id)
    assert job is not None and job.shape.units == 3
    bridge.start(job_id, {"cn02": 2, "cn04": 1})
    info = hooked.wait_state(job_id, {"R"})
    assert info["job_state"] == "R", info.get("comment")
    assert hooked.exec_hosts(job_id) == ["cn02", "cn02", "cn04"]


def test_a_packed_job_runs_its_chunks_on_its_one_host(hooked: PbsCluster) -> None:
    job_id = hooked.qsub("-l", "select=2:ncpus=1", "-l", "place=pack")
    bridge = backend()
    bridge.read_state()
    bridge.start(job_id, {"cn03": 1})
    info = hooked.wait_state(job_id, {"R"})
    assert info["job_state"] == "R", info.get("comment")
    assert hooked.exec_hosts(job_id) == ["cn03", "cn03"]


def test_a_chunk_larger_than_any_vnode_runs_over_its_hosts_vnodes(hooked: PbsCluster) -> None:
    # 6 cpus and 2 GPUs: more than gn01[0] or gn01[1] has, as much as their host gn01.
    job_id = hooked.qsub("-q", "gpuq", "-l", "select=1:ncpus=6:ngpus=2")
    bridge = backend()
    job = bridge.read_state().job(job_id)
    assert job is not None and job.held_for_us
    bridge.start(job_id, {"gn01": 1})
    info = hooked.wait_state(job_id, {"R"})
    assert info["job_state"] == "R", info.get("comment")
    assert hooked.exec_vnodes(job_id) == [["gn01[0]", "gn01[1]"]]  # one chunk, two vnodes
    assert bridge.read_state().nodes["gn01"].used == {"cpu": 6, "mem": 0, "gpu": 2}


def test_a_server_without_job_history_is_refused_at_the_first_read(pbs: PbsCluster) -> None:
    pbs.run("qmgr", "-c", "set server job_history_enable=False")
    try:
        with pytest.raises(BridgeConfigError, match="job_history_enable=True"):
            backend().read_state()
    finally:
        pbs.run("qmgr", "-c", "set server job_history_enable=True")
