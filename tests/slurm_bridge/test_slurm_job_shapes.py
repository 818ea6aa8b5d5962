"""Every job shape a site submits, started by the bridge on the real Slurm test bed (22.05
on the machine, 24.11 in the Debian 13 root: ``./dev test`` runs this file on both).

Each job is submitted as a user would (held by the kit's job_submit.lua), decided by a
real ``cpsched serve`` and started by the bridge; it must run on exactly the nodes the
bridge started it on.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cpsched.cli.local_service import LocalService
from cpsched.slurm_bridge import hostlist
from cpsched.slurm_bridge.loop import Bridge
from tests.slurm_bridge.conftest import Testbed
from tests.slurm_bridge.test_slurm_e2e import make_bridge

# each test starts and leaves the test bed empty (the placement tests' autouse fixture)
from tests.slurm_bridge.test_slurm_placement import empty_testbed  # noqa: F401

pytestmark = pytest.mark.slurm


def start_all(bridge: Bridge, job_ids: list[str], cycles: int = 6) -> dict[str, dict[str, int]]:
    """Cycles until the bridge has started every job of ``job_ids`` (or ``cycles`` ran)."""
    started: dict[str, dict[str, int]] = {}
    for _ in range(cycles):
        report = bridge.cycle()
        assert report.service_error is None, report.service_error
        assert report.applied is not None
        assert not report.applied.failed, report.applied.failed
        assert not report.left_out, report.left_out
        started |= report.applied.started
        if set(job_ids) <= set(started):
            break
        time.sleep(1)
    return started


def assert_runs_where_started(bed: Testbed, job_id: str, chosen: dict[str, int]) -> None:
    info = bed.wait_state(job_id, {"RUNNING", "COMPLETED"}, timeout_s=30)
    assert info["state"] in {"RUNNING", "COMPLETED"}, (job_id, info)
    assert sorted(hostlist.expand(info["nodes"])) == sorted(chosen), (job_id, info, chosen)


SHAPES: dict[str, list[str]] = {
    "cpus per task (-c)": ["-c", "2"],
    "tasks with cpus per task (-n -c)": ["-n", "2", "-c", "2"],
    "gpus per task": ["-n", "2", "--gpus-per-task=1"],
    "gres per node": ["-c", "2", "--gres=gpu:1"],
    "tasks per node over two nodes": ["-N", "2", "--ntasks-per-node=2"],
    "two nodes (-N 2)": ["-N", "2"],
    "tasks spread over nodes (-n 6)": ["-n", "6"],
    "one node asked (-N 1 -n 3)": ["-N", "1", "-n", "3"],
    "one thread per core (--hint=nomultithread)": ["-n", "2", "--hint=nomultithread"],
    "whole node (--exclusive)": ["--exclusive", "-N", "1"],
}


@pytest.mark.parametrize("options", list(SHAPES.values()), ids=list(SHAPES))
def test_a_job_shape_starts_where_it_was_decided(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path, options: list[str]
) -> None:
    bed = slurm_testbed
    job = bed.sbatch("-J", "shape", *options, script="sleep 20")
    bed.wait_visible([job])
    assert bed.job(job)["reason"] == "JobHeldUser"
    bridge, _ = make_bridge(cpsched_service, tmp_path, wake_file=bed.wake)
    started = start_all(bridge, [job])
    assert job in started, f"{options}: not started"
    assert_runs_where_started(bed, job, started[job])
    if options[:2] == ["-N", "1"]:
        assert len(started[job]) == 1  # the user's own maximum node count is kept


def test_a_dependent_job_starts_once_its_dependency_is_met(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    first = bed.sbatch("-J", "first", script="sleep 2")
    then = bed.sbatch("-J", "then", f"--dependency=afterok:{first}", script="sleep 20")
    bed.wait_visible([first, then])
    bridge, _ = make_bridge(cpsched_service, tmp_path, wake_file=bed.wake)
    started = start_all(bridge, [first])
    assert first in started and then not in started  # never released while it waits
    assert bed.wait_state(first, {"COMPLETED"}, timeout_s=30)["state"] == "COMPLETED"
    started = start_all(bridge, [then], cycles=10)
    assert then in started
    assert_runs_where_started(bed, then, started[then])


def test_the_elements_of_a_job_array_start(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    array = bed.sbatch("-J", "array", "--array=1-3", "-c", "1", script="sleep 20")
    elements = [f"{array}_{i}" for i in (1, 2, 3)]
    bridge, _ = make_bridge(cpsched_service, tmp_path, wake_file=bed.wake)
    started = start_all(bridge, elements)
    assert set(elements) <= set(started), started
    for element in elements:
        assert_runs_where_started(bed, element, started[element])
