"""Active mode on the real Slurm 22.05 test bed: exact placement, starting jobs, every
service failure's fallback, refused finished jobs, users' messages and event-driven cycles.

Each test cancels what is left and leaves the test bed empty. The per-node split a job
really got is read with ``scontrol -d show job`` (its CPU_IDs per node), independently
of the bridge's own parsing.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpsched.cli.local_service import LocalService
from cpsched.slurm_bridge import hostlist
from cpsched.slurm_bridge.backend import ExactSplit
from cpsched.slurm_bridge.errors import SplitPinRefused
from cpsched.slurm_bridge.loop import Bridge
from cpsched.slurm_bridge.runner import SubprocessRunner
from cpsched.slurm_bridge.slurm_backend import SlurmBackend
from cpsched.slurm_bridge.slurm_pins import SplitPins
from tests.slurm_bridge.conftest import Testbed
from tests.slurm_bridge.test_slurm_e2e import make_bridge

pytestmark = pytest.mark.slurm


@pytest.fixture(autouse=True)
def empty_testbed(slurm_testbed: Testbed, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SLURM_CONF", slurm_testbed.env["SLURM_CONF"])
    slurm_testbed.cancel_all()
    yield
    slurm_testbed.run("scontrol", "update", "PartitionName=batch", "State=UP", check=False)
    slurm_testbed.cancel_all()


def bridge_for(service: LocalService, bed: Testbed, state_dir: Path, **overrides: object) -> Bridge:
    bridge, _ = make_bridge(service, state_dir, **{"wake_file": bed.wake, **overrides})
    return bridge


def real_split(bed: Testbed, job_id: str) -> dict[str, int]:
    """CPUs Slurm allocated the job on each node (one task per CPU in these tests)."""
    out = bed.run("scontrol", "-d", "show", "job", job_id)
    split: dict[str, int] = {}
    for nodes, ids in re.findall(r"^\s+Nodes=(\S+) CPU_IDs=(\S+)", out, re.MULTILINE):
        count = 0
        for part in ids.split(","):
            low, _, high = part.partition("-")
            count += int(high or low) - int(low) + 1
        for name in hostlist.expand(nodes):
            split[name] = count
    return split


def wait_running(bed: Testbed, *job_ids: str, timeout_s: float = 20) -> None:
    for job_id in job_ids:
        assert bed.wait_state(job_id, {"RUNNING"}, timeout_s)["state"] == "RUNNING", job_id


def test_a_multi_node_task_job_lands_on_exactly_its_decided_split(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    # A job Slurm runs itself (unmanaged partition) takes 3 CPUs of gpu1: the nodes are
    # unevenly free, so any split but Slurm's own would show.
    other = bed.sbatch("-p", "shadowq", "-n", "3", "-w", "gpu1", script="sleep 60")
    wait_running(bed, other)
    job = bed.sbatch("-J", "spread", "-n", "14", script="sleep 30")
    bed.wait_visible([job])
    # Pinned by a core reservation (the default split_pin), the job gets the decided
    # split whatever it is, and the other job's end cannot change it: no waiting. On
    # 24.11 (no per-node core counts) it starts on Slurm's own split, which the bridge
    # knows before the release (no waiting asked for here: the other job runs on).
    bridge = bridge_for(
        cpsched_service, bed, tmp_path, **({} if bed.pins_splits else {"split_drift_wait_s": 0})
    )
    report = bridge.cycle()
    assert report.applied is not None and job in report.applied.started, report.applied
    decided = report.applied.started[job]
    assert len(decided) > 1  # 14 tasks fit no single node
    wait_running(bed, job)
    assert real_split(bed, job) == decided
    again = bridge.cycle()
    assert again.misplaced == {} and again.rehold == []
    # its pin reservation is gone once it runs
    assert again.unpinned == ([job] if bed.pins_splits else [])
    assert "cpsched-pin" not in bed.run("scontrol", "-o", "show", "reservation")
    assert bed.job(job)["state"] == "RUNNING"


def test_in_its_pin_a_task_job_runs_on_a_split_slurm_would_not_make(
    slurm_testbed: Testbed,
) -> None:
    bed = slurm_testbed
    job = bed.sbatch("-J", "pinned", "-n", "5", script="sleep 60")
    bed.wait_visible([job])
    backend = SlurmBackend(
        runner=SubprocessRunner(timeout_s=30), partitions=["batch"], splits_tasks=False
    )
    view = backend.read_state().job(job)
    assert view is not None and view.held_for_us
    # node1 and node2 are idle: Slurm alone fills node1 first (4 + 1). Pinned: 2 + 3.
    split = {"node1": 2, "node2": 3}
    pin = ExactSplit(user=view.user, cores=split, partition="batch", limit_s=view.time_limit_s)
    if not bed.pins_splits:
        # 24.11 refuses a pin's per-node core counts, in words the bridge knows; knowing
        # the version, it makes no pin and the job runs on Slurm's own split
        with pytest.raises(SplitPinRefused):
            SplitPins(SubprocessRunner(timeout_s=30), "scontrol").pin(job, pin)
        assert backend.splits_tasks and not backend.pins_splits
        backend.start(job, split, exact=pin)
        wait_running(bed, job)
        assert real_split(bed, job) == {"node1": 4, "node2": 1}
        assert "cpsched-pin" not in bed.run("scontrol", "-o", "show", "reservation")
        return
    backend.start(job, split, exact=pin)
    wait_running(bed, job)
    assert real_split(bed, job) == split
    assert backend.settle(backend.read_state()) == [job]
    assert "cpsched-pin" not in bed.run("scontrol", "-o", "show", "reservation")
    time.sleep(2)
    assert bed.job(job)["state"] == "RUNNING"  # taken off its pin, it runs on


def test_a_task_job_waits_while_a_jobs_end_could_change_its_split(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    other = bed.sbatch("-p", "shadowq", "-n", "3", "-w", "gpu1", script="sleep 120")
    wait_running(bed, other)
    job = bed.sbatch("-J", "spread", "-n", "14", script="sleep 30")
    bed.wait_visible([job])
    bridge = bridge_for(
        cpsched_service, bed, tmp_path, split_pin="node_list", split_drift_wait_s=300
    )
    report = bridge.cycle()
    assert report.applied is not None and job in report.applied.drifting(), report.applied
    assert bed.job(job)["state"] == "PENDING"  # still held: nothing was released
    # The other job ends: no end can change the split now, and the job starts as decided.
    bed.run("scancel", other)
    bed.wait_state(other, {"CANCELLED", "COMPLETED"}, timeout_s=20)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        report = bridge.cycle()
        if report.applied is not None and job in report.applied.started:
            break
        time.sleep(1)
    assert report.applied is not None and job in report.applied.started, report.applied
    wait_running(bed, job)
    assert real_split(bed, job) == report.applied.started[job]


def test_a_two_node_job_gets_an_even_split(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    job = bed.sbatch("-J", "two nodes", "-N", "2", "-n", "10", script="sleep 20")
    bed.wait_visible([job])
    report = bridge_for(cpsched_service, bed, tmp_path).cycle()
    assert report.applied is not None and job in report.applied.started, report.applied
    wait_running(bed, job)
    split = real_split(bed, job)
    assert sorted(split) == sorted(report.applied.started[job])
    assert sorted(split.values()) == [5, 5]  # not 7 + 3: Slurm would fill the first node


def test_two_jobs_decided_in_one_cycle_both_start(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    jobs = [
        bed.sbatch("-J", "three", "-n", "3", script="sleep 30"),
        bed.sbatch("-J", "two", "-n", "2", script="sleep 30"),
        bed.sbatch("-J", "gpu", "-n", "1", "--gres=gpu:1", script="sleep 30"),
    ]
    bed.wait_visible(jobs)
    bridge = bridge_for(cpsched_service, bed, tmp_path)
    report = bridge.cycle()
    assert report.applied is not None
    assert set(report.applied.started) == set(jobs), report.applied
    wait_running(bed, *jobs)
    for job in jobs:
        assert real_split(bed, job) == report.applied.started[job]
    assert bridge.cycle().misplaced == {}


def test_a_released_job_still_pending_is_not_given_away(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    # With the partition down, a released job stays pending: its nodes are promised.
    bed.run("scontrol", "update", "PartitionName=batch", "State=DOWN")
    wide = [bed.sbatch("-J", f"wide{i}", "-n", "8", script="sleep 20") for i in range(2)]
    bed.wait_visible(wide)
    bridge = bridge_for(cpsched_service, bed, tmp_path, pin_grace_s=120)
    first = bridge.cycle()
    assert first.applied is not None and set(first.applied.started) == set(wide)
    late = bed.sbatch("-J", "late", "-n", "8", script="sleep 20")
    bed.wait_visible([late])
    time.sleep(1.5)
    assert {bed.job(j)["state"] for j in wide} == {"PENDING"}
    second = bridge.cycle()
    assert second.decision is not None
    promised = {n for j in wide for n in first.applied.started[j]}
    for start in second.decision.starts:  # nothing goes where the pending two will run
        assert not promised & set(start.allocation), (start, promised)
    bed.run("scontrol", "update", "PartitionName=batch", "State=UP")
    wait_running(bed, *wide)
    for job in wide:
        assert real_split(bed, job) == first.applied.started[job]
    third = bridge.cycle()
    assert third.misplaced == {} and third.rehold == []


def test_a_401_from_the_service_triggers_the_fallback(
    slurm_testbed: Testbed,
    cpsched_service: LocalService,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bed = slurm_testbed
    job = bed.sbatch("-J", "rotated token", "-n", "1", script="sleep 5")
    bed.wait_visible([job])
    bridge = bridge_for(cpsched_service, bed, tmp_path, token="an-old-token", fallback="release")
    with caplog.at_level("WARNING"):
        report = bridge.cycle()
    assert report.fallback == "release:1"
    assert "401" in (report.service_error or "")
    assert any("token" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    wait_running(bed, job)  # Slurm's own scheduler runs it


def test_a_refused_finished_job_does_not_block_the_others(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    good = bed.sbatch("-J", "fine", "-n", "1", script="sleep 1")
    bad = bed.sbatch("-J", "bad\x01name", "-n", "1", script="sleep 1")
    bed.wait_visible([good, bad])
    bridge = bridge_for(cpsched_service, bed, tmp_path)
    first = bridge.cycle()
    assert first.applied is not None and set(first.applied.started) == {good, bad}
    for job in (good, bad):
        bed.wait_state(job, {"COMPLETED"})
    time.sleep(1)
    report = bridge.cycle()
    assert set(report.finished_refused) == {bad}, report.finished_refused
    assert "control character" in report.finished_refused[bad]
    assert report.finished_posted >= 1
    with sqlite3.connect(cpsched_service.config.parent / "cpsched.db") as db:
        stored = {row[0] for row in db.execute("SELECT job_id FROM finished_jobs")}
    assert good in stored and bad not in stored
    assert bridge.cycle().finished_refused == {}  # reported once, never re-sent


def let_users_reach(bed: Testbed) -> None:
    """Let an unprivileged user read slurm.conf and reach munge's socket: pytest's temp
    directories are private (0700); traversal (o+x) is all that is added."""
    conf = Path(bed.env["SLURM_CONF"])
    conf.chmod(0o644)
    for directory in [conf.parent, *conf.parents]:
        if directory == Path("/tmp") or directory == directory.parent:
            break
        directory.chmod(directory.stat().st_mode | 0o001)


def test_a_users_release_of_a_held_job_says_why_it_is_refused(slurm_testbed: Testbed) -> None:
    bed = slurm_testbed
    let_users_reach(bed)
    as_user = ["runuser", "-u", "nobody", "--", "env", f"SLURM_CONF={bed.env['SLURM_CONF']}"]
    submitted = bed.run(
        *as_user, "sbatch", "--parsable", "-D", "/tmp", "-o", "/dev/null", "--wrap", "sleep 5"
    )
    job = submitted.strip().split(";")[0]
    bed.wait_visible([job])
    done = bed.run(*as_user, "scontrol", "release", job, check=False)
    refused = bed.run(*as_user, "bash", "-c", f"scontrol release {job} 2>&1; true")
    assert done == "" and "pending scheduler release" in refused, refused
    assert bed.job(job)["priority"] == "0"


def test_a_job_end_and_a_submission_start_a_cycle_at_once(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    # The periodic cycle is 60 s: what starts cycles here are the wake file's touches
    # (job_submit.lua on a submission, EpilogSlurmctld on a job's end).
    bridge = bridge_for(cpsched_service, bed, tmp_path, poll_interval_s=60)
    stop = threading.Event()
    runner = threading.Thread(target=bridge.run, kwargs={"stop": stop.is_set}, daemon=True)
    runner.start()
    try:
        time.sleep(1.5)  # the first cycle ran on an empty queue
        whole = bed.sbatch("-J", "blocker", "-n", "24", script="sleep 4")
        submitted = time.monotonic()
        assert bed.wait_state(whole, {"RUNNING"}, 10)["state"] == "RUNNING"
        to_start = time.monotonic() - submitted
        nxt = bed.sbatch("-J", "next", "-n", "24", script="sleep 1")
        assert bed.wait_state(whole, {"COMPLETED"}, 15)["state"] == "COMPLETED"
        ended = time.monotonic()
        assert bed.wait_state(nxt, {"RUNNING", "COMPLETED"}, 10)["state"] != "PENDING"
        end_to_start = time.monotonic() - ended
    finally:
        stop.set()
        runner.join(timeout=70)
    assert to_start < 5, to_start
    assert end_to_start < 5, end_to_start
