"""Read the jobs of ``squeue --json`` (also slurmrestd's ``jobs``): openapi v0.0.38 of
Slurm 22.05 and data_parser v0.0.40-v0.0.42 of Slurm 23.11-24.11 (``slurm_json_doc``).

What differs in the data_parser formats: numbers and times are ``{"set", "infinite",
"number"}``, ``job_state`` is a list (a base state and flags: ``["RUNNING",
"COMPLETING"]``, ``slurm_json_states``), ``shared`` a list, a running job's cores are
under ``job_resources.nodes.allocation`` (v0.0.41 on), and a pending job's ``max_nodes``
may be Slurm's estimate rather than a limit (``slurm_json_request``). A job record that
cannot be read is reported as unreadable and left out (``JobsRead``); the others are
read all the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cpsched.slurm_bridge import hostlist
from cpsched.slurm_bridge.eligibility import slurm_blocked
from cpsched.slurm_bridge.errors import StateParseError
from cpsched.slurm_bridge.model import JobRules, JobView
from cpsched.slurm_bridge.slurm_array import array_tasks
from cpsched.slurm_bridge.slurm_common import (
    is_ending,
    job_state,
    set_count,
    start_time,
)
from cpsched.slurm_bridge.slurm_json_doc import (
    NEWER_FORMATS,
    Doc,
    JsonOrigin,
    data_format,
    number,
    records,
)
from cpsched.slurm_bridge.slurm_json_nodes import parse_nodes
from cpsched.slurm_bridge.slurm_json_request import cpus_by_node, max_nodes, mem_from_tres
from cpsched.slurm_bridge.slurm_json_states import job_state_word
from cpsched.slurm_bridge.slurm_shape import (
    NO_WHOLE_CORES,
    SlurmRequest,
    WholeCores,
    job_shape,
    parse_gres,
    units_on_nodes,
)
from cpsched.slurm_bridge.slurm_tag import read_tag

__all__ = ["JobsRead", "job_id", "job_rules", "parse_job", "parse_jobs", "parse_nodes", "read_jobs"]

SQUEUE = JsonOrigin("squeue --json")

_EXCLUSIVE = frozenset({"none", "user", "mcs", "topo"})
"""``shared`` values of a job taking whole nodes (``--exclusive[=user|mcs|topo]``)."""


@dataclass(frozen=True, slots=True)
class JobsRead:
    """The jobs of one ``squeue --json`` document, and those that could not be read:
    (job id, why), each left out of ``jobs``."""

    jobs: list[JobView]
    unreadable: tuple[tuple[str, str], ...] = ()


def _exclusive(shared: Any) -> bool:
    """``shared``: a word or null (v0.0.38), a list of words (data_parser formats)."""
    words = shared if isinstance(shared, list) else [shared]
    return any(str(word) in _EXCLUSIVE for word in words if word)


def job_rules(raw: Doc, request: SlurmRequest) -> JobRules:
    """The site's rules on one ``squeue --json`` job (see :class:`JobRules`)."""
    dependency = str(raw.get("dependency") or "")
    return JobRules(
        features=str(raw.get("features") or ""),
        exclusive=_exclusive(raw.get("shared")),
        min_nodes=request.node_count if request.node_count > 1 else None,
        max_nodes=request.max_nodes or None,
        tasks_per_node=request.tasks_per_node,
        reservation=str(raw.get("resv_name") or ""),
        dependency="" if dependency == "(null)" else dependency,
        begin=number(raw.get("eligible_time")) or None,
        qos=str(raw.get("qos") or ""),
        account=str(raw.get("account") or ""),
        blocked=slurm_blocked(str(raw.get("state_reason") or "")),
    )


def job_id(raw: Doc) -> str:
    """The id scontrol takes: ``123``, or ``123_4`` for an array element."""
    task, array = number(raw.get("array_task_id")), number(raw.get("array_job_id"))
    if task is not None and array:
        return f"{array}_{task}"
    return str(raw["job_id"])


