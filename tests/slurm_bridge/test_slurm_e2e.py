"""End to end against a real Slurm 22.05 test bed and a real ``cpsched serve`` process.

Order matters (one test bed, one service): the long job's extension is started first
and checked last, so its wait overlaps the other tests. Nothing here mocks Slurm: the
bridge runs the real squeue/sinfo/scontrol/sacct commands.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cpsched.cli.local_service import LocalService
from cpsched.slurm_bridge import hostlist, shadow
from cpsched.slurm_bridge.config import BridgeSettings
from cpsched.slurm_bridge.factory import make_backend
from cpsched.slurm_bridge.loop import Bridge
from cpsched.slurm_bridge.runner import SubprocessRunner
from cpsched.wire.client import ServiceClient
from tests.slurm_bridge.conftest import TOKEN, Testbed

# One worker runs these in file order: later tests use what earlier ones started (FACTS),
# and one Slurm test bed serves them all (./dev test runs pytest with --dist loadfile).
pytestmark = pytest.mark.slurm

SUMMARY: list[str] = []
FACTS: dict[str, object] = {}


def number(value: object) -> object:
    """A number of ``squeue --json``: bare (22.05) or ``{"set", "infinite", "number"}``."""
    return value["number"] if isinstance(value, dict) else value


def note(line: str) -> None:
    SUMMARY.append(line)


@pytest.fixture(scope="module", autouse=True)
def slurm_env(slurm_testbed: Testbed) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", slurm_testbed.env["SLURM_CONF"])
        yield
    out = Path(os.environ.get("CPSCHED_BRIDGE_E2E_SUMMARY", slurm_testbed.root / "e2e.txt"))
    out.write_text("\n".join(SUMMARY) + "\n")


def make_bridge(
    service: LocalService, state_dir: Path, **overrides: object
) -> tuple[Bridge, SubprocessRunner]:
    values: dict[str, object] = {
        "service_url": service.url,
        "token": TOKEN,
        "cluster": "testbed",
        "state_file": state_dir / "state.json",
        "metrics_file": state_dir / "metrics.prom",
        "partitions": ["batch"],
        "deadline_s": 5,
        **overrides,
    }
    settings = BridgeSettings(**values)
    runner = SubprocessRunner(timeout_s=30)
    client = ServiceClient(
        settings.service_url,
        settings.token,
        settings.cluster,
        timeout_s=settings.deadline_s,
        # The tests' bridges follow one another on one cluster, each with its own state
        # file: one bridge restarted, for the service's writer lease.
        writer="tests",
    )
    return Bridge(settings, make_backend(settings, runner), client), runner


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bridge")


def test_01_extension_is_applied_to_a_running_job(
    slurm_testbed: Testbed, cpsched_service: LocalService, state_dir: Path
) -> None:
    bed = slurm_testbed
    long_job = bed.sbatch("-J", "long job", "-c", "1", "-t", "1", script="sleep 150")
    bed.wait_visible([long_job])
    assert bed.job(long_job)["reason"] == "JobHeldUser"  # job_submit.lua held it
    bridge, _ = make_bridge(cpsched_service, state_dir)
    first = bridge.cycle()
    assert first.applied is not None and long_job in first.applied.started
    chosen = first.applied.started[long_job]
    info = bed.wait_state(long_job, {"RUNNING"})
    assert info["state"] == "RUNNING"
    assert sorted(hostlist.expand(info["nodes"])) == sorted(chosen)
    assert info["limit"] == "1:00"
    second = bridge.cycle()  # the service's correction (lead 60 s) extends it now
    assert second.applied is not None
    assert second.applied.extended.get(long_job) == 60 + 600
    assert bed.job(long_job)["limit"] == "11:00"
    FACTS["long_job"] = long_job
    FACTS["long_started"] = time.monotonic()
    note(
        f"extension: job {long_job} limit 60 s -> {second.applied.extended[long_job]} s "
        f"(squeue TimeLimit now {bed.job(long_job)['limit']}), on {chosen}"
    )


def test_02_held_cpu_and_gpu_jobs_run_on_the_nodes_cpsched_chose(
    slurm_testbed: Testbed, cpsched_service: LocalService, state_dir: Path
) -> None:
    bed = slurm_testbed
    jobs = {
        "cpu2": bed.sbatch("-J", 'weird "name" é|x', "-c", "2", script="sleep 6"),
        "cpu4": bed.sbatch("-J", "cpu4", "-c", "4", script="sleep 6"),
        "gpu1": bed.sbatch("-J", "gpu one", "-c", "2", "--gres=gpu:1", script="sleep 6"),
        "gpu2": bed.sbatch("-J", "gpu two", "-c", "1", "--gres=gpu:2", script="sleep 6"),
        "2nodes": bed.sbatch(
            "-J", "two nodes", "-N", "2", "-n", "2", "-c", "3", script="srun true; sleep 6"
        ),
    }
    bed.wait_visible(list(jobs.values()))
    for job_id in jobs.values():
        assert bed.job(job_id)["priority"] == "0", "job_submit.lua must hold every job"
    time.sleep(2)
    for job_id in jobs.values():  # Slurm did not start them on its own
        assert bed.job(job_id)["state"] == "PENDING"
    bridge, _ = make_bridge(cpsched_service, state_dir)
    report = bridge.cycle()
    assert report.decision is not None and report.applied is not None
    assert not report.applied.failed
    started = report.applied.started
    assert {jobs["cpu2"], jobs["gpu1"]} <= set(started), report.applied.refused
    note(
        f"dispatch: submitted {len(jobs)} held jobs, cpsched started {len(started)} "
        f"in one cycle (refused: {report.applied.refused or 'none'})"
    )
    for label, job_id in jobs.items():
        if job_id not in started:
            assert bed.job(job_id)["priority"] == "0"  # not chosen: still held
            note(f"  {label:7} job {job_id}: left held by cpsched this cycle")
            continue
        info = bed.wait_state(job_id, {"RUNNING", "COMPLETED"})
        actual = hostlist.expand(info["nodes"])
        assert info["state"] in {"RUNNING", "COMPLETED"}
        assert sorted(actual) == sorted(started[job_id]), (label, actual, started[job_id])
        note(f"  {label:7} job {job_id}: chosen {started[job_id]} actual {actual}")
    gpu_chosen = started[jobs["gpu1"]]
    assert all(n.startswith("gpu") for n in gpu_chosen)
    FACTS["dispatched"] = jobs


def test_03_finished_jobs_reach_the_service_once_with_real_run_times(
    slurm_testbed: Testbed, cpsched_service: LocalService, state_dir: Path
) -> None:
    bed = slurm_testbed
    jobs = FACTS["dispatched"]
    assert isinstance(jobs, dict)
    bridge, _ = make_bridge(cpsched_service, state_dir)
    # cycles until every job ran and ended (jobs left held in test 02 start here)
    ended = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}
    end = time.monotonic() + 90
    posted = 0
    while time.monotonic() < end:
        report = bridge.cycle()
        posted += report.finished_posted
        if report.applied and report.applied.started:
            note(f"  later cycle started {report.applied.started}")
        if all(bed.job(j)["state"] in ended for j in jobs.values()):
            break
        time.sleep(1)
    for job_id in jobs.values():
        assert bed.job(job_id)["state"] == "COMPLETED"
    posted += bridge.cycle().finished_posted
    slurm_times = json.loads(bed.run("squeue", "--json", "-t", "all"))["jobs"]
    by_id = {str(number(j["job_id"])): j for j in slurm_times}
    with httpx.Client(
        base_url=cpsched_service.url, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as http:
        for job_id in jobs.values():
            info = http.get(f"/v1/clusters/testbed/jobs/{job_id}").json()
            assert info["state"] == "finished", info
            assert info["start"] == number(by_id[job_id]["start_time"])
            assert info["end"] == number(by_id[job_id]["end_time"])
            assert info["end"] - info["start"] >= 6  # the jobs slept 6 s
    again = bridge.cycle()
    assert again.finished_posted == 0 and again.finished_duplicates == 0
    db = sqlite3.connect(cpsched_service.config.parent / "cpsched.db")
    rows = db.execute(
        "SELECT job_id, COUNT(*), MAX(end_time - start_time) FROM finished_jobs "
        f"WHERE job_id IN ({','.join('?' * len(jobs))}) GROUP BY job_id",
        list(jobs.values()),
    ).fetchall()
    db.close()
    assert len(rows) == len(jobs) and all(count == 1 for _, count, _ in rows)
    note(
        f"finished: {posted} jobs posted by the bridge; service DB has each of "
        f"{len(rows)} jobs once, run times {sorted(r[2] for r in rows)} s; "
        "next cycle posted 0"
    )


def test_04_fallback_hold_keeps_jobs_held_while_the_service_is_down(
    slurm_testbed: Testbed, cpsched_service: LocalService, state_dir: Path
) -> None:
    bed = slurm_testbed
    cpsched_service.stop()
    job = bed.sbatch("-J", "during outage", "-c", "1", script="sleep 5")
    bed.wait_visible([job])
    bridge, _ = make_bridge(cpsched_service, state_dir / "hold", fallback="hold")
    report = bridge.cycle()
    assert report.service_error is not None and report.fallback == "hold"
    time.sleep(3)
    info = bed.job(job)
    assert info["state"] == "PENDING" and info["priority"] == "0"
    metrics = (state_dir / "hold" / "metrics.prom").read_text()
    assert "cpsched_bridge_fallback_active 1" in metrics
    assert "cpsched_bridge_service_failures_total 1" in metrics
    FACTS["outage_job"] = job
    note(
        f"fallback=hold: service stopped, job {job} still {info['state']} priority 0 "
        "after the cycle; metrics fallback_active=1"
    )


def test_05_fallback_release_hands_jobs_to_slurm_and_is_undone(
    slurm_testbed: Testbed, cpsched_service: LocalService, state_dir: Path
) -> None:
    bed = slurm_testbed
    job = FACTS["outage_job"]
    assert isinstance(job, str)
    later = bed.sbatch("-J", "starts later", "-c", "1", "--begin=now+600", script="true")
    bed.wait_visible([later])
    bridge, runner = make_bridge(cpsched_service, state_dir / "release", fallback="release")
    report = bridge.cycle()
    assert report.service_error is not None and report.fallback == "release:2"
    info = bed.wait_state(job, {"RUNNING", "COMPLETED"})
    assert info["state"] in {"RUNNING", "COMPLETED"}  # Slurm's own scheduler started it
    pins = [argv for argv in runner.history if any(a.startswith("NodeList=") for a in argv)]
    assert not pins  # nothing was pinned: Slurm chose the node
    assert bed.job(later)["priority"] != "0"
    cpsched_service.start()
    back = bridge.cycle()
    assert back.service_error is None
    assert back.reclaimed == [later]
    assert bed.job(later)["priority"] == "0"  # held for cpsched again
    assert (
        "cpsched_bridge_fallback_active 0" in (state_dir / "release" / "metrics.prom").read_text()
    )
    bed.run("scancel", later)
    note(
        f"fallback=release: job {job} started by Slurm itself on {info['nodes']}; "
        f"job {later} (begin in 10 min) released, then held again when the service "
        "returned"
    )


def test_06_shadow_mode_starts_nothing_itself(
    slurm_testbed: Testbed, cpsched_service: LocalService, state_dir: Path
) -> None:
    bed = slurm_testbed
    jobs = [
        bed.sbatch("-p", "shadowq", "-J", f"sh{i}", "-c", "4", script="sleep 4") for i in range(8)
    ]
    bed.wait_visible(jobs)
    bridge, runner = make_bridge(
        cpsched_service, state_dir / "shadow", mode="shadow", partitions=["shadowq"]
    )
    decisions = 0
    end = time.monotonic() + 40
    while time.monotonic() < end:
        report = bridge.cycle()
        assert report.decision is not None and report.decision.dry_run
        decisions += 1
        if all(bed.job(j)["state"] in {"COMPLETED", "GONE"} for j in jobs):
            break
        time.sleep(1)
    acting = [
        argv
        for argv in runner.history
        if argv[0].endswith("scontrol") and argv[1] in {"update", "release", "hold"}
    ]
    assert acting == []
    for job_id in jobs:
        assert bed.job(job_id)["state"] == "COMPLETED"
    rows = shadow.compare(bridge.settings.shadow_log_path)
    summary = shadow.summary(rows, tolerance_s=0)
    assert summary["compared"] >= 1
    note(
        f"shadow: {len(jobs)} jobs run by Slurm itself over {decisions} dry-run cycles; "
        f"bridge ran no scontrol update/release/hold; report {summary}"
    )


def test_07_extended_job_outlives_its_original_limit(slurm_testbed: Testbed) -> None:
    bed = slurm_testbed
    job = FACTS["long_job"]
    started = FACTS["long_started"]
    assert isinstance(job, str) and isinstance(started, float)
    # Slurm enforces limits about every 30 s: 60 s limit + 30 s + margin
    while time.monotonic() - started < 100:
        time.sleep(2)
        assert bed.job(job)["state"] == "RUNNING"
    info = bed.job(job)
    assert info["state"] == "RUNNING" and info["limit"] == "11:00"
    note(f"extension: job {job} still RUNNING after {info['elapsed']} (original limit 1:00)")
    bed.run("scancel", job)


def test_08_json_text_and_slurmrestd_sources_read_the_same_state(
    slurm_testbed: Testbed, tmp_path: Path
) -> None:
    bed = slurm_testbed
    a = bed.sbatch("-J", "src a", "-c", "2", script="sleep 30")
    b = bed.sbatch("-J", "src b", "-n", "3", "--mem-per-cpu=100", script="sleep 30")
    # Slurm fills one node first (8 + 2 or 4 + 6), which an even share would misread
    c = bed.sbatch("-J", "src c", "-n", "10", script="sleep 30")
    bed.wait_visible([a, b, c])
    bed.run("scontrol", "update", f"JobId={a}", "NodeList=node2")
    bed.run("scontrol", "update", f"JobId={c}", "NodeList=node1,gpu1")
    bed.run("scontrol", "release", f"{a},{c}")
    assert bed.wait_state(a, {"RUNNING"})["state"] == "RUNNING"
    assert bed.wait_state(c, {"RUNNING"})["state"] == "RUNNING"
    views = {}
    for source in ("json", "text", "rest"):
        settings = BridgeSettings(
            cluster="testbed",
            state_file=tmp_path / "s.json",
            state_source=source,
            partitions=["batch"],
            slurmrestd_socket=bed.root / "run" / "rest.sock",
        )
        if source == "rest" and not settings.slurmrestd_socket.exists():
            pytest.skip("slurmrestd not running in this test bed")
        state = make_backend(settings).read_state()
        views[source] = (
            {n: (v.capacity, v.used, v.state) for n, v in state.nodes.items()},
            {
                j.id: (j.state, j.held_for_us, j.shape, j.allocation, j.time_limit_s, j.name)
                for j in state.jobs
                if j.id in {a, b, c}
            },
        )
    spread = views["json"][1][c][3]
    assert set(spread) == {"node1", "gpu1"} and sum(spread.values()) == 10
    assert spread["node1"] != spread["gpu1"]
    assert views["json"] == views["text"] == views["rest"]
    bed.run("scancel", a, b, c)
    note(
        f"state sources: json, text (-O) and slurmrestd agree on {len(views['json'][0])} "
        "nodes and 3 jobs (two running, one on two nodes unevenly, one held)"
    )
