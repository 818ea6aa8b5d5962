"""Held jobs' dependencies judged from the jobs read (slurm_dependency)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cpsched.slurm_bridge.model import JobRules, JobView
from cpsched.slurm_bridge.slurm_dependency import met, settle_dependencies
from tests.slurm_bridge.fakes import held, running


def ended(job_id: str, state: str) -> JobView:
    return replace(running(job_id, {"n1": 1}, start=500), state=state, end=900)


JOBS = {
    "1": ended("1", "completed"),
    "2": ended("2", "failed"),
    "3": running("3", {"n1": 1}, start=900),
    "4": held("4"),
}


@pytest.mark.parametrize(
    ("dependency", "expected"),
    [
        # as Slurm lists them (22.05 and 24.11 alike): "afterok:1(unfulfilled)"
        ("afterok:1(unfulfilled)", True),
        ("afterok:2(unfulfilled)", False),
        ("afternotok:2(unfulfilled)", True),
        ("afternotok:1(unfulfilled)", False),
        ("afterany:1(unfulfilled),afterany:2(unfulfilled)", True),
        ("afterany:3(unfulfilled)", False),
        ("after:3(unfulfilled)", True),
        ("after:3+5(unfulfilled)", False),  # started at 900, 5 minutes not passed at 1000
        ("after:4(unfulfilled)", False),
        ("afterok:1(unfulfilled),afterok:2(unfulfilled)", False),
        ("afterok:1(unfulfilled)?afterok:2(unfulfilled)", True),
        ("afterok:99(unfulfilled)", False),  # not read: purged, unknown
        ("singleton(unfulfilled)", False),
        ("aftercorr:1(unfulfilled)", False),
        ("afterok:1(failed)", False),
    ],
)
def test_clauses_are_judged_as_slurm_would(dependency: str, expected: bool) -> None:
    assert met(dependency, JOBS, now=1000) is expected


def test_only_held_jobs_whose_dependency_is_met_are_freed() -> None:
    waiting = replace(held("5"), rules=JobRules(dependency="afterok:1(unfulfilled)"))
    blocked = replace(held("6"), rules=JobRules(dependency="afterok:2(unfulfilled)"))
    settled = {j.id: j for j in settle_dependencies([*JOBS.values(), waiting, blocked], 1000)}
    assert settled["5"].rules.dependency == ""
    assert settled["6"].rules.dependency == "afterok:2(unfulfilled)"
