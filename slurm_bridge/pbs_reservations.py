"""PBS reservations (``pbs_rsub``: advance ``R``, standing ``S``, maintenance ``M``), read
from ``pbs_rstat -f`` (which has no JSON form).

A confirmed reservation holds resources on some vnodes from its start to its end, and
PBS gives it a queue named as its id (``R12``); only that queue's jobs run there then,
and PBS's own scheduler runs them (the kit's hook leaves them to it). The service is
sent each reservation as nodes set aside for the window: the hosts of its vnodes
(``resv_nodes``), so that no job cpsched starts runs into it. That is stricter than PBS,
which reserves resources, not whole vnodes: a host with a few reserved cpus is kept from
cpsched's jobs for the whole window.
"""

from __future__ import annotations

import re

from cpsched.slurm_bridge.errors import StateParseError
from cpsched.slurm_bridge.model import ReservationView
from cpsched.slurm_bridge.pbs_hosts import HostLayout
from cpsched.slurm_bridge.pbs_units import pbs_time

QUEUE = re.compile(r"^[RSM]\d+$")
"""A reservation's queue: its id without the server (``R12``, ``S3``, ``M7``)."""
HOLDS_RESOURCES = {
    "RESV_CONFIRMED",
    "RESV_RUNNING",
    "RESV_BEING_ALTERED",
    "RESV_DEGRADED",
    "RESV_IN_CONFLICT",
}
"""States in which a reservation has vnodes (not unconfirmed, finished or deleted)."""
_VNODE = re.compile(r"[(+]([^:()+]+):")


def is_reservation_queue(queue: str) -> bool:
    return QUEUE.match(queue) is not None


def parse_rstat(text: str) -> list[dict[str, str]]:
    """``pbs_rstat -f`` → one mapping per reservation (attribute → text; ``Resv ID`` too)."""
    found: list[dict[str, str]] = []
    for line in text.splitlines():
        if line.startswith("Resv ID:"):
            found.append({"Resv ID": line.split(":", 1)[1].strip()})
        elif " = " in line and found:
            key, value = line.split(" = ", 1)
            found[-1][key.strip()] = value.strip()
        elif line.strip() and not found:
            raise StateParseError(f"pbs_rstat -f: a line before any 'Resv ID:': {line[:80]!r}")
    return found


def parse_reservations(text: str, layout: HostLayout) -> tuple[ReservationView, ...]:
    """The reservations that hold vnodes, named by their queue (which their jobs name),
    on the nodes the service knows (``layout``'s; vnodes of other queues left out)."""
    views: list[ReservationView] = []
    for raw in parse_rstat(text):
        if raw.get("reserve_state") not in HOLDS_RESOURCES:
            continue
        queue = raw.get("queue") or raw["Resv ID"].split(".", 1)[0]
        start, end = pbs_time(raw.get("reserve_start")), pbs_time(raw.get("reserve_end"))
        if start is None or end is None:
            raise StateParseError(f"reservation {raw['Resv ID']}: no reserve_start or end")
        vnodes = _VNODE.findall(raw.get("resv_nodes", ""))
        nodes = tuple(dict.fromkeys(layout.node_of[v] for v in vnodes if v in layout.node_of))
        if nodes:
            views.append(ReservationView(name=queue, nodes=nodes, start=start, end=end))
    return tuple(views)
