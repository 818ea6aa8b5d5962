"""The site's rules on the real Slurm 22.05 test bed: partitions with their own nodes and
limits, node features, exclusive jobs, -N jobs, dependencies, begin times and a
reservation. cpsched must start each job only where and when Slurm's own rules allow,
and never release a job Slurm holds back.

The test bed (tests/slurm_bridge/testbed/start.sh): node1 (4 CPUs, skylake,ib), node2
(icelake), gpu1 and gpu2 (8 CPUs, 2 GPUs, ampere,ib); partitions batch and shadowq over
all nodes, cpu = node[1-2] (MaxTime 120 min), gpu = gpu[1-2] (MaxTime 60 min,
MaxNodes 1). Where a job ran is read from squeue, independently of the bridge.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cpsched.cli.local_service import LocalService
from cpsched.slurm_bridge import hostlist
from cpsched.slurm_bridge.loop import Bridge
from tests.slurm_bridge.conftest import TOKEN, Testbed, decided_cycle
from tests.slurm_bridge.test_slurm_e2e import make_bridge

pytestmark = pytest.mark.slurm

MANAGED = ["batch", "cpu", "gpu"]


@pytest.fixture(autouse=True)
def empty_testbed(slurm_testbed: Testbed, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SLURM_CONF", slurm_testbed.env["SLURM_CONF"])
    slurm_testbed.cancel_all()
    yield
    slurm_testbed.run("scontrol", "delete", "ReservationName=window", check=False)
    slurm_testbed.cancel_all()


def bridge_for(service: LocalService, bed: Testbed, state_dir: Path) -> Bridge:
    bridge, _ = make_bridge(service, state_dir, wake_file=bed.wake, partitions=MANAGED)
    return bridge


def ran_on(bed: Testbed, job_id: str, timeout_s: float = 20) -> set[str]:
    info = bed.wait_state(job_id, {"RUNNING", "COMPLETED"}, timeout_s)
    assert info["state"] in {"RUNNING", "COMPLETED"}, (job_id, info)
    return set(hostlist.expand(info["nodes"]))


def still_held(bed: Testbed, job_id: str) -> None:
    """Pending, priority 0, held by cpsched's hold: never released."""
    info = bed.job(job_id)
    assert (info["state"], info["priority"], info["reason"]) == ("PENDING", "0", "JobHeldUser"), (
        job_id,
        info,
    )


