"""Wire snapshots as dispatch-core snapshots, the service's way in: the machine, the
running jobs and the queue (wire jobs one by one: :mod:`cpsched.runtime.codec_jobs`;
decisions out: :mod:`cpsched.runtime.codec_decision`; the other way, what a client such
as the replay over HTTP sends and reads: :mod:`cpsched.runtime.codec_client`).

A snapshot from a real workload manager is never quite tidy: nodes drain, a node may be
over-committed, a user may ask for a resource no node has. The rules here keep one bad
job or node from freezing the whole cluster:

* a node that is not ``up`` keeps its running jobs but offers nothing new: its capacity
  is taken as what its jobs use, so its free capacity is zero;
* a node whose jobs use more than its capacity is taken as full (noted in diagnostics);
* a queued job asking for a resource type no node has, or more than the whole machine
  could ever give, is *rejected*: left out of the decision with the reason, while the
  rest of the queue is dispatched.

Inconsistencies that mean the snapshot itself is wrong (a node listed twice, a running
job on an unknown node or using an unknown type, a job both queued and running) raise
:class:`SnapshotError`: the API answers 422 with the message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from operator import itemgetter, le
from typing import TypeGuard, TypeVar

from cpsched.core import (
    Job,
    Node,
    RunningJob,
    Snapshot,
    make_snapshot,
)
from cpsched.core.problem import NodeUse
from cpsched.core.site import (
    NO_SITE,
    Partition,
    Reservation,
    Site,
)
from cpsched.errors import SnapshotError
from cpsched.runtime.codec_jobs import (
    RUNS_EXCLUSIVE,
    IdleMachine,
    core_job,
    job_constraints,
    never_starts,
    unit_amounts,
)
from cpsched.runtime.durations import RunningChanges
from cpsched.wire.deltas import RunningDelta
from cpsched.wire.schemas import (
    MAX_RESOURCE_TYPES,
    JobIn,
    NodeIn,
    PartitionIn,
    RejectedJobOut,
    ReservationIn,
    RunningJobIn,
    SnapshotIn,
)


@dataclass(slots=True)
class Translated:
    snapshot: Snapshot
    rejected: list[RejectedJobOut] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    changes: RunningChanges | None = None
    """The running jobs new or changed, and gone, since the memo's previous snapshot (for
    :meth:`~cpsched.runtime.durations.DurationBook.sync`), when there was one."""


CANONICAL_FIRST = ("cpu", "mem")
"""Resource types that, when present, come first: one order for a cluster whatever order
a bridge lists a node's resources in (jobs carry the names; nothing reads by position)."""


def resource_names(nodes: Sequence[Mapping[str, int]]) -> tuple[str, ...]:
    """Every type some node has: ``cpu``, ``mem``, then the others as first listed.

    At most :data:`~cpsched.wire.schemas.MAX_RESOURCE_TYPES`: the core keeps a dense
    amount per node and type, so a snapshot naming thousands of types (one per node, say)
    would cost nodes x types in time and memory; it is refused before anything is built.
    """
    seen: dict[str, None] = {}
    for resources in nodes:
        seen.update(dict.fromkeys(resources))
    if len(seen) > MAX_RESOURCE_TYPES:
        raise SnapshotError(
            f"the nodes name {len(seen)} resource types; a cluster may have at most "
            f"{MAX_RESOURCE_TYPES}: send only the types jobs ask for (cores, memory, GRES, "
            "licences)"
        )
    first = [name for name in CANONICAL_FIRST if name in seen]
    return (*first, *(name for name in seen if name not in CANONICAL_FIRST))


def _node_set(owner: str, names: Sequence[str], node_index: Mapping[str, int]) -> frozenset[int]:
    unknown = [name for name in names if name not in node_index]
    if unknown:
        raise SnapshotError(
            f"{owner} names node(s) {', '.join(map(repr, unknown[:5]))} that are not in the "
            "snapshot's node list; send every node it names"
        )
    return frozenset(node_index[name] for name in names)


def to_site(
    partitions: Sequence[PartitionIn],
    reservations: Sequence[ReservationIn],
    node_index: Mapping[str, int],
) -> Site:
    """The snapshot's partitions and reservations, on node indices."""
    if not partitions and not reservations:
        return NO_SITE
    parts: dict[str, Partition] = {}
    for p in partitions:
        if p.name in parts:
            raise SnapshotError(f"partition {p.name!r} is listed twice")
        parts[p.name] = Partition(
            p.name,
            _node_set(f"partition {p.name!r}", p.nodes, node_index),
            p.max_time,
            p.max_nodes,
        )
    seen: set[str] = set()
    for r in reservations:
        if r.name in seen:
            raise SnapshotError(f"reservation {r.name!r} is listed twice")
        seen.add(r.name)
    return Site(
        parts,
        tuple(
            Reservation(
                r.name, _node_set(f"reservation {r.name!r}", r.nodes, node_index), r.start, r.end
            )
            for r in reservations
        ),
    )


