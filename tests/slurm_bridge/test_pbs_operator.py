"""The bridge's least privilege on a real OpenPBS: an account that is a PBS Operator
(``qmgr -c "set server operators += cpschedop@*"``), neither root nor a Manager.

As that account the bridge reads the cluster, starts another user's held job on the
host it decided (``qrun -H``), raises the running job's walltime, ends a trial run
(``qrerun``: the job is back in the queue, still held for cpsched), hands a job to PBS's
scheduler and holds it again, and reads the ended job. A plain account can do none of
the acting (what makes the test able to fail). Run inside the PBS root: ``./dev
test-pbs``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from cpsched.slurm_bridge.errors import CommandError
from cpsched.slurm_bridge.pbs import PbsBackend
from tests.slurm_bridge.conftest import AsUser
from tests.slurm_bridge.pbs_cluster import PbsCluster

pytestmark = [pytest.mark.pbs, pytest.mark.usefixtures("hooked_pbs")]

OPERATOR = "cpschedop"


@pytest.fixture(scope="module")
def operator(hooked_pbs: PbsCluster) -> Iterator[str]:
    """A local account made a PBS Operator for the module's tests, and no longer after
    (without it, the first ``qrun`` is refused: "Unauthorized Request")."""
    if subprocess.run(["id", OPERATOR], capture_output=True, check=False).returncode != 0:
        subprocess.run(["useradd", "-M", OPERATOR], check=True)
    hooked_pbs.run("qmgr", "-c", f"set server operators += {OPERATOR}@*")
    try:
        yield OPERATOR
    finally:
        hooked_pbs.run("qmgr", "-c", f"set server operators -= {OPERATOR}@*")


def backend_as(user: str) -> PbsBackend:
    return PbsBackend(runner=AsUser(user))  # type: ignore[arg-type]


def test_an_operator_account_does_all_the_bridge_does(
    hooked_pbs: PbsCluster, operator: str
) -> None:
    pbs = hooked_pbs
    job = pbs.qsub("-l", "select=1:ncpus=2", "-l", "walltime=00:05:00", script="/bin/sleep 300")
    backend = backend_as(operator)
    view = backend.read_state().job(job)  # qstat, pbsnodes, pbs_rstat as the operator
    assert view is not None and view.held_for_us and view.user == "pbstest"
    backend.start(job, {"cn03": 1})  # PBS's own scheduler would take cn01
    info = pbs.wait_state(job, {"R"})
    assert info["job_state"] == "R", info.get("comment")
    assert pbs.exec_hosts(job) == ["cn03"]
    backend.extend(job, 10 * 60)  # raising a running job's walltime needs an operator
    assert pbs.job(job)["Resource_List"]["walltime"] == "00:10:00"

    backend.requeue_hold(job)  # a trial's end
    back = pbs.wait_state(job, {"H"})
    assert back["job_state"] == "H" and back["Hold_Types"] == "o", back
    assert int(back["run_count"]) == 1

    # Not before 2030: handed to PBS's scheduler, it still does not run.
    later = pbs.qsub("-l", "select=1:ncpus=1", "-l", "walltime=00:05:00", "-a", "203001010000")
    backend.read_state()
    backend.release_to_native(later)  # the "release" fallback: PBS's scheduler decides
    assert "o" not in pbs.job(later)["Hold_Types"]
    backend.hold(later, unpin=True)
    assert pbs.job(later)["Hold_Types"] == "o"

    pbs.run("qdel", "-W", "force", job)
    done = pbs.qsub("-l", "select=1:ncpus=1", "-l", "walltime=00:05:00", script="/bin/true")
    backend.read_state()
    backend.start(done, {"cn02": 1})
    pbs.wait_state(done, {"F"})
    assert done in {j.id for j in backend.finished_jobs(backend.read_state())}


def test_a_plain_account_cannot_start_extend_or_put_back_others_jobs(
    hooked_pbs: PbsCluster, operator: str
) -> None:
    pbs = hooked_pbs
    held = pbs.qsub("-l", "select=1:ncpus=1", "-l", "walltime=00:05:00")
    plain = backend_as("nobody")
    plain.read_state()  # reading is open to every account
    with pytest.raises(CommandError):
        plain.start(held, {"cn02": 1})
    with pytest.raises(CommandError):
        plain.release_to_native(held)
    assert pbs.job(held)["Hold_Types"] == "o"  # still held for cpsched
    running = pbs.qsub("-l", "select=1:ncpus=1", "-l", "walltime=00:05:00", script="/bin/sleep 60")
    acting = backend_as(operator)
    acting.read_state()
    acting.start(running, {"cn04": 1})
    assert pbs.wait_state(running, {"R"})["job_state"] == "R"
    with pytest.raises(CommandError):
        plain.extend(running, 60 * 60)
    with pytest.raises(CommandError):
        plain.requeue_hold(running)
    info = pbs.job(running)
    assert info["job_state"] == "R" and info["Resource_List"]["walltime"] == "00:05:00"
