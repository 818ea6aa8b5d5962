"""PBS adapter: recorded ``qstat -f -F json`` / ``pbsnodes -av -F json`` and command lines.

``qstat_Qf.json`` (``qstat -Q -f -F json``) was written by hand in the format of OpenPBS's
documentation and the other recorded outputs, not recorded from a PBS server."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import replace
from pathlib import Path

from cpsched.slurm_bridge.eligibility import held_back
from cpsched.slurm_bridge.pbs import (
    PbsBackend,
    exec_spec,
    hold_back_in_stopped_queues,
    parse_jobs,
    parse_nodes,
    parse_queues,
    qalter_walltime_argv,
    qrun_argv,
    size_mib,
    walltime_s,
)
from cpsched.slurm_bridge.snapshot import dispatch_request

FIX = Path(__file__).parent / "fixtures" / "pbs"
KIT = Path(__file__).resolve().parents[2] / "slurm_bridge" / "kit"


class RecordingRunner:
    """Answers the two read commands from the fixtures; records every argv."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def run(self, argv: list[str], *, env: dict | None = None) -> str:
        self.argvs.append(list(argv))
        if argv[0] == "pbsnodes":
            return (FIX / "pbsnodes_av.json").read_text()
        if argv[0] == "qstat" and "-Q" in argv:
            return (FIX / "qstat_Qf.json").read_text()
        if argv[0] == "qstat":
            return (FIX / "qstat_f.json").read_text()
        return ""


def test_sizes_and_walltimes() -> None:
    assert size_mib("65536000kb") == 64000 and size_mib("8gb") == 8192
    assert size_mib("1048576") == 1 and size_mib(2**20) == 1
    assert walltime_s("01:30:00") == 5400 and walltime_s("90:00") == 5400


def test_nodes() -> None:
    nodes = parse_nodes(json.loads((FIX / "pbsnodes_av.json").read_text()), [])
    assert nodes["gn01"].capacity == {"cpu": 32, "mem": 257000, "gpu": 4}
    assert nodes["gn01"].used == {"cpu": 8, "mem": 16384, "gpu": 1}
    assert nodes["cn01"].state == "up" and nodes["cn01"].used["cpu"] == 4
    assert nodes["gn02"].state == "drain" and nodes["cn03"].state == "down"


def test_jobs() -> None:
    doc = json.loads((FIX / "qstat_f.json").read_text())
    jobs = {j.id: j for j in parse_jobs(doc, tag="extsched", queues=[], unlimited_s=60)}
    assert jobs["1041.pbs-head"].allocation == {"cn01": 1}
    assert jobs["1041.pbs-head"].shape.per_unit == {"cpu": 4, "mem": 8192}
    train = jobs["1042.pbs-head"]
    assert train.name == 'train "resnet" é' and train.user == "bob" and train.state == "running"
    sweep = jobs["1043.pbs-head"]
    assert sweep.held_for_us and sweep.shape.one_unit_per_node and sweep.shape.units == 2
    assert sweep.shape.per_unit == {"cpu": 8, "mem": 16384} and sweep.time_limit_s == 3600
    assert not jobs["1044.pbs-head"].held_for_us  # queued, not on our system hold
    assert jobs["1045.pbs-head"].held_for_us
    done = jobs["1039.pbs-head"]
    assert done.state == "completed" and done.end is not None and done.start is not None
    assert done.end - done.start == 30 * 60 + 2
    only_gpu = parse_jobs(doc, tag="extsched", queues=["gpuq"], unlimited_s=60)
    assert {j.id for j in only_gpu} == {"1042.pbs-head", "1045.pbs-head"}


def test_command_lines() -> None:
    assert exec_spec({"cn01": 1, "cn02": 1}, {"cpu": 8, "mem": 16384}) == (
        "(cn01:ncpus=8:mem=16384mb)+(cn02:ncpus=8:mem=16384mb)"
    )
    assert qrun_argv("1045.pbs-head", {"gn01": 1}, {"cpu": 4, "gpu": 2}) == [
        "qrun",
        "-H",
        "(gn01:ncpus=4:ngpus=2)",
        "1045.pbs-head",
    ]
    assert qalter_walltime_argv("1042.pbs-head", 4 * 3600 + 600) == [
        "qalter",
        "-l",
        "walltime=04:10:00",
        "1042.pbs-head",
    ]