@dataclass(slots=True)
class MachineTranslation:
    """A snapshot's nodes, partitions and reservations translated, with nothing running:
    what each later snapshot that sends the very same lists reuses (a delta's merged
    snapshot keeps its base's lists when it sends no nodes), so that a call on a large
    machine builds only what its running jobs change. At 50,000 nodes that is 50,000
    core nodes and as many free rows fewer per call, and the collector's full scans that
    so many new long-lived objects set off."""

    wire: tuple[list[NodeIn], list[PartitionIn], list[ReservationIn]]
    names: tuple[str, ...]
    index: dict[str, int]
    """Each resource type's position in ``names``."""
    node_index: dict[str, int]
    site: Site
    idle: IdleMachine
    nodes: list[Node]
    """Each node as the core sees it with nothing running on it (exact for the nodes
    nothing runs on: one not up then offers nothing, and the wire refuses more held
    outside than a node has, so none is over-committed)."""

    def serves(self, wire: SnapshotIn) -> bool:
        """Whether ``wire`` sends the very lists this was translated from."""
        nodes, partitions, reservations = self.wire
        return (
            wire.nodes is nodes
            and wire.partitions is partitions
            and wire.reservations is reservations
        )


def translate_machine(wire: SnapshotIn) -> MachineTranslation:
    """``wire``'s nodes, partitions and reservations for the core, nothing running."""
    names = resource_names([n.resources for n in wire.nodes])
    index = {name: r for r, name in enumerate(names)}
    node_index: dict[str, int] = {}
    for i, node in enumerate(wire.nodes):
        if node.name in node_index:
            raise SnapshotError(f"node {node.name!r} is listed twice; send each node once")
        node_index[node.name] = i
    site = to_site(wire.partitions, wire.reservations, node_index)
    nothing = (0,) * len(names)
    nodes = [_node(node, nothing, names, []) for node in wire.nodes]
    nominal = [tuple(n.resources.get(name, 0) for name in names) for n in wire.nodes]
    return MachineTranslation(
        (wire.nodes, wire.partitions, wire.reservations),
        names,
        index,
        node_index,
        site,
        IdleMachine(site, nominal),
        nodes,
    )


@dataclass(slots=True)
class TranslationMemo:
    """What a cluster's previous snapshot translated to, for its next one to reuse.

    Consecutive snapshots share almost all of their jobs (a delta's merged snapshot even
    the same wire objects): each wire job equal to one translated last time gets the same
    core job (or rejection) again, as long as the nodes, partitions and reservations it
    was translated against are the same. At 100,000 queued jobs that saves most of the
    translation (0.45 s)."""

    context: tuple[tuple[str, ...], list[NodeIn], list[PartitionIn], list[ReservationIn]] | None = (
        None
    )
    """What the translations depend on: the resource names (in order), the nodes, the
    partitions and the reservations."""
    queued: dict[str, tuple[JobIn, Job | RejectedJobOut]] = field(default_factory=dict)
    running: dict[str, tuple[RunningJobIn, RunningJob]] = field(default_factory=dict)
    use: NodeUse | None = None
    """What ``running`` uses on each node."""
    snapshot: Snapshot | None = None
    """The snapshot these translations made (its free rows are the next one's base)."""
    machine: MachineTranslation | None = None
    replaced: frozenset[int] = frozenset()
    """The nodes of ``snapshot`` translated again, not the machine's (not up, or
    over-committed)."""
    running_list: list[RunningJobIn] | None = None
    """The wire's running list ``running`` was translated from (the very object: a
    delta's :class:`~cpsched.wire.deltas.RunningDelta` names its base's)."""


