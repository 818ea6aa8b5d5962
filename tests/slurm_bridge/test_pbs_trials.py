"""Trial runs on a real OpenPBS (PBS's own scheduler on, the kit's hook holding every
job) with a real ``cpsched serve``: a short job tried on the cores FCFS leaves idle ends
within its trial; a long one is put back in the queue at the trial's end (``qrerun``),
still held for cpsched, and is started again later, for good, on the host cpsched
decides; a job submitted with ``-r n`` is never tried. States, run counts and hosts are
read from qstat, independently of the bridge.

Run inside the PBS root: ``./dev test-pbs`` (``pbs_testbed/pbs-run.sh pytest -m pbs``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cpsched.cli.local_service import LocalService
from tests.slurm_bridge.conftest import audited, started_again, trial_ends, tried_first
from tests.slurm_bridge.pbs_cluster import PbsCluster
from tests.slurm_bridge.test_pbs_e2e import make_bridge

pytestmark = [pytest.mark.pbs, pytest.mark.usefixtures("hooked_pbs")]


def test_short_job_ends_in_its_trial_long_one_goes_back_and_runs_later(
    pbs: PbsCluster, trial_service: LocalService, tmp_path: Path
) -> None:
    def job(name: str, rerun: str, cpus: int, chunks: int, minutes: int, sleep: int) -> str:
        select = f"select={chunks}:ncpus={cpus}"
        walltime = f"walltime=00:{minutes:02d}:00"
        options = ["-N", name, "-r", rerun, "-l", select, "-l", walltime, "-l", "place=scatter"]
        return pbs.qsub(*options, script=f"/bin/sleep {sleep}")

    # workq's hosts: cn01-cn04, 4 cpus each.
    blocker = job("blocker", "n", 4, 1, 5, 300)
    wide = job("wide", "n", 4, 4, 5, 5)
    short = job("short", "y", 1, 1, 2, 4)
    long = job("long", "y", 1, 1, 5, 300)
    never = job("never", "n", 1, 1, 5, 300)
    bridge = make_bridge(trial_service, tmp_path, wake_file=tmp_path / "wake")
    chosen = tried_first(bridge, blocker, short, long)
    assert pbs.wait_state(short, {"F"}, 40)["job_state"] == "F"
    assert pbs.job(short).get("Exit_status") == 0
    running = pbs.wait_state(long, {"R"}, 10)
    assert running["job_state"] == "R"
    assert pbs.exec_hosts(long) == list(chosen)
    first_qtime = running.get("qtime")
    assert trial_ends(bridge) == [long]
    back = pbs.wait_state(long, {"H"}, 30)
    # Back in the queue, still on the hook's operator hold only: cpsched's again.
    assert back["job_state"] == "H" and back["Hold_Types"] == "o", back
    assert int(back.get("run_count", 0)) == 1
    recorded = pbs.run("qstat", "-t", "-f", "-x", "-F", "json", long)
    (record_dir(tmp_path) / "qstat_requeued.json").write_text(recorded)
    events = audited(bridge)
    assert ("trial_start", long) in events and ("trial_requeued", long) in events
    requeued_at = time.monotonic()
    pbs.run("qdel", blocker, wide, never)
    again = started_again(bridge, long)
    assert again, pbs.job(long)
    info = pbs.wait_state(long, {"R"}, 20)
    assert info["job_state"] == "R"
    assert pbs.exec_hosts(long) == list(again)
    assert bridge.book.trials == {}
    waited = time.monotonic() - requeued_at
    (record_dir(tmp_path) / "pbs_trials.txt").write_text(
        f"job {long} put back by its trial (qtime {first_qtime} -> {back.get('qtime')}), "
        f"started again {waited:.0f} s later\n"
    )


def record_dir(tmp_path: Path) -> Path:
    """Where what PBS showed is kept for the readers' unit tests (copied from
    ``CPSCHED_RECORD_DIR`` into tests/slurm_bridge/fixtures/pbs by hand)."""
    where = Path(os.environ.get("CPSCHED_RECORD_DIR", tmp_path / "recorded"))
    where.mkdir(parents=True, exist_ok=True)
    return where
