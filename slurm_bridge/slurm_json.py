"""Read ``squeue --json`` / ``sinfo --json`` (openapi v0.0.38, also slurmrestd's answers)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cpsched.slurm_bridge import hostlist
from cpsched.slurm_bridge.eligibility import slurm_blocked
from cpsched.slurm_bridge.errors import StateParseError
from cpsched.slurm_bridge.model import JobRules, JobView, NodeView
from cpsched.slurm_bridge.slurm_common import (
    is_ending,
    job_state,
    memory_mib,
    node_state,
    set_count,
    start_time,
)
from cpsched.slurm_bridge.slurm_shape import (
    NO_WHOLE_CORES,
    SlurmRequest,
    WholeCores,
    job_shape,
    parse_gres,
    units_on_nodes,
)

Doc = Mapping[str, Any]


def _int(value: Any) -> int | None:
    """JSON numbers; v0.0.38 uses null for "not set" (newer ones wrap in {set, number})."""
    if isinstance(value, dict):
        return int(value["number"]) if value.get("set") and "number" in value else None
    return None if value is None else int(value)


def parse_nodes(doc: Doc, partitions: list[str]) -> dict[str, NodeView]:
    """Nodes of ``sinfo --json`` in the wanted partitions (all when ``partitions`` is [])."""
    try:
        raw_nodes = doc["nodes"]
    except KeyError:
        raise StateParseError("sinfo JSON has no 'nodes' (is this `sinfo --json`?)") from None
    nodes: dict[str, NodeView] = {}
    for raw in raw_nodes:
        parts = tuple(raw.get("partitions") or ())
        if partitions and not set(parts) & set(partitions):
            continue
        capacity = {"cpu": int(raw["cpus"]), "mem": int(raw.get("real_memory") or 0)}
        capacity.update(parse_gres(raw.get("gres")))
        used = {"cpu": int(raw.get("alloc_cpus") or 0), "mem": int(raw.get("alloc_memory") or 0)}
        used.update(parse_gres(raw.get("gres_used")))
        nodes[raw["name"]] = NodeView(
            name=raw["name"],
            capacity=capacity,
            used={r: used.get(r, 0) for r in capacity},
            state=node_state(str(raw.get("state", "")), raw.get("state_flags") or ()),
            partitions=parts,
            features=_words(raw.get("active_features")),
            cpus_per_core=max(1, int(raw.get("threads") or 1)),
        )
    return nodes


def _words(value: Any) -> tuple[str, ...]:
    """A node's features: ``"skylake,ib"`` (or a list, in newer versions) → names."""
    if isinstance(value, list):
        return tuple(str(v) for v in value if v)
    return tuple(w for w in str(value or "").split(",") if w and w != "(null)")


def job_rules(raw: Doc, request: SlurmRequest) -> JobRules:
    """The site's rules on one ``squeue --json`` job (see :class:`JobRules`)."""
    dependency = str(raw.get("dependency") or "")
    return JobRules(
        features=str(raw.get("features") or ""),
        exclusive=str(raw.get("shared") or "") in {"none", "user", "mcs"},
        min_nodes=request.node_count if request.node_count > 1 else None,
        max_nodes=request.max_nodes or None,
        tasks_per_node=request.tasks_per_node,
        reservation=str(raw.get("resv_name") or ""),
        dependency="" if dependency == "(null)" else dependency,
        begin=_int(raw.get("eligible_time")) or None,
        qos=str(raw.get("qos") or ""),
        account=str(raw.get("account") or ""),
        blocked=slurm_blocked(str(raw.get("state_reason") or "")),
    )


def job_id(raw: Doc) -> str:
    """The id scontrol takes: ``123``, or ``123_4`` for an array element."""
    task = _int(raw.get("array_task_id"))
    if task is not None and raw.get("array_job_id"):
        return f"{raw['array_job_id']}_{task}"
    return str(raw["job_id"])


