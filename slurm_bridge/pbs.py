"""PBS Pro / OpenPBS adapter: ``qstat -f -F json``, ``pbsnodes -av -F json``, qrun/qalter.

Same interface as the Slurm backend. Conventions (see docs/bridge.md, PBS section):
a ``queuejob`` hook puts every new job on an *operator* hold (``Hold_Types=o``, which
users cannot release and PBS's dependencies do not touch: those use the system hold
``s``) and sets the custom resource ``Resource_List.<tag>=True``; the bridge (a PBS
Operator or Manager) starts a held job with ``qrun -H <exec_vnode spec>`` alone: a
release first would wake PBS's own scheduler, which would start the job on its own vnodes
before ``qrun``.
A job also held by its user (``u``) or by PBS (``s``: a dependency) is not cpsched's yet.

Resources: ``ncpus`` → cpu, ``mem`` → mem (MiB), ``ngpus`` → gpu; a job's
``select=N:ncpus=a:mem=b:ngpus=c`` gives N units of that chunk. The service's nodes are
PBS's hosts (``pbs_hosts``: PBS places chunks per host): ``place=scatter`` means one
chunk per host, ``place=pack`` one host, ``excl`` whole hosts (shared with no other
job). ``qrun -H`` names one chunk per ``select`` chunk, in the select's order, each laid
on its host's vnodes. A vnode with no cpus (a mom's natural vnode when its vnodes are
defined) is left out. Reservations (``pbs_rsub``) are read from ``pbs_rstat -f``.

Site rules: a queue whose vnodes name it (the vnode attribute ``queue``) runs only on
them, any other queue on the vnodes that name no queue (PBS's node-queue association);
a job with a ``depend`` attribute waits until each job it names has ended as asked
(``afterok``: exit 0; ``afternotok``: not 0; ``afterany``: ended; ``after``: started),
read from the same ``qstat -x`` listing: PBS itself keeps such a job on a system hold,
which the bridge must never take for its own. A queue's ``resources_max.walltime`` and
``nodect`` (``qstat -Q -f``) are its partition's limits, and the jobs of a stopped queue
(``started = False``) are held back.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cpsched.slurm_bridge.backend import ExactSplit
from cpsched.slurm_bridge.errors import BridgeConfigError, StateParseError
from cpsched.slurm_bridge.model import (
    Amounts,
    ClusterState,
    JobRules,
    JobShape,
    JobView,
    NodeStateName,
    NodeView,
    PartitionView,
)
from cpsched.slurm_bridge.pbs_hosts import HostLayout, Vnode
from cpsched.slurm_bridge.pbs_reservations import is_reservation_queue, parse_reservations
from cpsched.slurm_bridge.pbs_units import pbs_time, size_mib, walltime_s, walltime_text
from cpsched.slurm_bridge.refresh import Refreshed
from cpsched.slurm_bridge.runner import Runner

RESOURCE_OF = {"ncpus": "cpu", "mem": "mem", "ngpus": "gpu"}
PBS_NAME_OF = {v: k for k, v in RESOURCE_OF.items()}
_STATE = {
    "Q": "pending",
    "H": "pending",
    "W": "pending",
    "T": "pending",
    "S": "running",
    "R": "running",
    "E": "running",
    "B": "running",
    "U": "pending",
}
QUEUES_TTL_S = 60.0
HOLD = "o"
"""The hold the kit's hook puts on every job: an operator hold, which users cannot lift
and PBS's dependencies (system holds) leave alone."""


def _amounts(resources: Mapping[str, Any]) -> Amounts:
    out: Amounts = {}
    for pbs_name, name in RESOURCE_OF.items():
        if pbs_name in resources:
            out[name] = size_mib(resources[pbs_name]) if name == "mem" else int(resources[pbs_name])
    return out


def node_state(state: str) -> NodeStateName:
    words = {w.strip() for w in state.split(",")}
    if words & {
        "down",
        "state-unknown",
        "unresolvable",
        "stale",
        "provisioning",
        "wait-provisioning",
    }:
        return "down"
    if "offline" in words or "maintenance" in words:
        return "drain"
    if words & {"resv-exclusive"}:
        return "reserved"
    return "up"


