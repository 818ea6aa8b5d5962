"""cpsched's EASY against an independent textbook EASY (``bench/easy_reference.py``) on
real traces: every job starts at the same second."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from cpsched.core import make_dispatcher
from cpsched.predictor.walltime import WallTime
from cpsched.replay.simulator import Simulator
from cpsched.replay.swf import read_swf
from cpsched.replay.system import load_system
from tests.conftest import REPO

_spec = importlib.util.spec_from_file_location(
    "easy_reference", REPO / "bench" / "easy_reference.py"
)
assert _spec is not None and _spec.loader is not None
easy_reference = importlib.util.module_from_spec(_spec)
sys.modules["easy_reference"] = easy_reference  # dataclasses look their module up
_spec.loader.exec_module(easy_reference)


def cpsched_starts(system, trace, allocator):
    sim = Simulator(system, trace, make_dispatcher("easy", allocator, plan=False), WallTime())
    result = sim.run()
    return dict(zip(result.jobs.job_id, result.jobs.start.tolist(), strict=True))


def reference_starts(system, trace):
    jobs = [
        easy_reference.RefJob(
            tj.job.id, tj.job.submit, tj.job.units, tj.job.time_limit, tj.run_time
        )
        for tj in trace
    ]
    return easy_reference.reference_easy(jobs, len(system.nodes))


@pytest.mark.parametrize(
    ("trace_name", "system_name", "count"),
    [("KTH-SP2-1996-2.1-cln.swf.gz", "kth", 4000), ("CTC-SP2-1996-3.1-cln.swf.gz", "ctc", 4000)],
)
@pytest.mark.parametrize("allocator", ["first-fit", "best-fit"])
def test_easy_starts_every_job_when_textbook_easy_does(
    traces_dir, trace_name, system_name, count, allocator
):
    system = load_system(REPO / "systems" / f"{system_name}.toml")
    trace = read_swf(traces_dir / trace_name, system, limit=count).jobs
    assert cpsched_starts(system, trace, allocator) == reference_starts(system, trace)


def test_kth_job_184_is_backfilled_beside_the_80_cpu_reservation(traces_dir):
    """The issue's example: at t = 691,379 job 153 (80 cpus) is reserved at 705,083 and 10
    cpus are spare then; job 184 (10 cpus, 14,400 s) fits the 10 free now and the 10 spare
    then, so it starts at once, and job 153 still starts no later than its reservation."""
    system = load_system(REPO / "systems" / "kth.toml")
    trace = read_swf(traces_dir / "KTH-SP2-1996-2.1-cln.swf.gz", system, limit=300).jobs
    starts = cpsched_starts(system, trace, "best-fit")
    assert starts["184"] == 691_379
    assert starts["153"] <= 705_083
