"""Trial runs on the real Slurm test beds (22.05 here, 24.11 in its Debian 13 root): a
short job tried on cores FCFS leaves idle ends within its trial; a long one is put back
in the queue, held for cpsched, at the trial's end (``scontrol requeuehold``), and is
started again later, for good, on the nodes cpsched decides; a job submitted with
``--no-requeue`` is never tried. Nothing here mocks Slurm: states, restart counts and
nodes are read from squeue, independently of the bridge.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpsched.cli.local_service import LocalService
from cpsched.slurm_bridge import hostlist
from tests.slurm_bridge.conftest import (
    Testbed,
    audited,
    emptied,
    started_again,
    trial_ends,
    tried_first,
)
from tests.slurm_bridge.test_slurm_e2e import make_bridge

pytestmark = pytest.mark.slurm


@pytest.fixture(autouse=True)
def empty_testbed(slurm_testbed: Testbed, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from emptied(slurm_testbed, monkeypatch)


def restarts(bed: Testbed, job_id: str) -> int:
    """Slurm's restart count of a job, from ``scontrol show job`` (not the bridge's read)."""
    out = bed.run("scontrol", "-o", "show", "job", job_id)
    return int(out.split(" Restarts=", 1)[1].split()[0])


def record(bed: Testbed, job_id: str) -> None:
    """Slurm's own outputs for a job put back by a trial, kept for the readers' unit
    tests (copied from ``CPSCHED_RECORD_DIR`` into tests/slurm_bridge/fixtures by hand)."""
    where = record_dir(bed)
    major, minor = bed.slurm_version
    outputs = {
        "squeue_requeued.json": bed.run("squeue", "--json", "-j", job_id),
        "scontrol_show_job_requeued.txt": bed.run("scontrol", "-o", "-d", "show", "job", job_id),
    }
    for name, text in outputs.items():
        (where / f"{major}.{minor:02d}_{name}").write_text(text)


def record_dir(bed: Testbed) -> Path:
    where = Path(os.environ.get("CPSCHED_RECORD_DIR", bed.root / "recorded"))
    where.mkdir(parents=True, exist_ok=True)
    return where


def record_note(bed: Testbed, line: str) -> None:
    major, minor = bed.slurm_version
    with (record_dir(bed) / f"{major}.{minor:02d}_trials.txt").open("a") as out:
        out.write(line + "\n")


def test_short_job_ends_in_its_trial_long_one_goes_back_and_runs_later(
    slurm_testbed: Testbed, trial_service: LocalService, tmp_path: Path
) -> None:
    bed = slurm_testbed
    # The machine: node1, node2 (4 CPUs), gpu1, gpu2 (8 CPUs): 24 CPUs.
    blocker = bed.sbatch("-J", "blocker", "--no-requeue", "-c", "8", "-t", "5", script="sleep 300")
    wide = bed.sbatch("-J", "wide", "--no-requeue", "-n", "24", "-t", "5", script="sleep 5")
    short = bed.sbatch("-J", "short", "--requeue", "-c", "1", "-t", "2", script="sleep 4")
    long = bed.sbatch("-J", "long", "--requeue", "-c", "1", "-t", "5", script="sleep 300")
    never = bed.sbatch("-J", "never", "--no-requeue", "-c", "1", "-t", "5", script="sleep 300")
    bed.wait_visible([blocker, wide, short, long, never])
    bridge, _ = make_bridge(trial_service, tmp_path, wake_file=bed.wake)
    # FCFS starts the blocker, then stops at the wide job; the cores left idle are
    # offered to the jobs Slurm may requeue, shortest first; never to --no-requeue.
    chosen = tried_first(bridge, blocker, short, long)
    assert bed.wait_state(short, {"COMPLETED"}, 30)["state"] == "COMPLETED"
    info = bed.wait_state(long, {"RUNNING"}, 10)
    assert info["state"] == "RUNNING"
    assert sorted(hostlist.expand(info["nodes"])) == sorted(chosen)
    assert bed.job(never)["state"] == "PENDING" and bed.job(wide)["state"] == "PENDING"
    # Cycles until the long job's trial is over: then it goes back, held for cpsched.
    assert trial_ends(bridge) == [long]
    back = bed.wait_state(long, {"PENDING"}, 30)
    assert back["state"] == "PENDING" and back["priority"] == "0", back
    assert restarts(bed, long) == 1
    record(bed, long)
    # Slurm resets a requeued job's submit time; the bridge keeps the first one, so that
    # the job keeps its place in the queue and its wait counts from its submission.
    first_submit = bridge.seen[long].submit
    assert bridge.backend.read_state().job(long).submit > first_submit  # type: ignore[union-attr]
    requeued_at = time.monotonic()
    events = audited(bridge)
    assert ("trial_start", long) in events and ("trial_requeued", long) in events
    # The machine frees up: the long job starts again, for good, where cpsched decides.
    bed.run("scancel", blocker, wide, never)
    again = started_again(bridge, long)
    assert again, bed.job(long)
    assert bridge.seen[long].submit == first_submit
    waited = time.monotonic() - requeued_at
    record_note(bed, f"job {long} put back by its trial, started again {waited:.0f} s later")
    info = bed.wait_state(long, {"RUNNING"}, 20)
    assert info["state"] == "RUNNING"
    assert sorted(hostlist.expand(info["nodes"])) == sorted(again)
    assert restarts(bed, long) == 1 and bridge.book.trials == {}