def parse_vnodes(doc: Mapping[str, Any], queues: list[str]) -> list[Vnode]:
    """``pbsnodes -av -F json`` → its vnodes that run jobs (of ``queues``, when given)."""
    try:
        raw_nodes = doc["nodes"]
    except KeyError:
        raise StateParseError(
            "pbsnodes JSON has no 'nodes' (is this `pbsnodes -av -F json`?)"
        ) from None
    vnodes: list[Vnode] = []
    for name, raw in raw_nodes.items():
        queue = str(raw.get("queue") or "")
        if queues and queue and queue not in queues:
            continue
        available = raw.get("resources_available", {})
        capacity = _amounts(available)
        capacity.setdefault("cpu", int(raw.get("pcpus", 0)))
        if capacity["cpu"] <= 0:
            continue  # runs nothing: a mom's natural vnode beside its defined vnodes
        used = _amounts(raw.get("resources_assigned", {}))
        vnodes.append(
            Vnode(
                name=name,
                host=str(available.get("host") or raw.get("Mom") or name),
                queue=queue,
                capacity=capacity,
                used={r: used.get(r, 0) for r in capacity},
                state=node_state(str(raw.get("state", ""))),
            )
        )
    return vnodes


def parse_nodes(doc: Mapping[str, Any], queues: list[str]) -> dict[str, NodeView]:
    """The nodes the service is sent: one per PBS host (and queue), see ``pbs_hosts``."""
    return HostLayout.of(parse_vnodes(doc, queues)).nodes()


def _chunk(spec: str) -> tuple[int, Amounts]:
    """``"2:ncpus=4:mem=8gb"`` → (2, {"cpu": 4, "mem": 8192})."""
    count = 1
    resources: dict[str, Any] = {}
    for i, part in enumerate(spec.split(":")):
        if "=" in part:
            key, value = part.split("=", 1)
            resources[key] = value
        elif i == 0 and part.isdigit():
            count = int(part)
    return count, _amounts(resources)


def select_chunks(resource_list: Mapping[str, Any]) -> list[Amounts]:
    """The job's chunks one by one, in its ``select``'s order (``2:ncpus=4+1:ncpus=8`` →
    three); a job without ``select`` is one chunk of its job-wide resources."""
    select = str(resource_list.get("select") or "")
    if not select:
        return [_amounts(resource_list) or {"cpu": 1}]
    return [
        dict(amounts) for count, amounts in map(_chunk, select.split("+")) for _ in range(count)
    ]


def job_shape(resource_list: Mapping[str, Any]) -> JobShape:
    select = str(resource_list.get("select") or "")
    place = str(resource_list.get("place") or "free")
    if select:
        chunks = [_chunk(spec) for spec in select.split("+")]
        units = sum(count for count, _ in chunks)
        per_unit: Amounts = {}
        for _, amounts in chunks:  # different chunk kinds: the largest of each (safe side)
            for name, amount in amounts.items():
                per_unit[name] = max(per_unit.get(name, 0), amount)
    else:
        units, per_unit = 1, _amounts(resource_list)
    per_unit.setdefault("cpu", 1)
    if "pack" in place or units == 1:
        whole = {name: amount * units for name, amount in per_unit.items()}
        return JobShape(units=1, per_unit=whole, single_node=True)
    return JobShape(units=units, per_unit=per_unit, one_unit_per_node="scatter" in place)


def is_exclusive(resource_list: Mapping[str, Any]) -> bool:
    """``place=...:excl`` (or ``exclhost``): the job's vnodes are shared with no other job."""
    return any(
        word in {"excl", "exclhost"} for word in str(resource_list.get("place", "")).split(":")
    )


_ENDED = {"F", "X"}


