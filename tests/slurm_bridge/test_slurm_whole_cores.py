"""Active mode on nodes with two hardware threads per core (real Slurm 22.05).

Under ``CR_Core_Memory`` Slurm gives a job whole cores: a one-CPU job holds both threads
of a core. The bridge shapes jobs in whole cores there, so what the service decides is
what Slurm allocates: no job lands elsewhere and none is held again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cpsched.cli.local_service import LocalService
from tests.slurm_bridge.conftest import Testbed, emptied
from tests.slurm_bridge.test_slurm_placement import bridge_for, real_split, wait_running

pytestmark = pytest.mark.slurm


@pytest.fixture(autouse=True)
def empty_testbed(two_thread_testbed: Testbed, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from emptied(two_thread_testbed, monkeypatch)


def test_one_cpu_jobs_are_started_one_per_core(
    two_thread_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = two_thread_testbed
    # 8 CPUs in 4 cores: Slurm runs four one-CPU jobs, not eight.
    jobs = [bed.sbatch("-J", f"one{i}", "-n", "1", script="sleep 60") for i in range(6)]
    bed.wait_visible(jobs)
    bridge = bridge_for(cpsched_service, bed, tmp_path)
    report = bridge.cycle()
    assert report.applied is not None
    started = sorted(report.applied.started)
    assert len(started) == 4, report.applied
    wait_running(bed, *started)
    for job in started:
        assert sum(real_split(bed, job).values()) == 2  # a whole core
    again = bridge.cycle()
    assert again.misplaced == {} and again.rehold == []
    assert again.applied is not None and again.applied.started == {}


def test_a_task_job_lands_on_exactly_its_decided_cores(
    two_thread_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = two_thread_testbed
    # Five tasks need three cores: two on one node and one on the other (4 + 2 CPUs).
    job = bed.sbatch("-J", "five", "-n", "5", script="sleep 60")
    bed.wait_visible([job])
    bridge = bridge_for(cpsched_service, bed, tmp_path)
    report = bridge.cycle()
    assert report.applied is not None and job in report.applied.started, report.applied
    decided = report.applied.started[job]  # units of one core (two tasks) per node
    assert sorted(decided.values()) == [1, 2]
    wait_running(bed, job)
    assert real_split(bed, job) == {node: 2 * cores for node, cores in decided.items()}
    again = bridge.cycle()
    assert again.misplaced == {} and again.rehold == []
    assert again.unpinned == ([job] if bed.pins_splits else [])  # 24.11: Slurm's own split


def test_a_job_using_one_thread_per_core_gets_a_core_per_cpu(
    two_thread_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = two_thread_testbed
    # --hint=nomultithread: each of the 3 CPUs asked is a core (6 CPUs), which leaves
    # one core of the four for a one-CPU job; the two start in one cycle.
    wide = bed.sbatch("-J", "nomt", "-n", "3", "--hint=nomultithread", script="sleep 60")
    one = bed.sbatch("-J", "one", "-n", "1", script="sleep 60")
    bed.wait_visible([wide, one])
    bridge = bridge_for(cpsched_service, bed, tmp_path)
    report = bridge.cycle()
    assert report.applied is not None and set(report.applied.started) == {wide, one}
    decided = report.applied.started[wide]  # units of one task on one core
    assert sorted(decided.values()) == [1, 2]
    wait_running(bed, wide, one)
    assert real_split(bed, wide) == {node: 2 * cores for node, cores in decided.items()}
    assert sum(real_split(bed, one).values()) == 2
    again = bridge.cycle()
    assert again.misplaced == {} and again.rehold == []
