"""Finished jobs from ``sacct -c`` (jobcomp/filetxt) or ``sacct`` with slurmdbd."""

from __future__ import annotations

import math
import time

from cpsched.slurm_bridge.model import JobShape, JobView
from cpsched.slurm_bridge.slurm_common import job_state, time_limit_minutes

# JobName last: sacct -P does not escape "|", so a name may contain it.
SACCT_FIELDS = (
    "jobid",
    "user",
    "group",
    "partition",
    "nodelist",
    "state",
    "submit",
    "start",
    "end",
    "timelimit",
    "ncpus",
    "nnodes",
    "jobname",
)
LOOKBACK_S = 2 * 86400


def sacct_argv(sacct: str, *, jobcomp: bool, now: float | None = None) -> list[str]:
    """``sacct`` reading the jobcomp file (``-c``) or slurmdbd, epoch times (via env)."""
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime((now or time.time()) - LOOKBACK_S))
    argv = [sacct, "-P", "-n", "-a", "-S", since, "-o", ",".join(SACCT_FIELDS)]
    if jobcomp:
        argv.insert(1, "-c")
    else:
        # With -s, sacct's window ends at its start unless -E says otherwise: no -E, no
        # ended job (seen with Slurm 22.05 and slurmdbd).
        argv[1:1] = ["-X", "-s", "CD,F,CA,TO,NF,OOM,DL,BF,PR", "-E", "now"]
    return argv


def _epoch(text: str) -> int | None:
    value = text.strip()
    return int(value) if value.isdigit() else None


def parse_sacct(text: str, *, partitions: list[str], unlimited_s: int, now: int) -> list[JobView]:
    """Ended jobs that did start; the shape is a guess from CPUs and nodes (the loop
    prefers the shape it saw while the job was pending or running)."""
    jobs: list[JobView] = []
    for line in text.splitlines():
        cols = line.split("|", len(SACCT_FIELDS) - 1)
        if len(cols) != len(SACCT_FIELDS):
            continue
        row = dict(zip(SACCT_FIELDS, cols, strict=True))
        if "." in row["jobid"]:  # job steps (.batch, .0) are part of their job
            continue
        if partitions and row["partition"] not in partitions:
            continue
        state = job_state(row["state"])
        start, end = _epoch(row["start"]), _epoch(row["end"])
        if state in {"pending", "running"} or not start or not end:
            continue
        cpus = int(row["ncpus"]) if row["ncpus"].isdigit() else 1
        nodes = int(row["nnodes"]) if row["nnodes"].isdigit() else 1
        shape = (
            JobShape(units=1, per_unit={"cpu": max(cpus, 1)}, single_node=True)
            if nodes <= 1
            else JobShape(
                units=nodes, per_unit={"cpu": math.ceil(cpus / nodes)}, one_unit_per_node=True
            )
        )
        limit = time_limit_minutes(row["timelimit"])
        jobs.append(
            JobView(
                id=row["jobid"],
                user=row["user"].split("(", 1)[0],
                group=row["group"].split("(", 1)[0],
                name=row["jobname"],
                partition=row["partition"],
                state=state,
                submit=_epoch(row["submit"]) or start,
                time_limit_s=max(limit * 60 if limit else unlimited_s, 60),
                shape=shape,
                start=start,
                end=max(end, start),
            )
        )
    return jobs
