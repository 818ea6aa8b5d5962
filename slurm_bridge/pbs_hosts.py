"""PBS hosts: the vnodes of one host, sent to the service as one node.

PBS places a job's chunks per *host* (a vnode's ``resources_available.host``), not per
vnode: ``place=scatter`` puts each chunk on a host of its own, ``place=pack`` every chunk
on one host, and one chunk may be split over several vnodes of its host (never over
hosts). A mom that exposes several vnodes (a vnode per socket, per GPU board) is one host.
The service knows nodes only, so it is sent one node per host whose capacity is the sum
of its vnodes'. Where a host's vnodes serve different queues it is one node per host and
queue: a job's queue lets it use only one of them (PBS's node-queue association), so the
per-host placement still holds. When the bridge starts a job it lays each decided chunk
onto the chosen host's vnodes (:class:`HostLayout`), and reads a running job's
``exec_vnode`` back as chunks per host.

A vnode that is not up (offline, down, in an exclusive reservation) offers nothing, but
its capacity stays its host's: counted as held, so that a job is still judged able to run
once it is back (as a drained Slurm node is).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cpsched.slurm_bridge.errors import BridgeError, CommandError
from cpsched.slurm_bridge.model import Amounts, NodeStateName, NodeView

_STATE_RANK: dict[NodeStateName, int] = {"up": 0, "drain": 1, "reserved": 2, "down": 3}


@dataclass(frozen=True, slots=True)
class Vnode:
    """One vnode as ``pbsnodes -av -F json`` shows it."""

    name: str
    host: str
    queue: str
    """The queue it serves only (the vnode attribute ``queue``); "" when any."""
    capacity: Amounts
    used: Amounts
    state: NodeStateName

    def free(self) -> Amounts:
        if self.state != "up":
            return dict.fromkeys(self.capacity, 0)
        return {r: max(0, a - self.used.get(r, 0)) for r, a in self.capacity.items()}


class ChunkPlacementError(CommandError):
    """A decided chunk cannot be laid onto its host's vnodes (their free resources
    changed since the read, or ``place=vscatter`` asks for a vnode it fits whole)."""

    def __init__(self, job_id: str, reason: str) -> None:
        self.argv, self.reason, self.stderr = ["qrun", job_id], reason, ""
        BridgeError.__init__(
            self, f"job {job_id} not started: {reason}; the next cycle decides on a new read"
        )


@dataclass
class HostLayout:
    """The hosts of one read: each node sent to the service → its vnodes, and what is
    free on each vnode, less what this cycle's starts took so far."""

    vnodes: dict[str, list[Vnode]] = field(default_factory=dict)
    node_of: dict[str, str] = field(default_factory=dict)
    """vnode → the node the service knows it by."""
    free: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, vnodes: Iterable[Vnode]) -> HostLayout:
        groups: dict[tuple[str, str], list[Vnode]] = {}
        for vnode in vnodes:
            groups.setdefault((vnode.host, vnode.queue), []).append(vnode)
        queues_of_host: dict[str, int] = {}
        for host, _ in groups:
            queues_of_host[host] = queues_of_host.get(host, 0) + 1
        layout = cls()
        for (host, queue), members in groups.items():
            name = f"{host}/{queue}" if queue and queues_of_host[host] > 1 else host
            layout.vnodes[name] = members
            for vnode in members:
                layout.node_of[vnode.name] = name
                layout.free[vnode.name] = dict(vnode.free())
        return layout

    def nodes(self) -> dict[str, NodeView]:
        """One node per host (and queue), in the order PBS lists their first vnodes."""
        return {name: _host_node(name, members) for name, members in self.vnodes.items()}

    def chunks_per_node(self, exec_vnode_chunks: Iterable[str]) -> dict[str, int]:
        """A running job's chunks (their first vnodes, from ``exec_vnode``) per node; a
        vnode the layout does not hold keeps its own name (the snapshot leaves such a job
        out: it runs on nodes cpsched does not manage)."""
        counts: dict[str, int] = {}
        for vnode in exec_vnode_chunks:
            node = self.node_of.get(vnode, vnode)
            counts[node] = counts.get(node, 0) + 1
        return counts

    def lay(
        self, job_id: str, node: str, chunk: Amounts, *, whole: bool
    ) -> list[tuple[str, Amounts]]:
        """One chunk on ``node``'s vnodes, as (vnode, amounts) pieces: on the first vnode
        where it fits whole, else split over the host's vnodes in order (as PBS may);
        ``whole``: never split (``place=vscatter``). What it takes is no longer free."""
        members = self.vnodes.get(node)
        if members is None:
            raise ChunkPlacementError(job_id, f"node {node} is not a host of the last read")
        for vnode in members:
            if _fits(chunk, self.free[vnode.name]):
                self._take(vnode.name, chunk)
                return [(vnode.name, dict(chunk))]
        if whole:
            raise ChunkPlacementError(
                job_id, f"no vnode of {node} has {chunk} free for a chunk of its own"
            )
        pieces: dict[str, dict[str, int]] = {}
        for resource, amount in chunk.items():
            left = amount
            for vnode in members:
                if left <= 0:
                    break
                taken = min(left, self.free[vnode.name].get(resource, 0))
                if taken > 0:
                    pieces.setdefault(vnode.name, {})[resource] = taken
                    left -= taken
            if left > 0:
                raise ChunkPlacementError(
                    job_id, f"the vnodes of {node} have {amount - left} of {amount} {resource} free"
                )
        for vnode_name, amounts in pieces.items():
            self._take(vnode_name, amounts)
        return [(name, amounts) for name, amounts in pieces.items()]

    def _take(self, vnode: str, amounts: Mapping[str, int]) -> None:
        free = self.free[vnode]
        for resource, amount in amounts.items():
            free[resource] = free.get(resource, 0) - amount


def _fits(chunk: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(free.get(r, 0) >= a for r, a in chunk.items() if a > 0)


def _host_node(name: str, members: list[Vnode]) -> NodeView:
    capacity: dict[str, int] = {}
    used: dict[str, int] = {}
    up = any(v.state == "up" for v in members)
    for vnode in members:
        for resource, amount in vnode.capacity.items():
            capacity[resource] = capacity.get(resource, 0) + amount
            # Beside an up vnode, one that is not up offers nothing: all of it is held.
            taken = amount if up and vnode.state != "up" else vnode.used.get(resource, 0)
            used[resource] = used.get(resource, 0) + min(taken, amount)
    state = min((v.state for v in members), key=_STATE_RANK.__getitem__)
    queue = members[0].queue
    return NodeView(
        name=name,
        capacity=capacity,
        used=used,
        state=state,
        partitions=(queue,) if queue else (),
    )