def _mem_from_tres(raw: Doc) -> int | None:
    """Memory per node from ``tres_req_str`` when neither per-CPU nor per-node is set."""
    if _int(raw.get("memory_per_cpu")):
        return None
    match = re.search(r"(?:^|,)mem=([^,]+)", str(raw.get("tres_req_str") or ""))
    total = memory_mib(match.group(1)) if match else None
    return -(-total // max(_int(raw.get("node_count")) or 1, 1)) if total else None


def _cpus_by_node(raw: Doc, names: list[str], threads: Mapping[str, int]) -> dict[str, int]:
    """CPUs a running job holds on each node: Slurm lists its cores, each of ``threads``
    hardware threads (node → threads per core)."""
    resources = raw.get("job_resources") or {}
    counts: dict[str, int] = {}
    for node in resources.get("allocated_nodes") or []:
        cores = sum(
            1
            for socket in (node.get("sockets") or {}).values()
            for state in (socket.get("cores") or {}).values()
            if "allocated" in str(state)
        )
        name = node["nodename"]
        counts[name] = max(cores, 1) * threads.get(name, 1)
    return counts or dict.fromkeys(names, 1)


def parse_job(
    raw: Doc,
    *,
    tag: str,
    partition_max: Mapping[str, int | None],
    unlimited_s: int,
    cores: WholeCores = NO_WHOLE_CORES,
) -> JobView:
    """One job of ``squeue --json``; ``cores`` says where Slurm allocates whole cores."""
    state = job_state(str(raw.get("job_state", "")))
    request = SlurmRequest(
        cpus=_int(raw.get("cpus")) or 1,
        tasks=_int(raw.get("tasks")) or 1,
        node_count=_int(raw.get("node_count")) or 1,
        max_nodes=_int(raw.get("max_nodes")) or 0,
        cpus_per_task=_int(raw.get("cpus_per_task")),
        mem_per_cpu=_int(raw.get("memory_per_cpu")),
        mem_per_node=_int(raw.get("memory_per_node")) or _mem_from_tres(raw),
        gres_per_node=parse_gres(raw.get("tres_per_node")),
        gres_per_task=parse_gres(raw.get("tres_per_task")),
        gres_per_job=parse_gres(raw.get("tres_per_job")),
        tasks_per_node=set_count(_int(raw.get("tasks_per_node"))),
        tasks_per_core=set_count(_int(raw.get("tasks_per_core"))),
        threads_per_core=set_count(_int(raw.get("threads_per_core"))),
        allocated=state != "pending",
    )
    partition = str(raw.get("partition") or "")
    shape = job_shape(request, rounding=cores.for_job(partition))
    limit_min = _int(raw.get("time_limit"))
    if limit_min is None:
        limit_min = partition_max.get(partition)
    limit_s = limit_min * 60 if limit_min else unlimited_s
    nodes = hostlist.expand(str(raw.get("nodes") or ""))
    allocation = {}
    if state == "running" and nodes:
        allocation = units_on_nodes(shape, _cpus_by_node(raw, nodes, cores.node_threads))
    priority = _int(raw.get("priority")) or 0
    tagged = str(raw.get("admin_comment") or "") == tag
    start = _int(raw.get("start_time"))
    end = _int(raw.get("end_time"))
    return JobView(
        id=job_id(raw),
        user=str(raw.get("user_name") or raw.get("user_id") or ""),
        group=str(raw.get("group_name") or ""),
        name=str(raw.get("name") or ""),
        partition=partition,
        state=state,
        submit=_int(raw.get("submit_time")) or 0,
        time_limit_s=max(limit_s, 60),
        shape=shape,
        held_for_us=state == "pending" and tagged and priority == 0,
        tagged=tagged,
        priority=priority,
        reason=str(raw.get("state_reason") or ""),
        ending=is_ending(str(raw.get("job_state", ""))),
        start=start_time(state, start, nodes),
        end=end if state not in {"pending", "running"} and end else None,
        allocation=allocation,
        required_nodes=tuple(hostlist.expand(str(raw.get("required_nodes") or ""))),
        rules=job_rules(raw, request),
    )


def parse_jobs(
    doc: Doc,
    *,
    tag: str,
    partitions: list[str],
    partition_max: Mapping[str, int | None],
    unlimited_s: int,
    cores: WholeCores = NO_WHOLE_CORES,
) -> list[JobView]:
    """Jobs of ``squeue --json`` in the wanted partitions; pending array meta-records skipped."""
    try:
        raw_jobs = doc["jobs"]
    except KeyError:
        raise StateParseError("squeue JSON has no 'jobs' (is this `squeue --json`?)") from None
    jobs: list[JobView] = []
    for raw in raw_jobs:
        partition = str(raw.get("partition") or "")
        if partitions and not set(partition.split(",")) & set(partitions):
            continue
        # A pending array not yet split into elements ("123_[1-10]") cannot be pinned as one.
        if raw.get("array_task_string") and _int(raw.get("array_task_id")) is None:
            continue
        jobs.append(
            parse_job(
                raw, tag=tag, partition_max=partition_max, unlimited_s=unlimited_s, cores=cores
            )
        )
    return jobs
