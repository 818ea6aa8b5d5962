"""End to end against a real OpenPBS, PBS's scheduler on, and a real ``cpsched serve``.

The bridge (``backend = "pbs"``) runs the real qstat/pbsnodes/qrun/qalter; the kit's hook
holds every job. Order matters: one PBS, one service, tests in file order.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest

from cpsched.cli.local_service import LocalService
from cpsched.slurm_bridge.config import BridgeSettings
from cpsched.slurm_bridge.factory import make_backend
from cpsched.slurm_bridge.loop import Bridge
from cpsched.slurm_bridge.pbs import pbs_time
from cpsched.slurm_bridge.runner import SubprocessRunner
from cpsched.wire.client import ServiceClient
from tests.slurm_bridge.conftest import TOKEN
from tests.slurm_bridge.pbs_cluster import PbsCluster

pytestmark = [pytest.mark.pbs, pytest.mark.usefixtures("hooked_pbs")]

ENDED = {"F"}


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bridge")


def make_bridge(service: LocalService, state_dir: Path, **overrides: object) -> Bridge:
    settings = BridgeSettings(
        **{
            "backend": "pbs",
            "service_url": service.url,
            "token": TOKEN,
            "cluster": "pbs-testbed",
            "state_file": state_dir / "state.json",
            "metrics_file": state_dir / "metrics.prom",
            "partitions": ["workq", "gpuq"],
            "deadline_s": 5,
            **overrides,
        }
    )
    client = ServiceClient(
        settings.service_url,
        settings.token,
        settings.cluster,
        timeout_s=settings.deadline_s,
        # The tests' bridges follow one another on one cluster, each with its own state
        # file: one bridge restarted, for the service's writer lease.
        writer="tests",
    )
    return Bridge(settings, make_backend(settings, SubprocessRunner(timeout_s=30)), client)


def run_until_ended(
    pbs: PbsCluster, bridge: Bridge, jobs: list[str], timeout_s: float = 120
) -> dict[str, dict[str, int]]:
    """Cycle the bridge until every job of ``jobs`` ended; what it started, job → vnodes."""
    started: dict[str, dict[str, int]] = {}
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        report = bridge.cycle()
        assert report.service_error is None, report.service_error
        if report.applied is not None:
            assert not report.applied.failed, report.applied.failed
            started.update(report.applied.started)
        if all(pbs.job(j).get("job_state") in ENDED for j in jobs):
            break
        time.sleep(1)
    return started


def test_01_every_job_shape_runs_where_cpsched_decided(
    pbs: PbsCluster, cpsched_service: LocalService, state_dir: Path
) -> None:
    jobs = {
        "one cpu": pbs.qsub(
            "-l", "select=1:ncpus=1", "-l", "walltime=00:02:00", script="/bin/sleep 3"
        ),
        "three chunks": pbs.qsub(
            "-l", "select=3:ncpus=2:mem=1gb", "-l", "walltime=00:02:00", script="/bin/sleep 3"
        ),
        "packed": pbs.qsub(
            "-l",
            "select=2:ncpus=1",
            "-l",
            "place=pack",
            "-l",
            "walltime=00:02:00",
            script="/bin/sleep 3",
        ),
        "gpu": pbs.qsub(
            "-q",
            "gpuq",
            "-l",
            "select=1:ncpus=2:ngpus=1",
            "-l",
            "walltime=00:02:00",
            script="/bin/sleep 3",
        ),
        "exclusive": pbs.qsub(
            "-l",
            "select=1:ncpus=1",
            "-l",
            "place=excl",
            "-l",
            "walltime=00:02:00",
            script="/bin/sleep 3",
        ),
    }
    array = pbs.qsub(
        "-J", "1-3", "-l", "select=1:ncpus=1", "-l", "walltime=00:02:00", script="/bin/sleep 3"
    )
    subjobs = [array.replace("[]", f"[{i}]") for i in (1, 2, 3)]
    first = pbs.qsub("-l", "select=1:ncpus=1", "-l", "walltime=00:02:00", script="/bin/sleep 3")
    then = pbs.qsub(
        "-W",
        f"depend=afterok:{first}",
        "-l",
        "select=1:ncpus=1",
        "-l",
        "walltime=00:02:00",
        script="/bin/sleep 1",
    )
    users_own = pbs.qsub("-h", "-l", "select=1:ncpus=1", script="/bin/sleep 1")
    time.sleep(2)
    for job_id in [*jobs.values(), first, then]:  # PBS's scheduler started none of them
        assert pbs.job(job_id)["job_state"] == "H", job_id
    everything = [*jobs.values(), *subjobs, first, then]
    started = run_until_ended(pbs, make_bridge(cpsched_service, state_dir), everything)
    for job_id in everything:
        info = pbs.job(job_id)
        assert info.get("job_state") == "F", (job_id, info.get("comment"))
        assert int(info.get("Exit_status", -99)) == 0, (job_id, info.get("comment"))
        assert job_id in started, f"{job_id} ran but not by cpsched: {info.get('comment')}"
        decided = [node for node, units in started[job_id].items() for _ in range(units)]
        ran_on = pbs.exec_hosts(job_id)
        if job_id == jobs["packed"]:
            assert set(ran_on) == set(decided) and len(ran_on) == 2
        else:
            assert ran_on == decided, (job_id, ran_on, started[job_id])
    assert all(n == "gn01" for n in started[jobs["gpu"]])
    # The dependent job started only once its first had ended.
    assert pbs_time(pbs.job(then)["stime"]) >= pbs_time(pbs.job(first)["obittime"])
    # The user's own hold is respected: never started.
    assert pbs.job(users_own)["job_state"] == "H"
    assert users_own not in started


def test_02_finished_jobs_reach_the_service_with_pbs_times(
    pbs: PbsCluster, cpsched_service: LocalService, state_dir: Path
) -> None:
    job_id = pbs.qsub("-l", "select=1:ncpus=1", "-l", "walltime=00:02:00", script="/bin/sleep 4")
    bridge = make_bridge(cpsched_service, state_dir)
    run_until_ended(pbs, bridge, [job_id])
    posted = sum(bridge.cycle().finished_posted for _ in range(2))
    assert posted >= 0
    info = pbs.job(job_id)
    with httpx.Client(
        base_url=cpsched_service.url, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as http:
        seen = http.get(f"/v1/clusters/pbs-testbed/jobs/{job_id}").json()
    assert seen["state"] == "finished", seen
    assert seen["start"] == pbs_time(info["stime"])
    assert seen["end"] - seen["start"] >= 4


def test_03_with_the_service_down_pbs_runs_the_jobs_and_they_are_taken_back_after(
    pbs: PbsCluster, cpsched_service: LocalService, state_dir: Path
) -> None:
    cpsched_service.stop()
    try:
        bridge = make_bridge(cpsched_service, state_dir, fallback="release")
        job_id = pbs.qsub(
            "-l", "select=1:ncpus=1", "-l", "walltime=00:02:00", script="/bin/sleep 2"
        )
        report = bridge.cycle()
        assert report.fallback is not None and report.fallback.startswith("release")
        info = pbs.wait_state(job_id, {"R", "F"}, timeout_s=30)
        assert info["job_state"] in {"R", "F"}  # PBS's own scheduler ran it
    finally:
        cpsched_service.start()


def test_04_placement_is_per_host_and_reservations_are_kept_clear(
    pbs: PbsCluster, cpsched_service: LocalService, state_dir: Path
) -> None:
    # A reservation from in 10 minutes, for an hour, of 2 cpus on a host PBS picks.
    begins = time.strftime("%Y%m%d%H%M", time.localtime(time.time() + 600))
    resv = pbs.rsub("-R", begins, "-D", "01:00:00", "-l", "select=1:ncpus=2")
    queue = resv.split(".", 1)[0]
    reserved = re.findall(r"\(([^:()+]+):", pbs.run("pbs_rstat", "-f", resv))
    try:
        jobs = {
            # Two hours on a whole host: it would run into the window where it is.
            "long": pbs.qsub("-l", "select=1:ncpus=4", "-l", "walltime=02:00:00"),
            # More than either vnode of gn01, as much as the host: one chunk over both.
            "wide": pbs.qsub(
                "-q",
                "gpuq",
                "-l",
                "select=1:ncpus=6:ngpus=2",
                "-l",
                "walltime=00:02:00",
                script="/bin/sleep 2",
            ),
            # A chunk per host, and gpuq has one host: PBS itself would never run it.
            "scatter": pbs.qsub("-q", "gpuq", "-l", "select=2:ncpus=1", "-l", "place=scatter"),
        }
        in_resv = pbs.qsub("-q", queue, "-l", "select=1:ncpus=1")
        assert pbs.job(in_resv)["Hold_Types"] == "n"  # the hook leaves it to PBS
        bridge = make_bridge(cpsched_service, state_dir)
        started: dict[str, dict[str, int]] = {}
        rejected: dict[str, str] = {}
        end = time.monotonic() + 60
        while time.monotonic() < end and not (
            jobs["long"] in started and pbs.job(jobs["wide"]).get("job_state") in ENDED
        ):
            report = bridge.cycle()
            assert report.service_error is None, report.service_error
            if report.applied is not None:
                assert not report.applied.failed, report.applied.failed
                started.update(report.applied.started)
            if report.decision is not None:
                rejected.update({r.job_id: r.reason for r in report.decision.rejected})
            time.sleep(1)
        assert pbs.exec_hosts(jobs["long"]) == list(started[jobs["long"]])
        assert not set(pbs.exec_hosts(jobs["long"])) & set(reserved), reserved
        assert pbs.exec_vnodes(jobs["wide"]) == [["gn01[0]", "gn01[1]"]]
        assert int(pbs.job(jobs["wide"])["Exit_status"]) == 0
        assert jobs["scatter"] not in started and jobs["scatter"] in rejected, rejected
        # Refused, it was handed to PBS's own scheduler (which cannot run it either).
        scatter = pbs.job(jobs["scatter"])
        assert scatter["Hold_Types"] == "n" and scatter["job_state"] == "Q", scatter
        assert in_resv not in started and pbs.job(in_resv)["job_state"] == "Q"
    finally:
        pbs.delete_all()
        pbs.run("pbs_rdel", resv, check=False)