def unmet_dependencies(depend: str, jobs: Mapping[str, Any]) -> str:
    """The parts of a ``depend`` attribute not met by the jobs of ``jobs`` (the qstat -x
    listing, by id); "" when all are. A job not in the listing is taken as not ended."""
    unmet: list[str] = []
    for clause in depend.split(","):
        kind, _, ids = clause.partition(":")
        if not kind.startswith("after"):
            continue  # before*: the other jobs wait for this one, not this one for them
        for other in ids.split(":"):
            other_id = other.split("@", 1)[0]
            raw = jobs.get(other_id) or {}
            state = str(raw.get("job_state", ""))
            ended = state in _ENDED
            code = int(raw.get("Exit_status", 0) or 0)
            met = {
                "after": state in {"R", "E"} or ended,
                "afterany": ended,
                "afterok": ended and code == 0,
                "afternotok": ended and code != 0,
            }.get(kind, False)
            if not met:
                unmet.append(f"{kind}:{other_id}")
    return ",".join(unmet)


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """What ``qstat -Q -f -F json`` says of an execution queue that the dispatch needs."""

    max_walltime_s: int | None = None  # resources_max.walltime
    max_nodes: int | None = None  # resources_max.nodect
    started: bool = True  # a stopped queue keeps its jobs: PBS runs none of them


def parse_queues(doc: Mapping[str, Any]) -> dict[str, QueueLimits]:
    """``qstat -Q -f -F json`` → each execution queue's limits (route queues run nothing)."""
    found: dict[str, QueueLimits] = {}
    for name, raw in (doc.get("Queue") or {}).items():
        if str(raw.get("queue_type", "Execution")).lower() != "execution":
            continue
        most = raw.get("resources_max") or {}
        nodect = str(most.get("nodect") or "")
        found[name] = QueueLimits(
            max_walltime_s=walltime_s(most.get("walltime")),
            max_nodes=int(nodect) if nodect.isdigit() else None,
            started=str(raw.get("started", "True")).lower() == "true",
        )
    return found


def unrouted_held_queues(doc: Mapping[str, Any]) -> list[str]:
    """Enabled route queues of ``qstat -Q -f -F json`` that do not route held jobs (PBS's
    default): the jobs the hook holds in them would stay there."""
    return sorted(
        name
        for name, raw in (doc.get("Queue") or {}).items()
        if str(raw.get("queue_type", "")).lower() == "route"
        and str(raw.get("enabled", "True")).lower() == "true"
        and str(raw.get("route_held_jobs", "False")).lower() != "true"
    )


def queue_partitions(
    nodes: Mapping[str, NodeView],
    queues: set[str],
    limits: Mapping[str, QueueLimits] | None = None,
) -> dict[str, PartitionView]:
    """Each queue's vnodes (those naming it, else those naming no queue) and limits."""
    free_for_all = tuple(name for name, node in nodes.items() if not node.partitions)
    partitions: dict[str, PartitionView] = {}
    for queue in sorted(q for q in queues if not is_reservation_queue(q)):
        own = tuple(name for name, node in nodes.items() if queue in node.partitions)
        limit = (limits or {}).get(queue, QueueLimits())
        partitions[queue] = PartitionView(
            queue, own or free_for_all, max_time_s=limit.max_walltime_s, max_nodes=limit.max_nodes
        )
    return partitions


def hold_back_by_queue(jobs: list[JobView], limits: Mapping[str, QueueLimits]) -> list[JobView]:
    """``jobs`` with each pending job PBS would not run where it is marked as blocked: in a
    stopped queue (``started = False``), or in a route queue (it runs once routed on to
    an execution queue; ``qrun`` refuses it there). ``limits``: the execution queues."""
    if not limits:
        return jobs  # the queues could not be read: nothing to judge by

    def why(job: JobView) -> str:
        if job.partition not in limits:
            return f"queue {job.partition} is not an execution queue: the job is routed first"
        if not limits[job.partition].started:
            return f"queue {job.partition} is stopped"
        return ""

    out: list[JobView] = []
    for job in jobs:
        reason = why(job) if job.state == "pending" and not job.rules.blocked else ""
        out.append(replace(job, rules=replace(job.rules, blocked=reason)) if reason else job)
    return out


