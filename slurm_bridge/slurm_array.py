"""A held job array's pending tasks, as jobs the service can decide one by one.

Slurm lists a job array's tasks that have not started as one record (``123_[1-10%4]``:
task ids 1 to 10, at most 4 running at once) and splits a task off into its own job when
it is updated: ``scontrol update JobId=123_4 NodeList=...`` then ``scontrol release
123_4`` start that task alone (seen on 22.05 and 24.11). The bridge therefore offers the
record's first tasks as jobs of their own, each with the array's request, never more than
the array's own limit on tasks running at once allows.
"""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import islice

from cpsched.slurm_bridge.model import JobView

TASKS_OFFERED = 64
"""Tasks of one array offered in a cycle: a 10,000-task array must not make every snapshot
10,000 jobs longer; the next tasks are offered as these start."""

_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


def task_ids(tasks: str, limit: int) -> tuple[list[int], int | None]:
    """``"[1-3,7,10-20:5]%4"`` → the first ``limit`` task ids and the array's limit on
    running tasks (None: none). Raises ValueError on anything else."""
    text, _, throttle = tasks.strip().strip("[]").partition("%")
    text = text.strip("[]")
    ids: list[int] = []
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise ValueError(f"array tasks {tasks!r}: cannot read {part!r}")
        low = int(match.group(1))
        high = int(match.group(2) or low)
        step = int(match.group(3) or 1)
        ids.extend(islice(range(low, high + 1, step), limit - len(ids)))
        if len(ids) >= limit:
            break
    return ids[:limit], int(throttle) if throttle.isdigit() and int(throttle) > 0 else None


def array_tasks(record: JobView, array_id: str, tasks: str, jobs: list[JobView]) -> list[JobView]:
    """The pending tasks ``record`` stands for (Slurm's ``tasks`` string), as jobs
    ``{array_id}_{task}``: as many as the array's limit on running tasks leaves room
    for beside its tasks in ``jobs`` that run or were released, at most TASKS_OFFERED."""
    ids, throttle = task_ids(tasks, TASKS_OFFERED)
    if throttle is not None:
        prefix = f"{array_id}_"
        active = sum(
            1
            for job in jobs
            if job.id.startswith(prefix)
            and (job.state == "running" or (job.state == "pending" and not job.held_for_us))
        )
        ids = ids[: max(0, throttle - active)]
    return [replace(record, id=f"{array_id}_{task}") for task in ids]
