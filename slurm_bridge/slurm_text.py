"""Read the ``-O`` text formats of squeue and sinfo, for sites without ``--json``.

Fields are separated by a token drawn afresh for every run (``field_separator``) and the
job name comes last, so a name holding ``|`` or line breaks can neither shift the other
columns nor pass for another job's line. The hold tag is not in squeue's ``-O`` fields
(AdminComment is refused there), so it comes from ``scontrol -o show job``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from cpsched.slurm_bridge import hostlist
from cpsched.slurm_bridge.eligibility import slurm_blocked
from cpsched.slurm_bridge.errors import StateParseError
from cpsched.slurm_bridge.model import JobRules, JobView, NodeView
from cpsched.slurm_bridge.slurm_array import array_tasks
from cpsched.slurm_bridge.slurm_common import (
    is_ending,
    job_state,
    memory_mib,
    node_state,
    set_count,
    shown_node_limit,
    split_records,
    start_time,
    time_limit_minutes,
)
from cpsched.slurm_bridge.slurm_shape import (
    NO_WHOLE_CORES,
    SlurmRequest,
    WholeCores,
    job_shape,
    parse_gres,
    units_on_nodes,
)
from cpsched.slurm_bridge.slurm_tag import read_tag

SQUEUE_FIELDS = (
    "JobID",
    "ArrayJobID",
    "ArrayTaskID",
    "UserName",
    "GroupName",
    "Partition",
    "State",
    "Reason",
    "PriorityLong",
    "NumCPUs",
    "NumNodes",
    "NumTasks",
    "cpus-per-task",
    "MinMemory",
    "tres-per-node",
    "tres-per-task",
    "tres-per-job",
    "TimeLimit",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "NodeList",
    "ReqNodes",
    "MaxNodes",
    "Command",
    "WorkDir",
    "Name",
)
PATH_FIELDS = ("Command", "WorkDir")
"""Free text as users wrote it (taken unstripped): in ``scontrol -o show job`` the hold
tag comes right after them."""
SINFO_FIELDS = (
    "NodeList",
    "StateLong",
    "CPUs",
    "Memory",
    "Gres",
    "GresUsed",
    "CPUsState",
    "AllocMem",
    "Features",
    "Threads",
    "Partition",
)


def squeue_argv(squeue: str, separator: str) -> list[str]:
    """``separator``: from ``field_separator``, the same for ``parse_jobs``."""
    spec = ",".join(f"{name}:{separator}" for name in SQUEUE_FIELDS[:-1])
    return [squeue, "-h", "-a", "-t", "all", "-O", f"{spec},{SQUEUE_FIELDS[-1]}:0"]


def sinfo_argv(sinfo: str) -> list[str]:
    spec = ",".join(f"{name}:|" for name in SINFO_FIELDS[:-1]) + f",{SINFO_FIELDS[-1]}:0"
    return [sinfo, "-N", "-h", "-a", "-O", spec]


def _epoch(text: str) -> int | None:
    value = text.strip()
    return int(value) if value.isdigit() else None


def _num(text: str) -> int | None:
    value = text.strip()
    return int(value) if value.isdigit() else None


@dataclass(frozen=True, slots=True)
class JobExtras:
    """What ``squeue -O`` cannot say: the hold tag and whether memory is per CPU."""

    admin_comment: str = ""
    mem_per_cpu: int | None = None
    mem_per_node: int | None = None
    rules: JobRules = field(default_factory=JobRules)
    cpus_by_node: dict[str, int] = field(default_factory=dict)
    """CPUs a running job holds on each node (``-d``'s ``Nodes=… CPU_IDs=…``)."""
    tasks_per_core: int | None = None  # --ntasks-per-core
    threads_per_core: int | None = None  # --threads-per-core, --hint=nomultithread
    asked_nodes: int = 1  # ReqTRES's node=: the least node count asked (-N)
    requeue: bool = False  # Requeue=1: Slurm may put it back in the queue
    restarts: int = 0  # Restarts=: times it went back
    doubtful: bool = False
    """The job's line came more than once (another job's free text copied it): nothing
    in it is believed, so the job is not taken for one held for cpsched."""


@dataclass(frozen=True, slots=True)
class FreeText:
    """A job's fields that its user writes freely, as squeue prints them."""

    name: str
    command: str
    work_dir: str

    @property
    def line_breaks(self) -> int:
        return sum(text.count("\n") for text in (self.name, self.command, self.work_dir))

    @property
    def before_tag(self) -> str:
        """What precedes the AdminComment in the job's ``scontrol -o`` line."""
        return f" Command={self.command} WorkDir={self.work_dir} "


_LINE_HEAD = re.compile(r"^JobId=(\d+)(?: ArrayJobId=(\d+) ArrayTaskId=(\d+))? JobName=")


def job_extras(
    scontrol_show_job: str, known: Mapping[str, FreeText] | None = None
) -> dict[str, JobExtras]:
    """``scontrol -o -d show job`` → job id → AdminComment, memory request, rules and the
    CPUs a running job holds per node.

    Users write some fields freely (name, command, directory, comment, output paths,
    ``--network``) and scontrol prints them as they are, spaces and line breaks included:
    they may look like other fields or other jobs' lines. ``known`` (``squeue_free_text``
    of the jobs that existed before this output was read) gives each job's name, command
    and directory: a job's line runs on over their line breaks; its fields are read
    between its name and its first free text after it (``Network``), and its AdminComment
    only right after its command and directory. A job not known is passed over. A job is
    ``doubtful`` when its line comes twice, or starts with a name other than the known
    one (renamed between the reads: its line breaks cannot be followed). Without
    ``known`` every line is read through.
    """
    found: dict[str, JobExtras] = {}
    doubtful: set[str] = set()
    lines = scontrol_show_job.split("\n")  # not splitlines: a name may hold \r or \x85
    at = 0
    while at < len(lines):
        line = lines[at]
        at += 1
        head = _LINE_HEAD.match(line)
        if not head:
            continue
        job_id, array_id, task_id = head.groups()
        key = f"{array_id}_{task_id}" if array_id else job_id
        texts = None if known is None else known.get(job_id)
        if known is not None and texts is None:
            continue
        fields = line[head.end() :]
        if texts is not None:
            joined = "\n".join(lines[at - 1 : at + texts.line_breaks])[head.end() :]
            after = _after_name(joined, texts.name)
            if after is None:
                doubtful.add(key)
                continue
            fields, at = after, at + texts.line_breaks
        if key in found:
            doubtful.add(key)
        found[key] = _extras(fields, texts)
    return found | {key: JobExtras(doubtful=True) for key in doubtful}


def _extras(fields: str, texts: FreeText | None) -> JobExtras:
    """One job's fields after its name (``texts``: its free text, when known)."""
    rest = " " + fields
    own = rest[: min(_at(rest, " Network="), _at(rest, " Command="))]
    if texts is None:
        comment = re.search(r"\sAdminComment=(\S*)", rest)
    elif rest.count(texts.before_tag) == 1:
        comment = re.match(r"AdminComment=(\S*)", rest.split(texts.before_tag)[1])
    else:
        comment = None
    per_cpu = re.search(r"\sMinMemoryCPU=(\S+)", own)
    per_node = re.search(r"\sMinMemoryNode=(\S+)", own)
    return JobExtras(
        admin_comment=comment.group(1) if comment else "",
        mem_per_cpu=memory_mib(per_cpu.group(1)) if per_cpu else None,
        mem_per_node=memory_mib(per_node.group(1)) if per_node else None,
        rules=_rules(own),
        cpus_by_node=_cpus_by_node(own),
        tasks_per_core=_per_core(own),
        threads_per_core=_per_thread(own),
        asked_nodes=_tres_nodes(own),
        requeue=re.search(r"\sRequeue=1\b", own) is not None,
        restarts=int(restarts.group(1)) if (restarts := re.search(r"\sRestarts=(\d+)", own)) else 0,
    )


def _tres_nodes(line: str) -> int:
    """The node count of a job's requested TRES (``ReqTRES=cpu=3,...,node=2``); 1 if none."""
    match = re.search(r"(?:^|,)node=(\d+)", _value(line, "ReqTRES"))
    return int(match.group(1)) if match else 1


def _at(text: str, key: str) -> int:
    """Where ``key`` first is in ``text``; its length when it is not there."""
    found = text.find(key)
    return len(text) if found < 0 else found


def _after_name(fields: str, name: str) -> str | None:
    """The fields after a job's name (``fields`` starts with it), when they do start with
    it and ``UserId=`` follows (squeue pads names, so trailing spaces are lost)."""
    if fields.startswith(name):
        after = fields[len(name) :].lstrip(" ")
        if after.startswith("UserId="):
            return after
    return None


def _squeue_rows(text: str, separator: str) -> Iterator[tuple[dict[str, str], str]]:
    """``squeue_argv``'s records → (field → value, name); the name, the last column, and
    the ``PATH_FIELDS`` are taken as they are (``|`` and line breaks included)."""
    for cols in split_records(text, separator, len(SQUEUE_FIELDS), "squeue"):
        row = dict(zip(SQUEUE_FIELDS, cols[:-1], strict=False))
        yield (
            {key: value if key in PATH_FIELDS else value.strip() for key, value in row.items()},
            cols[-1].rstrip(" "),
        )


def squeue_free_text(
    squeue_text: str, separator: str, *, submitted_before: int | None = None
) -> dict[str, FreeText]:
    """Job id → its name, command and directory from ``squeue_argv``'s records; with
    ``submitted_before`` (epoch seconds), only of jobs submitted before then."""
    return {
        row["JobID"]: FreeText(name=name, command=row["Command"], work_dir=row["WorkDir"])
        for row, name in _squeue_rows(squeue_text, separator)
        if submitted_before is None or (_epoch(row["SubmitTime"]) or 0) < submitted_before
    }


def _per_thread(line: str) -> int | None:
    """``ReqB:S:C:T=0:0:*:1`` → 1 (``--threads-per-core``); None when not set."""
    threads = _value(line, "ReqB:S:C:T").split(":")[-1]
    return set_count(int(threads)) if threads.isdigit() else None


def _per_core(line: str) -> int | None:
    """``NtasksPerN:B:S:C=0:0:*:1`` → 1 (``--ntasks-per-core``); None when not set."""
    per_core = _value(line, "NtasksPerN:B:S:C").split(":")[-1]
    return set_count(int(per_core)) if per_core.isdigit() else None


def _cpus_by_node(line: str) -> dict[str, int]:
    """``Nodes=node[1-2] CPU_IDs=0-3,6`` pairs → node → CPU count (5 each here)."""
    counts: dict[str, int] = {}
    for nodes, ids in re.findall(r"\sNodes=(\S+) CPU_IDs=(\S+)", line):
        count = 0
        for part in ids.split(","):
            low, _, high = part.partition("-")
            if not low.isdigit() or not (high or low).isdigit():
                return {}  # not understood: the even share is used
            count += int(high or low) - int(low) + 1
        for name in hostlist.expand(nodes):
            counts[name] = count
    return counts


def _value(line: str, key: str) -> str:
    """One ``Key=value`` of a ``scontrol -o`` line; "" when absent or ``(null)``."""
    match = re.search(rf"(?:^|\s){re.escape(key)}=(\S*)", line)
    value = match.group(1) if match else ""
    return "" if value in {"(null)", "N/A", "Unknown", "None"} else value


def _rules(line: str) -> JobRules:
    """The site's rules from a ``scontrol -o show job`` line (run with
    ``SLURM_TIME_FORMAT=%s``, so times are epoch seconds)."""
    nodes = re.search(r"\sNumNodes=(\d+)(?:-(\d+))?\s", line)
    low = int(nodes.group(1)) if nodes else 1
    per_node = _value(line, "NtasksPerN:B:S:C").split(":")[0]
    begin = _value(line, "EligibleTime")
    return JobRules(
        features=_value(line, "Features"),
        exclusive=_value(line, "OverSubscribe") in {"NO", "USER", "MCS"},
        min_nodes=low if low > 1 else None,
        max_nodes=int(nodes.group(2)) if nodes and nodes.group(2) else None,
        tasks_per_node=set_count(int(per_node)) if per_node.isdigit() else None,
        reservation=_value(line, "Reservation"),
        dependency=_value(line, "Dependency"),
        begin=int(begin) if begin.isdigit() else None,
        qos=_value(line, "QOS"),
        account=_value(line, "Account"),
    )


def parse_nodes(text: str, partitions: list[str]) -> dict[str, NodeView]:
    """``sinfo -N -O`` lines → nodes (one line per node and partition)."""
    nodes: dict[str, NodeView] = {}
    parts_of: dict[str, set[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        cols = line.split("|")
        if len(cols) != len(SINFO_FIELDS):
            raise StateParseError(f"sinfo line has {len(cols)} fields, not {len(SINFO_FIELDS)}")
        (
            name,
            state,
            cpus,
            mem,
            gres,
            gres_used,
            cpus_state,
            alloc_mem,
            features,
            threads,
            partition,
        ) = (c.strip() for c in cols)
        partition = partition.rstrip("*")
        parts_of.setdefault(name, set()).add(partition)
        if partitions and not parts_of[name] & set(partitions):
            continue
        capacity = {"cpu": int(cpus), "mem": int(mem.rstrip("+") or 0)}
        capacity.update(parse_gres(gres))
        used = {"cpu": int(cpus_state.split("/")[0]), "mem": _num(alloc_mem) or 0}
        used.update(parse_gres(gres_used))
        nodes[name] = NodeView(
            name=name,
            capacity=capacity,
            used={r: used.get(r, 0) for r in capacity},
            state=node_state(state),
            partitions=tuple(sorted(parts_of[name])),
            features=tuple(w for w in features.split(",") if w and w != "(null)"),
            cpus_per_core=max(1, _num(threads) or 1),
        )
    return nodes


def parse_jobs(
    text: str,
    *,
    separator: str,
    extras: Mapping[str, JobExtras],
    tag: str,
    partitions: list[str],
    partition_max: Mapping[str, int | None],
    unlimited_s: int,
    cores: WholeCores = NO_WHOLE_CORES,
    estimated_limits: bool = False,
) -> list[JobView]:
    """``squeue_argv``'s records (run with ``SLURM_TIME_FORMAT=%s``) → jobs; ``cores``
    says where Slurm allocates whole cores; ``estimated_limits``: Slurm shows a pending
    job's estimated node count as its maximum (23.11 on: ``shown_node_limit``)."""
    jobs: list[JobView] = []
    arrays: list[tuple[JobView, str, str]] = []  # pending tasks' record, array id, tasks
    for row, name in _squeue_rows(text, separator):
        if partitions and not set(row["Partition"].split(",")) & set(partitions):
            continue
        task = row["ArrayTaskID"]
        tasks = task if task not in {"N/A", ""} and not task.isdigit() else ""
        job_id = f"{row['ArrayJobID']}_{task}" if task.isdigit() else row["JobID"]
        if tasks:  # an array's tasks not split off yet: offered one by one below
            job_id = row["ArrayJobID"]
        extra = extras.get(job_id, JobExtras())
        hold = read_tag(extra.admin_comment, tag)
        state = job_state(row["State"])
        cpus_per_task = _num(row["cpus-per-task"])
        limit = hold.node_limit(
            shown_node_limit(
                extra.rules.max_nodes or 0,
                extra.rules.min_nodes or 1,
                packed_as_asked=bool(
                    extra.rules.tasks_per_node or extra.tasks_per_core or (cpus_per_task or 1) > 1
                ),
                asked_nodes=extra.asked_nodes,
                estimated=estimated_limits and state == "pending",
            )
            or None
        )
        request = SlurmRequest(
            cpus=_num(row["NumCPUs"]) or 1,
            tasks=_num(row["NumTasks"]) or 1,
            node_count=_num(row["NumNodes"]) or 1,
            # squeue -O MaxNodes prints the node count when no maximum was asked for
            max_nodes=limit or 0 if job_id in extras else _num(row["MaxNodes"]) or 0,
            cpus_per_task=cpus_per_task,
            mem_per_cpu=extra.mem_per_cpu,
            mem_per_node=extra.mem_per_node,
            gres_per_node=parse_gres(row["tres-per-node"]),
            gres_per_task=parse_gres(row["tres-per-task"]),
            gres_per_job=parse_gres(row["tres-per-job"]),
            tasks_per_node=extra.rules.tasks_per_node,
            tasks_per_core=extra.tasks_per_core,
            threads_per_core=extra.threads_per_core,
            allocated=state != "pending",
        )
        shape = job_shape(request, rounding=cores.for_job(row["Partition"]))
        limit_min = time_limit_minutes(row["TimeLimit"])
        if limit_min is None:
            limit_min = partition_max.get(row["Partition"])
        nodes = hostlist.expand(row["NodeList"])
        cpus_each = max(1, (_num(row["NumCPUs"]) or 1) // max(len(nodes), 1))
        priority = _num(row["PriorityLong"]) or 0
        tagged = hold.tagged
        job = JobView(
            id=job_id,
            user=row["UserName"],
            group=row["GroupName"],
            name=name,
            partition=row["Partition"],
            state=state,
            submit=_epoch(row["SubmitTime"]) or 0,
            time_limit_s=max(limit_min * 60 if limit_min else unlimited_s, 60),
            shape=shape,
            held_for_us=state == "pending" and tagged and priority == 0,
            tagged=tagged,
            priority=priority,
            reason=row["Reason"],
            ending=is_ending(row["State"]),
            start=start_time(state, _epoch(row["StartTime"]), nodes),
            end=_epoch(row["EndTime"]) if state not in {"pending", "running"} else None,
            allocation=units_on_nodes(
                shape,
                held_per_node(extra.cpus_by_node, nodes, _num(row["NumCPUs"]))
                or dict.fromkeys(nodes, cpus_each),
            )
            if state == "running"
            else {},
            required_nodes=tuple(hostlist.expand(row["ReqNodes"])),
            rules=replace(
                extra.rules,
                max_nodes=limit,
                blocked=slurm_blocked(row["Reason"]),
            ),
            requeue=extra.requeue,
            restarts=extra.restarts,
        )
        if tasks:
            arrays.append((job, row["ArrayJobID"], tasks))
        else:
            jobs.append(job)
    for record, array_id, tasks in arrays:
        try:
            jobs.extend(array_tasks(record, array_id, tasks, jobs))
        except ValueError as exc:
            raise StateParseError(f"squeue: job {array_id}: {exc}") from None
    return jobs


def held_per_node(
    cpus_by_node: dict[str, int], nodes: list[str], total: int | None
) -> dict[str, int]:
    """The per-node CPUs read from ``scontrol -d`` when they are the job's own: on the
    nodes squeue lists and adding up to its CPU count (a job name can hold any text,
    ``Nodes=… CPU_IDs=…`` included); {} otherwise."""
    if set(cpus_by_node) != set(nodes) or sum(cpus_by_node.values()) != total:
        return {}
    return cpus_by_node