def exec_vnode_chunks(exec_vnode: str) -> list[str]:
    """``"(n1:ncpus=4)+(n1:ncpus=2+n2:ncpus=2)"`` → ["n1", "n1"]: each chunk's first vnode
    (a chunk may span vnodes of its host)."""
    return [chunk.split(":", 1)[0] for chunk in re.findall(r"\(([^)]*)\)", exec_vnode)]


def parse_jobs(
    doc: Mapping[str, Any],
    *,
    tag: str,
    queues: list[str],
    unlimited_s: int,
    layout: HostLayout | None = None,
) -> list[JobView]:
    """``qstat -t -f -x -F json`` → its jobs; a running job's chunks counted per node of
    ``layout`` (its hosts), else per vnode."""
    hosts = layout or HostLayout()
    jobs: list[JobView] = []
    all_jobs = doc.get("Jobs") or {}
    for job_id, raw in all_jobs.items():
        queue = str(raw.get("queue") or "")
        if queues and queue not in queues:
            continue
        if raw.get("array") == "True" and "[]" in job_id:
            continue  # array parent: its subjobs are listed and started one by one
        state_code = str(raw.get("job_state", ""))
        resources = raw.get("Resource_List") or {}
        shape = job_shape(resources)
        if state_code in {"F", "X"}:
            exit_status = raw.get("Exit_status")
            if exit_status is None or not raw.get("stime"):
                state = "cancelled"  # deleted before it started: no exit status
            else:
                code = int(exit_status or 0)
                state = "completed" if code == 0 else "cancelled" if code in {-1, 271} else "failed"
        else:
            state = _STATE.get(state_code, "other")
        allocation = (
            hosts.chunks_per_node(exec_vnode_chunks(str(raw.get("exec_vnode") or "")))
            if state == "running"
            else {}
        )
        if allocation and shape.single_node:
            allocation = {next(iter(allocation)): 1}
        holds = set(str(raw.get("Hold_Types") or "n")) - {"n"}
        # A reservation's jobs are PBS's own (the hook leaves them): cpsched only keeps
        # other jobs out of the reservation's window.
        in_reservation = is_reservation_queue(queue)
        tagged = str(resources.get(tag, "")).lower() == "true" and not in_reservation
        rules = JobRules(
            exclusive=is_exclusive(resources),
            dependency=unmet_dependencies(str(raw.get("depend") or ""), all_jobs),
            reservation=queue if in_reservation else "",
        )
        jobs.append(
            JobView(
                id=job_id,
                user=str(raw.get("euser") or str(raw.get("Job_Owner", "")).split("@")[0]),
                group=str(raw.get("egroup") or ""),
                name=str(raw.get("Job_Name") or ""),
                partition=queue,
                state=state,
                submit=pbs_time(raw.get("qtime") or raw.get("ctime")) or 0,
                time_limit_s=walltime_s(resources.get("walltime")) or unlimited_s,
                shape=shape,
                # Only cpsched's own hold: a user's (u) or a dependency's (s) comes first.
                # An array's subjobs show Q under their held array, with its holds.
                held_for_us=state_code in {"H", "Q"} and holds == {HOLD} and tagged,
                tagged=tagged,
                priority=int(raw.get("Priority", 0) or 0),
                reason=str(raw.get("comment") or ""),
                start=pbs_time(raw.get("stime")) if state != "pending" else None,
                end=pbs_time(raw.get("obittime") or raw.get("mtime"))
                if state_code == "F"
                else None,
                allocation=allocation,
                rules=rules,
                requeue=raw.get("Rerunable") == "True",
                restarts=_restarts(raw, state),
            )
        )
    return jobs


def _restarts(raw: Mapping[str, Any], state: str) -> int:
    """Times the job went back to the queue: PBS counts its runs (``run_count``), the one
    under way included while it runs."""
    runs = int(raw.get("run_count") or 0)
    return max(runs - 1, 0) if state == "running" else runs


