"""Finished jobs from ``sacct -c`` (jobcomp/filetxt) or ``sacct`` with slurmdbd."""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace

from cpsched.slurm_bridge.model import ClusterState, JobShape, JobView
from cpsched.slurm_bridge.slurm_common import job_state, split_records, time_limit_minutes

# JobName last, behind a separator drawn for each run: sacct prints names as they are
# ("|" and line breaks included), see ``split_records``.
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


def sacct_argv(sacct: str, separator: str, *, jobcomp: bool, now: float | None = None) -> list[str]:
    """``sacct`` reading the jobcomp file (``-c``) or slurmdbd, epoch times (via env);
    ``separator`` from ``field_separator``."""
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime((now or time.time()) - LOOKBACK_S))
    fields = ",".join(SACCT_FIELDS)
    argv = [sacct, "-P", f"--delimiter={separator}", "-n", "-a", "-S", since, "-o", fields]
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


def parse_sacct(
    text: str, separator: str, *, partitions: list[str], unlimited_s: int, now: int
) -> list[JobView]:
    """Ended jobs that did start; the shape is a guess from CPUs and nodes (the loop
    prefers the shape it saw while the job was pending or running)."""
    jobs: list[JobView] = []
    for cols in split_records(text, separator, len(SACCT_FIELDS), "sacct"):
        row = dict(zip(SACCT_FIELDS, cols, strict=True))
        if "." in row["jobid"]:  # job steps (.batch, .0) are part of their job
            continue
        if partitions and row["partition"] not in partitions:
            continue
        state = job_state(row["state"])
        start, end = _epoch(row["start"]), _epoch(row["end"])
        if state in {"pending", "running"} or not start or not end:
            continue
        if row["nodelist"].strip() in {"", "None assigned", "(null)"}:
            continue  # cancelled while pending: a start time on no node, it never ran
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


def pick_finished(
    ended: Iterable[JobView],
    state: ClusterState,
    seen: Mapping[str, JobView],
    *,
    unseen_believed: Collection[str] | None = None,
) -> tuple[dict[str, JobView], dict[str, str]]:
    """The ended jobs worth posting (job id → view), and the records not believed (job
    id → why; they are read again next time, and count once they make sense).

    The jobcomp file holds job names as users gave them, line breaks included, so one
    job's name can write whole records for others. No record counts for a job queued or
    running now (a requeued job ends again later), nor for one the bridge saw end without
    starting. With ``unseen_believed`` (for a forgeable source: the jobs of the bridge's
    first read, its history from before it started), a record counts for a job the
    bridge did not see (held, running, or ended in ``squeue -t all``) only if it is one
    of those. Records of one job that disagree on
    its times count only where one starts when the bridge saw the job start (the last
    run of a requeued job). What ``squeue -t all`` says of an ended job wins; otherwise
    the bridge's last view of the job, with the record's state and times.
    """
    live_states = {"pending", "running"}
    live = {j.id for j in state.jobs if j.state in live_states}
    from_squeue = {j.id: j for j in state.finished}
    views: dict[str, dict[tuple[int, int], JobView]] = {}
    disbelieved: dict[str, str] = {}
    for job in ended:
        if job.id in live or job.start is None or job.end is None:
            continue
        best, known = from_squeue.get(job.id), seen.get(job.id)
        if known is not None and known.start is None and known.state not in live_states:
            continue  # the bridge saw it end without starting: it never ran
        if best is None and known is not None:
            best = replace(known, state=job.state, start=job.start, end=job.end)
        elif best is None:
            if unseen_believed is not None and job.id not in unseen_believed:
                disbelieved[job.id] = "ended record of a job the bridge never saw"
                continue
            best = job
        if best.start is not None and best.end is not None:
            views.setdefault(job.id, {})[(best.start, best.end)] = best
    picked: dict[str, JobView] = {}
    for job_id, by_times in views.items():
        if len(by_times) > 1:
            started = seen[job_id].start if job_id in seen else None
            by_times = {times: v for times, v in by_times.items() if times[0] == started}
        if len(by_times) == 1:
            picked[job_id] = next(iter(by_times.values()))
        else:
            disbelieved[job_id] = "ended records that disagree on its times"
    return picked, disbelieved
