"""What a job of ``squeue --json`` asks and holds, where the formats differ: its node
count limit, its memory from the TRES it asks, and the cores it holds on each node."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cpsched.slurm_bridge.slurm_common import memory_mib, set_count, shown_node_limit
from cpsched.slurm_bridge.slurm_json_doc import Doc, number


def _tres_count(text: Any, name: str) -> int | None:
    match = re.search(rf"(?:^|,){name}=(\d+)(?:,|$)", str(text or ""))
    return int(match.group(1)) if match else None


def max_nodes(raw: Doc, newer: bool, pending: bool) -> int:
    """The job's node count limit as Slurm shows it (0: none), where the kit's record of
    it is missing: ``slurm_common.shown_node_limit``'s rule."""
    return shown_node_limit(
        number(raw.get("max_nodes")) or 0,
        number(raw.get("node_count")) or 0,
        packed_as_asked=bool(
            set_count(number(raw.get("tasks_per_node")))
            or set_count(number(raw.get("tasks_per_core")))
            or (number(raw.get("cpus_per_task")) or 1) > 1
        ),
        asked_nodes=_tres_count(raw.get("tres_req_str"), "node") or 1,
        estimated=newer and pending,
    )


def mem_from_tres(raw: Doc) -> int | None:
    """Memory per node from ``tres_req_str`` when neither per-CPU nor per-node is set."""
    if number(raw.get("memory_per_cpu")):
        return None
    match = re.search(r"(?:^|,)mem=([^,]+)", str(raw.get("tres_req_str") or ""))
    total = memory_mib(match.group(1)) if match else None
    return -(-total // max(number(raw.get("node_count")) or 1, 1)) if total else None


def _cores_by_node(resources: Doc) -> dict[str, int]:
    """Cores a running job holds on each node: ``nodes.allocation`` (v0.0.41 on: each
    core's status a list of flags) or ``allocated_nodes`` (v0.0.38, v0.0.40: only the
    allocated cores listed, ``allocated`` or ``allocated_and_in_use``)."""
    nodes = resources.get("nodes")
    if isinstance(nodes, Mapping):
        return {
            node["name"]: sum(
                1
                for socket in node.get("sockets") or ()
                for core in socket.get("cores") or ()
                if "ALLOCATED" in (core.get("status") or ())
            )
            for node in nodes.get("allocation") or ()
        }
    return {
        node["nodename"]: sum(
            1
            for socket in (node.get("sockets") or {}).values()
            for state in (socket.get("cores") or {}).values()
            if str(state).startswith("allocated")
        )
        for node in resources.get("allocated_nodes") or ()
    }


def cpus_by_node(raw: Doc, names: list[str], threads: Mapping[str, int]) -> dict[str, int]:
    """CPUs a running job holds on each node: Slurm lists its cores, each of ``threads``
    hardware threads (node → threads per core)."""
    cores = _cores_by_node(raw.get("job_resources") or {})
    counts = {name: max(count, 1) * threads.get(name, 1) for name, count in cores.items()}
    return counts or dict.fromkeys(names, 1)
