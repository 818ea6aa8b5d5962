"""Builders for predictor tests: jobs with names and queues, and finished jobs."""

from __future__ import annotations

from cpsched.core.problem import Job
from cpsched.predictor.base import FinishedJob


def mk(
    id: str,
    *,
    user: str = "u",
    submit: int = 0,
    limit: int = 1000,
    cores: int = 1,
    mem: int | None = None,
    name: str = "",
    queue: str = "",
) -> Job:
    unit = (1,) if mem is None else (1, mem)
    names = ("cpu",) if mem is None else ("cpu", "mem")
    return Job(
        id=id,
        submit=submit,
        time_limit=limit,
        units=cores,
        unit_request=unit,
        user=user,
        name=name,
        queue=queue,
        resource_names=names,
    )


def done(job: Job, run: int, end: int | None = None) -> FinishedJob:
    """``job`` finished after ``run`` seconds, at ``end`` (default: submit + run)."""
    end = job.submit + run if end is None else end
    return FinishedJob(job, end - run, end)
