"""PBS adapter: recorded outputs of the OpenPBS 23.06 test bed, and command lines.

The fixtures (``fixtures/pbs/``) were recorded by ``pbs_testbed/record.sh`` from the real
test bed with the kit's hook installed: jobs 0-1 ended (exit 0 and 3), 2, 4 and 5 running
(4 on two hosts, 5 in gpuq on the GPU host gn01, one chunk over both its vnodes gn01[0]
and gn01[1]), 3 deleted before it started, 6-9 held by the hook (plain, three chunks,
scatter:excl, pack), 10 also held by its user, 11 waiting on 4 (afterok), 12 on 0 (met),
array 13 with subjobs 1-3, 14 in the stopped queue maint, 15 in a route queue that keeps
held jobs, 16 and 17 held in gpuq (place=scatter and vscatter), reservation R18 on cn01
in two hours and 19 in its queue (left to PBS by the hook); cn04 offline; the mom's
natural vnode has 0 cpus. Each cnNN is a host of one vnode. ``qstat_requeued.json`` was
recorded by ``test_pbs_trials.py``: a job (``-r y``) just put back by its trial (``qrerun``).
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest

from cpsched.slurm_bridge.eligibility import held_back
from cpsched.slurm_bridge.errors import BridgeConfigError
from cpsched.slurm_bridge.model import ReservationView
from cpsched.slurm_bridge.pbs import (
    PbsBackend,
    array_of,
    exec_spec,
    hold_back_by_queue,
    parse_jobs,
    parse_nodes,
    parse_queues,
    parse_vnodes,
    qalter_walltime_argv,
    select_chunks,
    size_mib,
    unrouted_held_queues,
    walltime_s,
)
from cpsched.slurm_bridge.pbs_hosts import ChunkPlacementError, HostLayout
from cpsched.slurm_bridge.pbs_reservations import parse_rstat
from cpsched.slurm_bridge.pbs_units import pbs_time
from cpsched.slurm_bridge.snapshot import dispatch_request

FIX = Path(__file__).parent / "fixtures" / "pbs"
KIT = Path(__file__).resolve().parents[2] / "slurm_bridge" / "kit"
SERVER = "pbshead"


def jid(number: int | str) -> str:
    return f"{number}.{SERVER}"


def fixture(name: str) -> dict:
    return dict(json.loads((FIX / name).read_text()))


class RecordingRunner:
    """Answers the read commands from the fixtures; records every argv."""

    def __init__(self, server: str = "qstat_Bf.json", queues: dict | None = None) -> None:
        self.argvs: list[list[str]] = []
        self.server = server
        self.queues = queues

    def run(self, argv: list[str], *, env: dict | None = None) -> str:
        self.argvs.append(list(argv))
        if argv[0] == "pbsnodes":
            return (FIX / "pbsnodes_av.json").read_text()
        if argv[0] == "qstat" and "-B" in argv:
            return (FIX / self.server).read_text()
        if argv[0] == "qstat" and "-Q" in argv:
            return json.dumps(self.queues if self.queues is not None else routed())
        if argv[0] == "qstat":
            return (FIX / "qstat_txf.json").read_text()
        if argv[0] == "pbs_rstat":
            return (FIX / "pbs_rstat_f.txt").read_text()
        return ""


def routed() -> dict:
    """The recorded queues, with the route queue set as the PBS section of docs/bridge.md
    asks (route_held_jobs = True)."""
    doc = fixture("qstat_Qf.json")
    doc["Queue"]["route"]["route_held_jobs"] = "True"
    return doc


def jobs_by_id(queues: list[str] | None = None) -> dict:
    doc = fixture("qstat_txf.json")
    hosts = layout()
    return {
        j.id: j
        for j in parse_jobs(doc, tag="extsched", queues=queues or [], unlimited_s=60, layout=hosts)
    }


def test_which_jobs_may_be_tried_and_a_job_put_back_by_its_trial() -> None:
    jobs = jobs_by_id()
    # Rerunable (qsub's -r y, PBS's default); a running job's current run is not a restart
    assert jobs[jid(6)].requeue and jobs[jid(6)].restarts == 0
    assert jobs[jid(4)].state == "running" and jobs[jid(4)].restarts == 0
    [back] = parse_jobs(fixture("qstat_requeued.json"), tag="extsched", queues=[], unlimited_s=60)
    assert (back.state, back.requeue, back.restarts, back.held_for_us) == ("pending", True, 1, True)


def test_a_trial_is_ended_by_qrerun_alone() -> None:
    runner = RecordingRunner()
    PbsBackend(runner=runner).requeue_hold(jid(4))  # type: ignore[arg-type]
    assert runner.argvs == [["qrerun", jid(4)]]


def test_sizes_and_walltimes() -> None:
    assert size_mib("65536000kb") == 64000 and size_mib("8gb") == 8192
    assert size_mib("1048576") == 1 and size_mib(2**20) == 1
    assert walltime_s("01:30:00") == 5400 and walltime_s("90:00") == 5400


def layout() -> HostLayout:
    return HostLayout.of(parse_vnodes(fixture("pbsnodes_av.json"), []))


def test_nodes_are_hosts() -> None:
    nodes = parse_nodes(fixture("pbsnodes_av.json"), [])
    # One node per host (PBS places chunks per host), not the natural 0-cpu vnode.
    assert sorted(nodes) == ["cn01", "cn02", "cn03", "cn04", "gn01"]
    assert nodes["gn01"].capacity == {"cpu": 8, "mem": 16384, "gpu": 2}  # its two vnodes
    assert nodes["gn01"].used == {"cpu": 6, "mem": 0, "gpu": 1}
    assert nodes["cn02"].used["cpu"] == 3 and nodes["cn03"].used["cpu"] == 0
    assert nodes["cn04"].state == "drain" and nodes["cn01"].state == "up"
    assert nodes["gn01"].partitions == ("gpuq",)


def test_jobs() -> None:
    jobs = jobs_by_id()
    train = jobs[jid(4)]
    assert train.state == "running" and train.name == "train_resnet" and train.user == "pbstest"
    assert train.allocation == {"cn01": 1, "cn02": 1}
    assert train.shape.units == 2 and train.shape.per_unit == {"cpu": 2, "mem": 1024}
    assert jobs[jid(5)].allocation == {"gn01": 1} and jobs[jid(5)].partition == "gpuq"
    assert jobs[jid(0)].state == "completed" and jobs[jid(1)].state == "failed"
    ended = jobs[jid(0)]
    assert ended.start is not None and ended.end is not None and ended.end >= ended.start
    assert jobs[jid(3)].state == "cancelled"  # deleted before it started: no exit status
    # The hook's operator hold alone makes a job cpsched's; a subjob shows Q under it.
    ours = {job.id for job in jobs.values() if job.held_for_us}
    assert ours == {jid(n) for n in (6, 7, 8, 9, 12, 14, 15, 16, 17)} | {
        f"13[{i}].{SERVER}" for i in (1, 2, 3)
    }
    assert not jobs[jid(10)].held_for_us  # its user's hold too
    assert not jobs[jid(11)].held_for_us  # PBS's system hold: its dependency is unmet
    assert jid("13[]") not in jobs  # the array itself: its subjobs are started one by one
    inq = jobs[jid(7)]
    assert inq.shape.units == 3 and inq.shape.per_unit == {"cpu": 2, "mem": 2048}
    only_gpu = parse_jobs(
        fixture("qstat_txf.json"), tag="extsched", queues=["gpuq"], unlimited_s=60
    )
    assert {j.id for j in only_gpu} == {jid(5), jid(16), jid(17)}
    # A reservation's job is PBS's: not held by the hook, never cpsched's to start.
    in_resv = jobs[jid(19)]
    assert in_resv.rules.reservation == "R18" and not in_resv.held_for_us


def test_chunks_are_laid_on_the_decided_hosts_vnodes() -> None:
    chunks = [{"cpu": 4, "mem": 4096}, {"cpu": 2}]
    assert exec_spec("j", {"cn03": 1, "cn01": 1}, chunks, layout(), one_node=False) == (
        "(cn03:ncpus=4:mem=4096mb)+(cn01:ncpus=2)"
    )
    with pytest.raises(ChunkPlacementError, match="cn04 have 0 of 4 cpu free"):  # offline
        exec_spec("j", {"cn04": 1}, chunks[:1], layout(), one_node=True)
    # A packed job: every chunk of its select on its one host, never one merged chunk.
    assert exec_spec("j", {"cn03": 1}, [{"cpu": 1}, {"cpu": 1}], layout(), one_node=True) == (
        "(cn03:ncpus=1)+(cn03:ncpus=1)"
    )
    # Chunks of different kinds keep the select's order, one per decided unit.
    mixed = select_chunks({"select": "1:ncpus=4+2:ncpus=1"})
    assert mixed == [{"cpu": 4}, {"cpu": 1}, {"cpu": 1}]
    assert exec_spec("j", {"cn03": 1, "cn01": 1, "cn02": 1}, mixed, layout(), one_node=False) == (
        "(cn03:ncpus=4)+(cn01:ncpus=1)+(cn02:ncpus=1)"
    )


def test_a_chunk_larger_than_a_vnode_is_split_over_its_hosts_vnodes() -> None:
    hosts = layout()
    # gn01[0] is full (job 5); gn01[1] has 2 cpus, 8 GiB and its GPU free.
    assert exec_spec("j", {"gn01": 1}, [{"cpu": 2, "gpu": 1}], hosts, one_node=True) == (
        "(gn01[1]:ncpus=2:ngpus=1)"
    )
    # Taken by the start before: nothing is left for a second such chunk.
    with pytest.raises(ChunkPlacementError, match="0 of 1 cpu free"):
        exec_spec("k", {"gn01": 1}, [{"cpu": 1, "gpu": 1}], hosts, one_node=True)
    idle = HostLayout.of(replace(v, used={}) for v in parse_vnodes(fixture("pbsnodes_av.json"), []))
    # 6 cpus and 2 GPUs: more than any vnode, laid as PBS itself lays it (one chunk, two
    # vnodes of one host); place=vscatter never splits a chunk.
    assert exec_spec("j", {"gn01": 1}, [{"cpu": 6, "gpu": 2}], idle, one_node=True) == (
        "(gn01[0]:ncpus=4:ngpus=1+gn01[1]:ncpus=2:ngpus=1)"
    )
    with pytest.raises(ChunkPlacementError, match="for a chunk of its own"):
        exec_spec("v", {"gn01": 1}, [{"cpu": 3}], idle, one_node=True, whole_chunks=True)


def test_command_lines() -> None:
    assert qalter_walltime_argv("4.pbshead", 4 * 3600 + 600) == [
        "qalter",
        "-l",
        "walltime=04:10:00",
        "4.pbshead",
    ]
    assert array_of("13[2].pbshead") == "13[].pbshead" and array_of("4.pbshead") == "4.pbshead"


def test_a_start_is_qrun_alone_on_the_held_job_with_its_select_chunks() -> None:
    runner = RecordingRunner()
    backend = PbsBackend(runner=runner)
    backend.read_state()
    reads = len(runner.argvs)
    backend.start(jid(7), {"cn03": 2, "cn01": 1})  # select=3:ncpus=2:mem=2gb
    # select=2:ncpus=1, place=pack: the start before took cn03's cpus, and it is refused
    # before any command runs.
    with pytest.raises(ChunkPlacementError, match="cn03 have 0 of 1 cpu"):
        backend.start(jid(9), {"cn03": 1})
    backend.extend(jid(4), 5 * 3600)
    # No qrls: a release would wake PBS's scheduler, which would start the job first.
    assert runner.argvs[reads:] == [
        [
            "qrun",
            "-H",
            "(cn03:ncpus=2:mem=2048mb)+(cn03:ncpus=2:mem=2048mb)+(cn01:ncpus=2:mem=2048mb)",
            jid(7),
        ],
        ["qalter", "-l", "walltime=05:00:00", jid(4)],
    ]


def test_the_fallback_releases_the_hooks_hold_and_an_array_once() -> None:
    runner = RecordingRunner()
    backend = PbsBackend(runner=runner)
    backend.read_state()
    reads = len(runner.argvs)
    for job_id in (jid(6), f"13[1].{SERVER}", f"13[2].{SERVER}"):
        backend.release_to_native(job_id)
    assert runner.argvs[reads:] == [["qrls", "-h", "o", jid(6)], ["qrls", "-h", "o", jid("13[]")]]


def test_a_server_the_bridge_cannot_work_with_is_refused_at_the_first_read() -> None:
    with pytest.raises(BridgeConfigError, match="set server job_history_enable=True"):
        PbsBackend(runner=RecordingRunner(server="qstat_Bf.no_history.json")).read_state()
    as_recorded = fixture("qstat_Qf.json")  # route keeps held jobs (PBS's default)
    assert unrouted_held_queues(as_recorded) == ["route"]
    with pytest.raises(BridgeConfigError, match="set queue route route_held_jobs=True"):
        PbsBackend(runner=RecordingRunner(queues=as_recorded)).read_state()


def test_queues_confine_jobs_to_their_vnodes() -> None:
    state = PbsBackend(RecordingRunner()).read_state()  # type: ignore[arg-type]
    assert state.partitions["gpuq"].nodes == ("gn01",)  # the vnode naming gpuq
    assert set(state.partitions["workq"].nodes) == {"cn01", "cn02", "cn03", "cn04"}


def test_queue_limits_are_the_partitions_limits_and_a_stopped_queue_runs_nothing() -> None:
    limits = parse_queues(fixture("qstat_Qf.json"))
    # The route queue runs nothing itself; R18 is the reservation's queue.
    assert set(limits) == {"workq", "gpuq", "maint", "R18"}
    assert (limits["maint"].max_nodes, limits["maint"].started) == (1, False)
    state = PbsBackend(RecordingRunner()).read_state()  # type: ignore[arg-type]
    assert state.partitions["workq"].max_time_s == 24 * 3600
    assert state.partitions["gpuq"].max_time_s == 1800
    request, _ = dispatch_request(state, shadow=False, extensions={})
    gpuq = next(p for p in request.partitions or [] if p.name == "gpuq")
    assert gpuq.max_time == 1800
    stopped = state.job(jid(14))
    assert stopped is not None and stopped.rules.blocked == "queue maint is stopped"
    assert held_back(stopped, 0) == "queue maint is stopped"
    routing = state.job(jid(15))
    assert routing is not None and routing.rules.blocked.startswith("queue route is not an")
    plain = state.job(jid(6))
    assert plain is not None
    moved = hold_back_by_queue([replace(plain, partition="maint")], limits)
    assert moved[0].rules.blocked == "queue maint is stopped"


def test_exclusive_placement_and_dependencies() -> None:
    jobs = jobs_by_id()
    scatter = jobs[jid(8)]
    # place=scatter:excl: one chunk per vnode, whole vnodes; pack: one vnode
    assert scatter.rules.exclusive and scatter.shape.one_unit_per_node
    assert jobs[jid(9)].shape.single_node and jobs[jid(9)].shape.per_unit == {"cpu": 2}
    # 11 waits for 4, still running; 12's afterok on 0 was met when it was submitted.
    assert jobs[jid(11)].rules.dependency == f"afterok:{jid(4)}"
    assert held_back(jobs[jid(11)], 0) is not None
    assert jobs[jid(12)].rules.dependency == "" and held_back(jobs[jid(12)], 0) is None
    assert not jobs[jid(6)].rules.exclusive


class FakeJob:
    def __init__(self, queue: str, holds: str = "n") -> None:
        # Without -q, PBS gives the hook the string '' (seen on OpenPBS 23.06).
        self.queue: object = type("Queue", (), {"name": queue})() if queue else ""
        self.Hold_Types = holds
        self.Resource_List: dict[str, str] = {}


def run_hook(job: FakeJob, unmanaged: set[str] | None = None) -> bool:
    """Run the kit's queuejob hook with a stand-in for PBS's ``pbs`` module; True if it
    accepted the job."""
    accepted: list[bool] = []
    event = type("Event", (), {"job": job, "accept": lambda self: accepted.append(True)})()
    fake = types.ModuleType("pbs")
    fake.event = lambda: event  # type: ignore[attr-defined]
    fake.hold_types = str  # type: ignore[attr-defined]
    fake.logmsg = lambda *args: None  # type: ignore[attr-defined]
    fake.LOG_DEBUG = 0  # type: ignore[attr-defined]
    fake.LOG_ERROR = 1  # type: ignore[attr-defined]
    fake.server = lambda: type("Server", (), {"default_queue": "workq"})()  # type: ignore[attr-defined]
    source = (KIT / "pbs_queuejob_hold.py").read_text()
    if unmanaged:
        default = "UNMANAGED_QUEUES: set[str] = set()"
        source = source.replace(default, f"UNMANAGED_QUEUES = {unmanaged!r}")
    saved = sys.modules.get("pbs")
    sys.modules["pbs"] = fake
    try:
        exec(compile(source, "pbs_queuejob_hold.py", "exec"), {})
    finally:
        if saved is None:
            del sys.modules["pbs"]
        else:
            sys.modules["pbs"] = saved
    return accepted == [True]


def test_the_queuejob_hook_holds_and_tags_every_managed_job() -> None:
    job = FakeJob("workq")
    assert run_hook(job)
    assert job.Hold_Types == "o" and job.Resource_List == {"extsched": "True"}
    held_by_user = FakeJob("workq", holds="u")
    assert run_hook(held_by_user) and held_by_user.Hold_Types == "uo"  # the user's stays
    express = FakeJob("express")
    assert run_hook(express, unmanaged={"express"})
    assert express.Hold_Types == "n" and express.Resource_List == {}
    in_reservation = FakeJob("R18")  # PBS's scheduler runs a reservation's jobs
    assert run_hook(in_reservation) and in_reservation.Hold_Types == "n"


def test_the_hook_takes_a_job_without_a_queue_to_the_servers_default_queue() -> None:
    no_queue = FakeJob("")
    assert run_hook(no_queue) and no_queue.Hold_Types == "o"
    to_pbs = FakeJob("")
    assert run_hook(to_pbs, unmanaged={"workq"}) and to_pbs.Hold_Types == "n"


def test_the_hook_accepts_a_job_it_cannot_read_unchanged() -> None:
    broken = FakeJob("workq")
    broken.Resource_List = None  # type: ignore[assignment]
    assert run_hook(broken)
    assert broken.Hold_Types == "n"  # never held without the tag: it would wait for no one


def test_reservations_set_their_hosts_aside_for_their_window() -> None:
    text = (FIX / "pbs_rstat_f.txt").read_text()
    (raw,) = parse_rstat(text)
    assert raw["Resv ID"] == jid("R18") and raw["resv_nodes"] == "(cn01:ncpus=2)"
    state = PbsBackend(RecordingRunner()).read_state()  # type: ignore[arg-type]
    start, end = pbs_time(raw["reserve_start"]), pbs_time(raw["reserve_end"])
    assert start is not None and end == start + 3600
    assert state.reservations == (ReservationView("R18", ("cn01",), start, end),)
    assert "R18" not in state.partitions  # its queue is no partition of cpsched's
    # As of the recording (the bridge reads its own clock; the window has passed since).
    state = replace(state, time=start)
    request, _ = dispatch_request(state, shadow=True, extensions={})
    (wire,) = request.reservations
    assert (wire.name, wire.nodes, wire.start, wire.end) == ("R18", ["cn01"], start, end)
    in_resv = next(j for j in request.queued if j.id == jid(19))
    assert in_resv.reservation == "R18"


def test_placement_per_host_reaches_the_wire() -> None:
    state = PbsBackend(RecordingRunner()).read_state()  # type: ignore[arg-type]
    request, _ = dispatch_request(state, shadow=False, extensions={})
    queued = {j.id: j for j in request.queued}
    # place=scatter: a host each, so the GPU host alone can never run two chunks.
    scatter = queued[jid(16)]
    assert (scatter.min_nodes, scatter.max_nodes, scatter.tasks_per_node) == (2, 2, 1)
    assert scatter.partition == "gpuq"
    gpuq = next(p for p in request.partitions if p.name == "gpuq")
    assert gpuq.nodes == ["gn01"]
