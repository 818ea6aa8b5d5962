"""What the heterogeneous allocators know about the machine and the queue at one call.

First-fit and best-fit need only the free capacity they are handed. The allocators of
Netti's thesis for heterogeneous machines also need the node capacities (which resource types
are *critical*: by default every type that not all nodes have) and the queue (the
weighted rule's average request). :func:`build_context` derives both from the snapshot
and the durations, as plain data; nothing here reads a clock or does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cpsched.core.durations import Durations
from cpsched.core.problem import Node, Snapshot
from cpsched.errors import ConfigError

DEFAULT_WINDOW = 128
"""Queued jobs (in submission order) the weighted rule averages over: the thesis uses a
fixed sliding window to bound the cost; 128 covers the whole queue in most calls."""


@dataclass(frozen=True, slots=True)
class MachineShape:
    """What depends on the nodes only: computed once per machine, not per call."""

    critical: tuple[int, ...]
    """Indices of the critical resource types, in the order they were configured."""
    node_capacity: tuple[tuple[int, ...], ...]
    scale: tuple[float, ...]
    """Per type, 1 / the largest node capacity (0 for a type no node has): amounts left on
    a node are compared in node-capacity units, so MB of memory and GPUs weigh alike."""


@dataclass(frozen=True, slots=True)
class AllocationContext:
    """The machine's shape plus the weighted rule's per-type weights for this call."""

    shape: MachineShape
    weights: tuple[float, ...]
    """``w_k = avgreq_k · load_k / avl_k`` (Netti's thesis, chapter 5), aligned with the
    resource types."""


def default_critical(resource_names: Sequence[str], nodes: Sequence[Node]) -> tuple[str, ...]:
    """Every resource type that some node lacks (capacity 0): accelerators, typically."""
    return tuple(
        name
        for r, name in enumerate(resource_names)
        if nodes and any(node.capacity[r] == 0 for node in nodes)
    )


def machine_shape(
    resource_names: Sequence[str], nodes: Sequence[Node], critical: Sequence[str] | None
) -> MachineShape:
    """The shape of ``nodes``; ``critical`` None means :func:`default_critical`."""
    names = tuple(resource_names)
    chosen = default_critical(names, nodes) if critical is None else tuple(critical)
    unknown = [c for c in chosen if c not in names]
    if unknown:
        raise ConfigError(
            f"critical resource type(s) {', '.join(map(repr, unknown))} are not resources of "
            f"this machine ({', '.join(names)}); name existing types, e.g. balanced:gpu,mic"
        )
    largest = [max((n.capacity[r] for n in nodes), default=0) for r in range(len(names))]
    return MachineShape(
        critical=tuple(names.index(c) for c in chosen),
        node_capacity=tuple(n.capacity for n in nodes),
        scale=tuple(1.0 / c if c > 0 else 0.0 for c in largest),
    )


def queue_weights(snapshot: Snapshot, durations: Durations, window: int) -> tuple[float, ...]:
    """``w_k = avgreq_k · load_k / avl_k`` over the first ``window`` queued jobs.

    ``avgreq_k`` is the duration-weighted mean total request of type ``k``, ``load_k``
    the share of type ``k`` in use, ``avl_k`` the machine's total of type ``k``. A job
    without a duration weighs by its time limit (the wall-time approach).
    """
    types = len(snapshot.resource_names)
    weighted = [0.0] * types
    total_duration = 0
    for job in snapshot.queued[:window]:
        d = durations.get(job.id, job.time_limit)
        total_duration += d
        for r, amount in enumerate(job.request):
            weighted[r] += d * amount
    weights: list[float] = []
    for r in range(types):
        avl = snapshot.capacity_total[r]
        if avl <= 0 or total_duration <= 0:
            weights.append(0.0)
            continue
        load = 1.0 - snapshot.free_total[r] / avl
        weights.append(weighted[r] / total_duration * load / avl)
    return tuple(weights)