def test_backend_runs_release_then_qrun_with_exact_nodes() -> None:
    runner = RecordingRunner()
    backend = PbsBackend(runner=runner)
    state = backend.read_state()
    assert len(state.held) == 4  # 1046 among them, though its dependency is unmet
    backend.start("1043.pbs-head", {"cn02": 1, "cn01": 1})
    backend.extend("1042.pbs-head", 5 * 3600)
    assert runner.argvs[3:] == [  # after the three reads
        ["qrls", "-h", "s", "1043.pbs-head"],
        ["qrun", "-H", "(cn02:ncpus=8:mem=16384mb)+(cn01:ncpus=8:mem=16384mb)", "1043.pbs-head"],
        ["qalter", "-l", "walltime=05:00:00", "1042.pbs-head"],
    ]


def test_queues_confine_jobs_to_their_vnodes() -> None:
    state = PbsBackend(RecordingRunner()).read_state()  # type: ignore[arg-type]
    assert state.partitions["gpuq"].nodes == ("gn01", "gn02")  # the vnodes naming gpuq
    assert set(state.partitions["workq"].nodes) == {"cn01", "cn02", "cn03"}  # naming none


def test_queue_limits_are_the_partitions_limits_and_a_stopped_queue_runs_nothing() -> None:
    limits = parse_queues(json.loads((FIX / "qstat_Qf.json").read_text()))
    assert set(limits) == {"workq", "gpuq", "maint"}  # the route queue runs nothing itself
    state = PbsBackend(RecordingRunner()).read_state()  # type: ignore[arg-type]
    assert state.partitions["workq"].max_time_s == 24 * 3600
    assert (state.partitions["gpuq"].max_time_s, state.partitions["gpuq"].max_nodes) == (1800, 1)
    # 1045 asks gpuq for 45 minutes, over its 30: the service will never start it there
    request, _ = dispatch_request(state, shadow=False, extensions={})
    gpuq = next(p for p in request.partitions or [] if p.name == "gpuq")
    assert gpuq.max_time == 1800
    job = next(j for j in state.jobs if j.id == "1043.pbs-head")
    stopped = hold_back_in_stopped_queues([replace(job, partition="maint")], limits)
    assert stopped[0].rules.blocked == "queue maint is stopped"
    assert held_back(stopped[0], 0) == "queue maint is stopped"


def test_exclusive_placement_and_dependencies() -> None:
    doc = json.loads((FIX / "qstat_f.json").read_text())
    jobs = {j.id: j for j in parse_jobs(doc, tag="extsched", queues=[], unlimited_s=60)}
    post, report = jobs["1046.pbs-head"], jobs["1047.pbs-head"]
    # place=scatter:excl: one chunk per vnode, whole vnodes; free:excl: chunks may share
    assert post.rules.exclusive and post.shape.one_unit_per_node
    assert report.rules.exclusive and not report.shape.one_unit_per_node
    # post waits for 1041, still running; report's afterok:1039 is met (it exited 0)
    assert post.rules.dependency == "afterok:1041.pbs-head"
    assert held_back(post, 0) is not None
    assert report.rules.dependency == "" and held_back(report, 0) is None
    assert not jobs["1043.pbs-head"].rules.exclusive  # place=scatter alone


class FakeJob:
    def __init__(self, queue: str, holds: str = "n") -> None:
        self.queue = type("Queue", (), {"name": queue})()
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
    assert job.Hold_Types == "s" and job.Resource_List == {"extsched": "True"}
    held_by_user = FakeJob("workq", holds="u")
    assert run_hook(held_by_user) and held_by_user.Hold_Types == "us"  # the user's stays
    express = FakeJob("express")
    assert run_hook(express, unmanaged={"express"})
    assert express.Hold_Types == "n" and express.Resource_List == {}
