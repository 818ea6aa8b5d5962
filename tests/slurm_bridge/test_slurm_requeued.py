"""A job a trial run put back (``scontrol requeuehold``), as Slurm 22.05 and 24.11 show
it: recorded on the live test beds by tests/slurm_bridge/test_slurm_trials.py. Both
readers see that it may be requeued, that it went back once, that it is held for
cpsched again, and until when Slurm holds it back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpsched.slurm_bridge.slurm_json import read_jobs
from cpsched.slurm_bridge.slurm_text import job_extras

FIXTURES = Path(__file__).parent / "fixtures"
VERSIONS = ["slurm", "slurm-24.11"]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_json_reader_sees_a_job_put_back(version: str) -> None:
    doc = json.loads((FIXTURES / version / "squeue_requeued.json").read_text())
    found = read_jobs(doc, tag="extsched", partitions=[], partition_max={}, unlimited_s=3600)
    [job] = [j for j in found.jobs if j.restarts]
    assert (job.state, job.requeue, job.restarts) == ("pending", True, 1)
    assert job.held_for_us and job.allocation == {} and job.required_nodes == ()
    # Slurm lets it start again only some two minutes after it went back
    assert job.rules.begin is not None and job.rules.begin > job.submit
    others = [j for j in found.jobs if not j.restarts]
    assert all(j.restarts == 0 for j in others)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_text_reader_sees_a_job_put_back(version: str) -> None:
    text = (FIXTURES / version / "scontrol_show_job_requeued.txt").read_text()
    [extras] = job_extras(text).values()
    assert (extras.requeue, extras.restarts) == (True, 1)