def _piece_text(vnode: str, amounts: Amounts) -> str:
    return ":".join(
        [vnode]
        + [
            f"{PBS_NAME_OF[r]}={a}mb" if r == "mem" else f"{PBS_NAME_OF[r]}={a}"
            for r, a in amounts.items()
            if r in PBS_NAME_OF and a > 0
        ]
    )


def exec_spec(
    job_id: str,
    allocation: Mapping[str, int],
    chunks: list[Amounts],
    layout: HostLayout,
    *,
    one_node: bool,
    whole_chunks: bool = False,
) -> str:
    """``qrun -H`` spec: each of the job's ``chunks`` (its select's, in order) on a node
    of ``allocation`` (node → units), laid onto that host's vnodes by ``layout``;
    ``one_node``: every chunk on its single node (``place=pack`` or a single chunk);
    ``whole_chunks``: no chunk split over vnodes (``place=vscatter``)."""
    if one_node:
        nodes = [next(iter(allocation))] * len(chunks)
    else:
        nodes = [node for node, units in allocation.items() for _ in range(units)]
    if len(nodes) != len(chunks):
        raise StateParseError(
            f"the decided allocation has {len(nodes)} units, the job {len(chunks)} chunks"
        )
    laid = (
        layout.lay(job_id, node, chunk, whole=whole_chunks)
        for node, chunk in zip(nodes, chunks, strict=True)
    )
    return "+".join(f"({'+'.join(_piece_text(v, a) for v, a in pieces)})" for pieces in laid)


def array_of(job_id: str) -> str:
    """The array a subjob belongs to (``"12[3].srv"`` → ``"12[].srv"``), else the job."""
    return re.sub(r"\[\d+\]", "[]", job_id, count=1)


def qalter_walltime_argv(job_id: str, seconds: int) -> list[str]:
    return ["qalter", "-l", f"walltime={walltime_text(seconds)}", job_id]