def test_partitions_and_features_decide_the_nodes(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    gpu = bed.sbatch("-p", "gpu", "-n", "2", script="sleep 20")
    skylake = bed.sbatch("-p", "cpu", "-n", "1", "--constraint=skylake&ib", script="sleep 20")
    icelake = bed.sbatch("-p", "cpu", "-n", "1", "--constraint=icelake", script="sleep 20")
    either = bed.sbatch("-p", "cpu,gpu", "-n", "1", "--constraint=ampere", script="sleep 20")
    jobs = [gpu, skylake, icelake, either]
    bed.wait_visible(jobs)
    report = decided_cycle(bridge_for(cpsched_service, bed, tmp_path))
    assert report.applied is not None and set(report.applied.started) == set(jobs), report
    assert ran_on(bed, gpu) in ({"gpu1"}, {"gpu2"})  # gpu's MaxNodes=1: one node
    assert ran_on(bed, skylake) == {"node1"}
    assert ran_on(bed, icelake) == {"node2"}
    assert ran_on(bed, either) <= {"gpu1", "gpu2"}
    for job in jobs:
        assert ran_on(bed, job) == set(report.applied.started[job])


def test_an_exclusive_job_gets_whole_nodes_and_a_two_node_job_two(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    bridge = bridge_for(cpsched_service, bed, tmp_path)
    small = bed.sbatch("-p", "cpu", "-n", "1", "-w", "node1", script="sleep 40")
    bed.wait_visible([small])
    assert small in decided_cycle(bridge).applied.started  # type: ignore[union-attr]
    assert ran_on(bed, small) == {"node1"}
    exclusive = bed.sbatch("-p", "cpu", "-n", "1", "--exclusive", script="sleep 30")
    beside = bed.sbatch("-p", "cpu", "-n", "1", script="sleep 30")
    bed.wait_visible([exclusive, beside])
    report = decided_cycle(bridge)
    assert report.applied is not None and exclusive in report.applied.started, report
    assert ran_on(bed, exclusive) == {"node2"}  # node1 is in use
    if beside in report.applied.started:
        assert ran_on(bed, beside) == {"node1"}  # never beside the exclusive job
    bed.cancel_all()
    pair = bed.sbatch("-p", "cpu", "-N", "2", "-n", "2", script="sleep 20")
    bed.wait_visible([pair])
    report = decided_cycle(bridge)
    assert report.applied is not None and pair in report.applied.started, report
    assert ran_on(bed, pair) == {"node1", "node2"}


def test_dependencies_and_begin_times_are_never_released(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    bridge = bridge_for(cpsched_service, bed, tmp_path)
    first = bed.sbatch("-n", "1", "-J", "first", script="sleep 3")
    second = bed.sbatch("-n", "1", "-J", "second", f"--dependency=afterok:{first}", script="true")
    later = bed.sbatch("-n", "1", "-J", "later", "--begin=now+3600", script="true")
    too_long = bed.sbatch("-p", "gpu", "-n", "1", "-t", "90", script="true")  # MaxTime 60
    bed.wait_visible([first, second, later, too_long])
    report = decided_cycle(bridge)
    assert report.applied is not None and set(report.applied.started) == {first}, report
    for job in (second, later, too_long):
        still_held(bed, job)
    ran_on(bed, first)
    bed.wait_state(first, {"COMPLETED", "GONE"}, 30)
    # Slurm re-tests a held job's dependencies in its periodic job purge (every 60 s),
    # not in its scheduling loop (held jobs are not queued there): until then the job
    # still shows afterok:N(unfulfilled) and waits, as it must.
    end = time.monotonic() + 90
    started: set[str] = set()
    while second not in started and time.monotonic() < end:
        report = decided_cycle(bridge)
        started |= set(report.applied.started if report.applied else {})
        if second not in started:
            time.sleep(2)
    assert second in started
    assert started <= {second}
    for job in (later, too_long):
        still_held(bed, job)


def test_nothing_is_placed_across_a_reservation_window(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    bed.run(
        "scontrol", "create", "reservation", "ReservationName=window", "StartTime=now+600",
        "Duration=30", "Nodes=node1,node2", "Users=root", "Flags=MAINT",
    )  # fmt: skip
    bridge = bridge_for(cpsched_service, bed, tmp_path)
    across = bed.sbatch("-p", "cpu", "-n", "1", "-t", "15", script="sleep 20")  # 900 s > 600
    before = bed.sbatch("-p", "cpu", "-n", "1", "-t", "5", script="sleep 20")  # ends before
    elsewhere = bed.sbatch("-p", "batch", "-n", "1", "-t", "15", script="sleep 20")
    bed.wait_visible([across, before, elsewhere])
    report = decided_cycle(bridge)
    assert report.applied is not None
    assert set(report.applied.started) == {before, elsewhere}, report
    still_held(bed, across)
    assert ran_on(bed, before) <= {"node1", "node2"}
    assert ran_on(bed, elsewhere) <= {"gpu1", "gpu2"}
    answer = httpx.get(
        f"{cpsched_service.url}/v1/clusters/testbed/jobs/{across}",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    pending = answer.json()["pending"]
    assert any("reservation window" in rule for rule in pending["rules"]), pending


def test_a_job_over_its_qos_limit_waits_held_until_the_limit_allows_it(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    """QOS ``capped`` allows a user 4 CPUs at once (MaxTRESPerUser, slurmdbd enforcing).
    A held job shows Slurm's hold as its reason, never the limit: the bridge reads the
    limit itself, so the second 4-CPU job is sent as not eligible and stays held while
    the first runs, and is started once the first has ended."""
    bed = slurm_testbed
    bridge = bridge_for(cpsched_service, bed, tmp_path)
    first = bed.sbatch("-p", "cpu", "--qos=capped", "-n", "4", script="sleep 6")
    second = bed.sbatch("-p", "cpu", "--qos=capped", "-n", "4", script="sleep 6")
    bed.wait_visible([first, second])
    report = decided_cycle(bridge)
    assert report.applied is not None
    started = set(report.applied.started)
    # Both fit on the two 4-CPU nodes, but not together within the QOS's 4 CPUs: one
    # starts, the other is refused before anything is run (the same cycle's tally).
    assert len(started & {first, second}) == 1, report
    waiting = second if first in started else first
    still_held(bed, waiting)
    assert "QOSMaxCpuPerUserLimit" in report.applied.refused.get(waiting, ""), report
    report = decided_cycle(bridge)  # now the running job counts against the limit
    assert report.applied is not None and waiting not in report.applied.started
    still_held(bed, waiting)
    answer = httpx.get(
        f"{cpsched_service.url}/v1/clusters/testbed/jobs/{waiting}",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert "QOSMaxCpuPerUserLimit" in str(answer.json()["pending"]), answer.json()
    running = first if waiting == second else second
    bed.wait_state(running, {"COMPLETED", "GONE"}, 30)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        report = decided_cycle(bridge)
        if report.applied is not None and waiting in report.applied.started:
            break
        time.sleep(1)
    assert ran_on(bed, waiting) <= {"node1", "node2"}


def test_a_held_job_gets_the_priority_slurm_gives_the_same_job_unheld(
    slurm_testbed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    """Slurm gives a job held for cpsched priority 0 and no factors; the bridge computes
    the multifactor priority (the test bed weights every factor). The same job submitted
    to shadowq, which Slurm schedules itself, shows the priority Slurm computes: the two
    agree. Both begin in an hour, so their age factors are 0 and equal."""
    bed = slurm_testbed
    bridge = bridge_for(cpsched_service, bed, tmp_path)
    args = ("--qos=capped", "-n", "2", "--begin=now+3600")
    unheld = bed.sbatch("-p", "shadowq", *args, script="true")
    held = bed.sbatch("-p", "batch", *args, script="true")
    small = bed.sbatch(
        "-p", "shadowq", "--qos=normal", "-n", "1", "--begin=now+3600", script="true"
    )
    held_small = bed.sbatch(
        "-p", "batch", "--qos=normal", "-n", "1", "--begin=now+3600", script="true"
    )
    bed.wait_visible([unheld, held, small, held_small])
    still_held(bed, held)
    # Slurm computes priorities in its periodic pass too: wait for the unheld jobs'.
    end = time.monotonic() + 30
    while time.monotonic() < end and "0" in {
        bed.job(unheld)["priority"],
        bed.job(small)["priority"],
    }:
        time.sleep(0.5)
    state = bridge.backend.read_state()
    computed = {job.id: job.priority for job in state.jobs}
    assert abs(computed[held] - int(bed.job(unheld)["priority"])) <= 1, (computed, bed.job(unheld))
    assert abs(computed[held_small] - int(bed.job(small)["priority"])) <= 1, (
        computed,
        bed.job(small),
    )
    assert computed[held] > computed[held_small]  # the capped QOS's priority is higher