def to_snapshot(
    wire: SnapshotIn, memo: TranslationMemo | None = None, delta: RunningDelta | None = None
) -> Translated:
    """The core's snapshot of ``wire``, reusing (and updating) ``memo``'s translations.
    ``delta``: how ``wire``'s running jobs differ from those the memo translated last,
    when ``wire`` was merged from a delta: then only the jobs it names are looked at."""
    machine = memo.machine if memo is not None else None
    if machine is None or not machine.serves(wire):
        machine = translate_machine(wire)
    names, index, node_index, site = machine.names, machine.index, machine.node_index, machine.site
    # The names' order too: equal nodes may list their resources in another order, and a
    # core job's amounts are aligned with it.
    context = (names, wire.nodes, wire.partitions, wire.reservations)
    earlier = TranslationMemo()
    if memo is not None and memo.context == context:
        earlier = replace(memo)  # read below while ``memo`` is updated

    def translate(rj: RunningJobIn) -> RunningJob:
        return _running_job(rj, names, index, node_index)

    if delta is not None and earlier.running_list is delta.base:
        running_memo, added, gone_ids = _running_changed(delta, earlier.running, translate)
        running = list(map(itemgetter(1), map(running_memo.__getitem__, delta.ids)))
    else:
        running, running_memo, added = _running_all(wire.running, earlier.running, translate)
        gone_ids = None
    # What runs on each node it runs on: last time's, less the jobs gone (or changed) and
    # plus the new ones, when there is a last time on this machine.
    changes = None
    if earlier.use is None:
        use = NodeUse.of(running, len(wire.nodes))
    else:
        if gone_ids is None:
            # (Set operations on the keys: tens of thousands of running jobs, a few changed.)
            ended = earlier.running.keys() - running_memo.keys()
            gone_ids = ended | ({core.job.id for core in added} & earlier.running.keys())
        gone = [earlier.running[job_id][1] for job_id in gone_ids]
        use = earlier.use.changed(gone, added, len(wire.nodes))
        if earlier.snapshot is not None:
            changes = RunningChanges(earlier.snapshot, added, gone_ids)
    used = use.used

    rejected: list[RejectedJobOut] = []
    notes: list[str] = []
    # Since the last snapshot of this very machine translation, only the nodes whose
    # running jobs changed, and those translated again then or now, can differ.
    since = None
    if earlier.snapshot is not None and earlier.machine is machine and use.touched is not None:
        nodes, replaced = _nodes(machine, wire.nodes, used, notes, (earlier.replaced, use.touched))
        since = (earlier.snapshot, use.touched | earlier.replaced | replaced)
    else:
        nodes, replaced = _nodes(machine, wire.nodes, used, notes)
    idle = machine.idle
    # What each request shape (per_unit's items) is on this snapshot's types: a queue of
    # 100,000 jobs repeats a few dozen.
    shapes: dict[tuple[tuple[str, int], ...], tuple[int, ...]] = {}
    queued: list[Job] = []
    queued_memo: dict[str, tuple[JobIn, Job | RejectedJobOut]] = {}
    for wj in wire.queued:
        if wj.id in queued_memo or wj.id in running_memo:
            raise SnapshotError(f"job {wj.id!r} is listed twice (queued, or queued and running)")
        was = earlier.queued.get(wj.id)
        if not _same(was, wj):
            was = (wj, _queued_job(wj, names, index, site, shapes, idle))
        queued_memo[wj.id] = was
        outcome = was[1]
        if isinstance(outcome, RejectedJobOut):
            rejected.append(outcome)
        else:
            queued.append(outcome)
    # make_snapshot derives free capacity from the (adjusted) capacities and what runs on
    # each node (where it changed, when there is a last time), and sorts the queue stably
    # by submit time, keeping the bridge's order for equal times.
    snapshot = make_snapshot(
        wire.time, names, nodes, running, queued, site, used, since, use.exclusive.keys()
    )
    if memo is not None:
        memo.context, memo.queued, memo.running = context, queued_memo, running_memo
        memo.use, memo.snapshot, memo.machine = use, snapshot, machine
        memo.running_list, memo.replaced = wire.running, frozenset(replaced)
    return Translated(snapshot, rejected, notes, changes)


RunningMemo = dict[str, tuple[RunningJobIn, RunningJob]]


Kept = TypeVar("Kept", tuple[JobIn, Job | RejectedJobOut], tuple[RunningJobIn, RunningJob])


def _same(kept: Kept | None, wire: JobIn) -> TypeGuard[Kept]:
    """Whether ``kept`` (a memo's wire job and its translation) is of this very job:
    the same object (a delta's merged snapshot) or an equal one."""
    return kept is not None and (kept[0] is wire or kept[0] == wire)


def _running_all(
    wire: list[RunningJobIn],
    remembered: RunningMemo,
    translate: Callable[[RunningJobIn], RunningJob],
) -> tuple[list[RunningJob], RunningMemo, list[RunningJob]]:
    """Every running job of ``wire``: as translated last time when it is the same (the
    very tuple kept in the memo, so that tens of thousands of unchanged jobs allocate
    nothing), else translated. Returns the core's running jobs, the next memo and the
    jobs translated (new or changed)."""
    running: list[RunningJob] = []
    running_memo: RunningMemo = {}
    added: list[RunningJob] = []
    for rj in wire:
        if rj.id in running_memo:
            raise SnapshotError(f"running job {rj.id!r} is listed twice")
        kept = remembered.get(rj.id)
        if not _same(kept, rj):
            kept = (rj, translate(rj))
            added.append(kept[1])
        running_memo[rj.id] = kept
        running.append(kept[1])
    return running, running_memo, added