def parse_job(
    raw: Doc,
    *,
    tag: str,
    partition_max: Mapping[str, int | None],
    unlimited_s: int,
    cores: WholeCores = NO_WHOLE_CORES,
    newer: bool = False,
) -> JobView:
    """One job of ``squeue --json``; ``cores`` says where Slurm allocates whole cores;
    ``newer``: the record is in a data_parser format (not 22.05's v0.0.38)."""
    word = job_state_word(raw.get("job_state"), newer=newer, job=raw.get("job_id"))
    state = job_state(word)
    hold = read_tag(str(raw.get("admin_comment") or ""), tag)
    request = SlurmRequest(
        cpus=number(raw.get("cpus")) or 1,
        tasks=number(raw.get("tasks")) or 1,
        node_count=number(raw.get("node_count")) or 1,
        max_nodes=hold.node_limit(max_nodes(raw, newer, state == "pending")) or 0,
        cpus_per_task=number(raw.get("cpus_per_task")),
        mem_per_cpu=number(raw.get("memory_per_cpu")),
        mem_per_node=number(raw.get("memory_per_node")) or mem_from_tres(raw),
        gres_per_node=parse_gres(raw.get("tres_per_node")),
        gres_per_task=parse_gres(raw.get("tres_per_task")),
        gres_per_job=parse_gres(raw.get("tres_per_job")),
        tasks_per_node=set_count(number(raw.get("tasks_per_node"))),
        tasks_per_core=set_count(number(raw.get("tasks_per_core"))),
        threads_per_core=set_count(number(raw.get("threads_per_core"))),
        allocated=state != "pending",
    )
    partition = str(raw.get("partition") or "")
    shape = job_shape(request, rounding=cores.for_job(partition))
    limit_min = number(raw.get("time_limit"))
    if limit_min is None:
        limit_min = partition_max.get(partition)
    limit_s = limit_min * 60 if limit_min else unlimited_s
    nodes = hostlist.expand(str(raw.get("nodes") or ""))
    allocation = {}
    if state == "running" and nodes:
        allocation = units_on_nodes(shape, cpus_by_node(raw, nodes, cores.node_threads))
    priority = number(raw.get("priority")) or 0
    tagged = hold.tagged
    start = number(raw.get("start_time"))
    end = number(raw.get("end_time"))
    return JobView(
        id=job_id(raw),
        user=str(raw.get("user_name") or raw.get("user_id") or ""),
        group=str(raw.get("group_name") or ""),
        name=str(raw.get("name") or ""),
        partition=partition,
        state=state,
        submit=number(raw.get("submit_time")) or 0,
        time_limit_s=max(limit_s, 60),
        shape=shape,
        held_for_us=state == "pending" and tagged and priority == 0,
        tagged=tagged,
        priority=priority,
        reason=str(raw.get("state_reason") or ""),
        ending=is_ending(word),
        start=start_time(state, start, nodes),
        end=end if state not in {"pending", "running"} and end else None,
        allocation=allocation,
        required_nodes=tuple(hostlist.expand(str(raw.get("required_nodes") or ""))),
        rules=job_rules(raw, request),
        requeue=raw.get("requeue") is True,
        restarts=number(raw.get("restart_cnt")) or 0,
    )


def read_jobs(
    doc: Doc,
    *,
    tag: str,
    partitions: list[str],
    partition_max: Mapping[str, int | None],
    unlimited_s: int,
    cores: WholeCores = NO_WHOLE_CORES,
    origin: JsonOrigin = SQUEUE,
) -> JobsRead:
    """Jobs of ``doc`` in the wanted partitions, a held array's pending tasks one by one.

    A document in a format not read, or without ``jobs``, is an error for the read
    (StateParseError naming ``origin``'s command and Slurm's version); a job that cannot
    be read is one of ``unreadable``, with why.
    """
    newer = data_format(doc, origin) in NEWER_FORMATS
    jobs: list[JobView] = []
    arrays: list[tuple[JobView, str, str]] = []  # pending tasks' record, array id, tasks
    unreadable: list[tuple[str, str]] = []
    for raw in records(doc, "jobs", origin):
        try:
            partition = str(raw.get("partition") or "")
            if partitions and not set(partition.split(",")) & set(partitions):
                continue
            job = parse_job(
                raw,
                tag=tag,
                partition_max=partition_max,
                unlimited_s=unlimited_s,
                cores=cores,
                newer=newer,
            )
            # An array's tasks not split off yet ("123_[1-10]"): offered one by one below
            tasks = str(raw.get("array_task_string") or "")
            if tasks and number(raw.get("array_task_id")) is None:
                arrays.append((job, str(number(raw.get("array_job_id")) or job.id), tasks))
                continue
            jobs.append(job)
        except (StateParseError, KeyError, TypeError, ValueError, AttributeError) as exc:
            why = str(exc) if isinstance(exc, StateParseError) else f"{type(exc).__name__}: {exc}"
            unreadable.append((_raw_id(raw), str(origin.error(doc, why))))
    for record, array_id, tasks in arrays:
        try:
            jobs.extend(array_tasks(record, array_id, tasks, jobs))
        except ValueError as exc:
            unreadable.append((record.id, str(origin.error(doc, str(exc)))))
    return JobsRead(jobs, tuple(unreadable))


def parse_jobs(doc: Doc, **options: Any) -> list[JobView]:
    """``read_jobs(doc, **options)``'s jobs where every job must be read: StateParseError
    naming the first one that is not."""
    found = read_jobs(doc, **options)
    if found.unreadable:
        raise StateParseError(found.unreadable[0][1])
    return found.jobs


def _raw_id(raw: Any) -> str:
    """The id of a record that may not be a job at all ("?" then)."""
    try:
        return job_id(raw)
    except (KeyError, TypeError, ValueError, AttributeError):
        found = raw.get("job_id") if isinstance(raw, Mapping) else None
        return str(found) if found is not None else "?"
