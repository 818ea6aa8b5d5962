"""The bridge's least privilege on a real Slurm 22.05 with slurmdbd: an account with
``AdminLevel=Operator`` (and listed in ``job_submit.lua``'s ``BRIDGE_UIDS``), not root.

As that account the bridge reads the cluster, starts another user's held job in a pin
reservation of its decided split, raises a running job's limit, takes the pin off and
deletes it, hands a job back to Slurm and holds it again, ends a trial run (puts a
running job back in the queue, held for cpsched), and reads finished jobs. A plain
account can do none of the acting (what makes the test able to fail).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpsched.slurm_bridge.backend import ExactSplit
from cpsched.slurm_bridge.errors import CommandError
from cpsched.slurm_bridge.slurm_backend import SlurmBackend
from tests.dbservers import MariadbServer
from tests.slurm_bridge.conftest import AsUser, Testbed, emptied, start_testbed
from tests.slurm_bridge.test_slurm_placement import real_split, wait_running
from tests.slurm_bridge.test_slurm_trials import restarts

pytestmark = pytest.mark.slurm

OPERATOR = "cpsched-op"


@pytest.fixture(scope="module")
def operator_testbed(mariadb_server: MariadbServer) -> Iterator[Testbed]:
    """Two 4-CPU nodes with slurmdbd, the bridge's account an operator. Its directory
    lies outside pytest's root-only temp tree, so other accounts reach the config and
    munge's socket."""
    root = Path(tempfile.mkdtemp(prefix="cpsched-optb-"))
    root.chmod(0o755)
    try:
        yield from start_testbed(
            root, mariadb_server, BRIDGE_USER=OPERATOR, CPU_NODES="2", GPU_NODES="0", WITH_RESTD="0"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def empty_testbed(operator_testbed: Testbed, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from emptied(operator_testbed, monkeypatch)


def backend_as(user: str) -> SlurmBackend:
    return SlurmBackend(runner=AsUser(user), partitions=["batch"], splits_tasks=False)


def test_an_operator_account_does_all_the_bridge_does(operator_testbed: Testbed) -> None:
    bed = operator_testbed
    backend = backend_as(OPERATOR)
    job = bed.sbatch("-J", "pinned", "-n", "5", "-t", "2", script="sleep 60")
    bed.wait_visible([job])
    view = backend.read_state().job(job)  # squeue, sinfo, sacctmgr, sshare as the operator
    assert view is not None and view.held_for_us and view.user == "root"
    # Slurm alone fills node1 first: 4 + 1. Pinned by a core reservation (22.05): 2 + 3;
    # 24.11 takes no per-node core counts: started on Slurm's own split.
    split = {"node1": 2, "node2": 3} if bed.pins_splits else {"node1": 4, "node2": 1}
    pin = ExactSplit(user=view.user, cores=split, partition="batch", limit_s=view.time_limit_s)
    backend.start(job, split, exact=pin if bed.pins_splits else None)
    wait_running(bed, job)
    assert real_split(bed, job) == split
    backend.extend(job, 5 * 60)  # raising a running job's limit needs an operator
    assert bed.job(job)["limit"] == "5:00"
    # its pin detached and deleted (22.05)
    assert backend.settle(backend.read_state()) == ([job] if bed.pins_splits else [])
    assert "cpsched-pin" not in bed.run("scontrol", "-o", "show", "reservation")

    later = bed.sbatch("-J", "later", "-n", "1", "--begin=now+3600", script="sleep 1")
    bed.wait_visible([later])
    backend.release_to_native(later)  # the "release" fallback
    assert bed.job(later)["priority"] != "0"
    backend.hold(later, unpin=True)
    assert bed.job(later)["priority"] == "0"

    # A trial's end: root's running job put back in the queue, held for cpsched, its
    # node list forgotten (the service's trial_run).
    tried = bed.sbatch("-J", "tried", "--requeue", "-n", "1", "-t", "5", script="sleep 300")
    bed.wait_visible([tried])
    backend.start(tried, {"node2": 1})
    wait_running(bed, tried)
    backend.requeue_hold(tried)
    back = bed.wait_state(tried, {"PENDING"}, timeout_s=30)
    assert back["state"] == "PENDING" and back["priority"] == "0", back
    assert restarts(bed, tried) == 1
    shown = bed.run("scontrol", "-o", "show", "job", tried)
    assert " ReqNodeList=(null) " in shown, shown
    bed.run("scancel", tried)

    bed.run("scancel", job)
    bed.wait_state(job, {"CANCELLED"}, timeout_s=30)
    # Not from the jobcomp file: `sacct -c` opens it for appending, which only root may;
    # from slurmdbd, which has the job a few seconds after it ends.
    deadline = time.monotonic() + 30
    while job not in {j.id for j in backend.finished_jobs(backend.read_state())}:
        assert time.monotonic() < deadline, "the ended job never read back"
        time.sleep(1)


def test_a_plain_account_cannot_start_or_extend_others_jobs(operator_testbed: Testbed) -> None:
    bed = operator_testbed
    job = bed.sbatch("-J", "held", "-n", "1", script="sleep 30")
    bed.wait_visible([job])
    plain = backend_as("nobody")
    with pytest.raises(CommandError):
        plain.start(job, {"node1": 1})
    with pytest.raises(CommandError):
        plain.extend(job, 60 * 60)
    pin = ExactSplit(user="root", cores={"node1": 1, "node2": 1}, partition="batch", limit_s=60)
    with pytest.raises(CommandError):
        plain.start(job, {"node1": 1, "node2": 1}, exact=pin)
    with pytest.raises(CommandError):
        plain.release_to_native(job)
    assert bed.job(job)["priority"] == "0"  # still held for cpsched
    running = bed.sbatch("-p", "shadowq", "-n", "1", script="sleep 30")  # Slurm's own
    wait_running(bed, running)
    with pytest.raises(CommandError):
        plain.hold(running, unpin=False)
    with pytest.raises(CommandError):
        plain.requeue_hold(running)  # no trial's end either
    assert bed.job(running)["state"] == "RUNNING" and restarts(bed, running) == 0