def _running_changed(
    delta: RunningDelta,
    remembered: RunningMemo,
    translate: Callable[[RunningJobIn], RunningJob],
) -> tuple[RunningMemo, list[RunningJob], set[str]]:
    """The running jobs of a merged snapshot from the memo of its base's (``delta``):
    the jobs it sent translated unless the same as remembered, the ones gone dropped (a
    merged snapshot lists no job twice). Returns the next memo, the jobs translated and
    the ids of the base's jobs gone or changed."""
    running_memo = dict(remembered)
    for job_id in delta.gone:
        del running_memo[job_id]
    added: list[RunningJob] = []
    for rj in delta.sent:
        kept = remembered.get(rj.id)
        if not _same(kept, rj):
            kept = (rj, translate(rj))
            added.append(kept[1])
        running_memo[rj.id] = kept
    again = {rj.id for rj in delta.sent} - {core.job.id for core in added}
    return running_memo, added, set(delta.gone - again)


def _nodes(
    machine: MachineTranslation,
    wire: Sequence[NodeIn],
    used: Mapping[int, Sequence[int]],
    notes: list[str],
    since: tuple[AbstractSet[int], AbstractSet[int]] | None = None,
) -> tuple[list[Node], set[int]]:
    """The core's nodes, given what the running jobs use on the nodes in ``used``: the
    machine's nodes as translated with nothing running, but for the nodes that are not
    up or over-committed by what runs there, translated again (in node order, for the
    notes' order); and the indices of those. ``since``: the nodes translated again for
    the previous snapshot of this machine and the nodes whose running jobs changed
    since: only those are looked at (every other one is within its capacity as it was)."""
    replaced: set[int] = set()
    if not used:
        return machine.nodes, replaced
    candidates: Iterable[int] = sorted(used)
    if since is not None:
        again, touched = since
        candidates = sorted((again | touched) & used.keys())
    nodes = machine.nodes
    copied = False
    for i in candidates:
        row, node = used[i], nodes[i]
        if wire[i].state == "up" and all(map(le, row, node.capacity)):
            continue  # within its capacity: what runs there changes nothing of the node
        if not copied:
            nodes, copied = list(nodes), True
        nodes[i] = _node(wire[i], row, machine.names, notes)
        replaced.add(i)
    return nodes, replaced


def _node(node: NodeIn, used: Sequence[int], names: tuple[str, ...], notes: list[str]) -> Node:
    """The core's node, given what the running jobs ``used`` on it: a node that is not
    up offers nothing new, what work outside the snapshot holds is taken off its
    capacity, an over-committed one is full (noted)."""
    held = node.held_outside
    capacity = tuple(node.resources.get(name, 0) - held.get(name, 0) for name in names)
    if node.state != "up":
        capacity = tuple(used)
    elif any(u > c for u, c in zip(used, capacity, strict=True)):
        notes.append(f"node {node.name} is over-committed; treated as full")
        capacity = tuple(max(u, c) for u, c in zip(used, capacity, strict=True))
    return Node(node.name, capacity, frozenset(node.features))


def _running_job(
    rj: RunningJobIn,
    names: tuple[str, ...],
    index: Mapping[str, int],
    node_index: Mapping[str, int],
) -> RunningJob:
    unit_request = unit_amounts(f"running job {rj.id!r}", rj.per_unit, index)
    allocation = []
    for node_name, units in rj.allocation.items():
        if node_name not in node_index:
            raise SnapshotError(
                f"running job {rj.id!r} is allocated to node {node_name!r}, which is not "
                "in the snapshot's node list; send every node that runs a job"
            )
        allocation.append((node_index[node_name], units))
    return RunningJob(
        # Once it runs, only whether it takes its nodes whole still matters.
        core_job(rj, unit_request, names, RUNS_EXCLUSIVE if rj.exclusive else None),
        rj.start,
        # A trial ends when the bridge puts the job back: the plan's limit for it.
        rj.time_limit if rj.trial_end is None else rj.trial_end - rj.start,
        tuple(allocation),
        rj.extensions,
        trial=rj.trial_end is not None,
    )


def _queued_job(
    wj: JobIn,
    names: tuple[str, ...],
    index: Mapping[str, int],
    site: Site,
    shapes: dict[tuple[tuple[str, int], ...], tuple[int, ...]],
    idle: IdleMachine,
) -> Job | RejectedJobOut:
    """The core job of a queued wire job, or why it is left out of the decision."""
    try:
        shape = tuple(wj.per_unit.items())
        amounts = shapes.get(shape)
        if amounts is None:
            amounts = shapes[shape] = unit_amounts(f"job {wj.id!r}", wj.per_unit, index)
        job = core_job(wj, amounts, names, job_constraints(wj, site))
    except SnapshotError as exc:
        return RejectedJobOut(job_id=wj.id, reason=str(exc))
    never = never_starts(job, idle)
    if never is not None:
        return RejectedJobOut(job_id=wj.id, reason=never)
    return job