@dataclass
class PbsBackend:
    runner: Runner
    tag: str = "extsched"
    queues: list[str] = field(default_factory=list)
    unlimited_s: int = 7 * 86400
    name: str = "pbs"
    splits_tasks: bool = False
    pins_splits: bool = False  # qrun -H runs the exact allocation: nothing to pin
    finished_forgeable: bool = False  # ended jobs come from qstat -x, in JSON
    ends_trials: bool = True  # qrerun: the job keeps the hook's hold while it runs
    _last: ClusterState | None = None
    _chunks: dict[str, list[Amounts]] = field(default_factory=dict)
    _vscatter: set[str] = field(default_factory=set)  # held jobs whose chunks take a vnode each
    _layout: HostLayout = field(default_factory=HostLayout)
    _checked_server: bool = False
    _released: set[str] = field(default_factory=set)  # arrays released since the last read
    _queues: Refreshed[dict[str, QueueLimits]] = field(init=False)

    def __post_init__(self) -> None:
        # The queues' limits change by hand, rarely.
        self._queues = Refreshed(
            "queues",
            QUEUES_TTL_S,
            lambda: parse_queues(json.loads(self.runner.run(["qstat", "-Q", "-f", "-F", "json"]))),
        )

    def check_server(self) -> None:
        """Refuse a server the bridge cannot work with, once, before the first read:
        without job history ``qstat -x`` lists no ended job (and exits 0), so finished
        jobs would never be reported and dependencies never met."""
        doc = json.loads(self.runner.run(["qstat", "-B", "-f", "-F", "json"]))
        for name, server in (doc.get("Server") or {}).items():
            if str(server.get("job_history_enable", "False")).lower() != "true":
                raise BridgeConfigError(
                    f"PBS server {name} keeps no job history: the bridge cannot see jobs "
                    "end; as a PBS Manager run qmgr -c 'set server job_history_enable=True'"
                )
        queues = json.loads(self.runner.run(["qstat", "-Q", "-f", "-F", "json"]))
        stuck = unrouted_held_queues(queues)
        if stuck:
            raise BridgeConfigError(
                f"route queue(s) {', '.join(stuck)} keep held jobs: a job the hook holds there "
                "would never reach an execution queue; as a PBS Manager run "
                + "; ".join(f"qmgr -c 'set queue {q} route_held_jobs=True'" for q in stuck)
            )
        self._checked_server = True

    def read_state(self) -> ClusterState:
        if not self._checked_server:
            self.check_server()
        nodes_doc = json.loads(self.runner.run(["pbsnodes", "-av", "-F", "json"]))
        # -t: an array's subjobs, one by one (without it only the array is listed).
        jobs_doc = json.loads(self.runner.run(["qstat", "-t", "-f", "-x", "-F", "json"]))
        self._layout = HostLayout.of(parse_vnodes(nodes_doc, self.queues))
        nodes = self._layout.nodes()
        jobs = parse_jobs(
            jobs_doc,
            tag=self.tag,
            queues=self.queues,
            unlimited_s=self.unlimited_s,
            layout=self._layout,
        )
        raw_jobs = jobs_doc.get("Jobs") or {}
        self._released = set()
        self._chunks = {
            job.id: select_chunks(raw_jobs[job.id].get("Resource_List") or {})
            for job in jobs
            if job.held_for_us
        }
        self._vscatter = {
            job_id
            for job_id in self._chunks
            if "vscatter" in str((raw_jobs[job_id].get("Resource_List") or {}).get("place", ""))
        }
        limits = self._queues.get()
        state = ClusterState(
            time=int(time.time()),
            nodes=nodes,
            jobs=hold_back_by_queue(jobs, limits),
            partitions=queue_partitions(nodes, {j.partition for j in jobs if j.partition}, limits),
            reservations=parse_reservations(self.runner.run(["pbs_rstat", "-f"]), self._layout),
        )
        self._last = state
        return state

    def start(
        self,
        job_id: str,
        allocation: Mapping[str, int],
        *,
        cpus_per_node: int | None = None,
        partition: str | None = None,
        exact: ExactSplit | None = None,
    ) -> None:
        # qrun -H names every chunk and its host: PBS runs exactly this allocation.
        for argv in self.start_allocation(job_id, allocation):
            self.runner.run(argv)

    def settle(self, state: ClusterState) -> list[str]:
        return []  # qrun -H pins nothing that outlives the start

    def start_allocation(self, job_id: str, allocation: Mapping[str, int]) -> list[list[str]]:
        """The commands that start the job on this exact allocation: ``qrun -H`` on the
        still-held job (which keeps its hold while it runs), its chunks laid onto the
        chosen hosts' vnodes; what they take is no longer free to this cycle's next starts."""
        job = self._last.job(job_id) if self._last else None
        chunks = self._chunks.get(job_id)
        if job is None or chunks is None:
            raise StateParseError(f"job {job_id} unknown; read state first")
        spec = exec_spec(
            job_id,
            allocation,
            chunks,
            self._layout,
            one_node=job.shape.single_node,
            whole_chunks=job_id in self._vscatter,
        )
        return [["qrun", "-H", spec, job_id]]

    def hold(self, job_id: str, *, unpin: bool) -> None:
        self.runner.run(["qhold", "-h", HOLD, array_of(job_id)])

    def requeue_hold(self, job_id: str) -> None:
        # The hook's operator hold stays on the job while it runs (qrun starts it held):
        # put back, it is held for cpsched again, and PBS's scheduler leaves it alone.
        self.runner.run(["qrerun", job_id])

    def release_to_native(self, job_id: str) -> None:
        # An array's holds are its own, not its subjobs': released once for them all.
        target = array_of(job_id)
        if target in self._released:
            return
        self.runner.run(["qrls", "-h", HOLD, target])
        self._released.add(target)

    def extend(self, job_id: str, new_limit_s: int) -> None:
        self.runner.run(qalter_walltime_argv(job_id, new_limit_s))

    def finished_jobs(self, state: ClusterState) -> list[JobView]:
        return [j for j in state.finished if j.start and j.end]
