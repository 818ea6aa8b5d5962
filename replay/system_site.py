"""A system file's site rules: partitions (with the SWF queues whose jobs run there) and
reservations such as maintenance windows, for replays under the same rules as a site::

    [[partitions]]
    name = "short"
    groups = ["thin"]        # its nodes: whole node groups of [[nodes]]
    max_time = 3600          # optional: longest time limit, seconds
    max_nodes = 4            # optional: most nodes per job
    queues = ["2", "3"]      # the SWF queue numbers whose jobs may run here
    [[partitions]]
    name = "all"
    groups = ["thin", "fat"]
    default = true           # jobs of queues no partition names run here

    [[reservations]]
    name = "maintenance"
    groups = ["thin"]
    start = 2592000          # trace seconds (the trace's submit times' clock)
    end = 2635200

A job whose queue two partitions name may run in either; its queue label becomes their
names (``"short,all"``), as a workload manager reports a job's partitions. A job that
can never run in its partitions (more units than their nodes hold, or a time limit over
every one's ``max_time``) is skipped by the trace cleaning (rule ``outside_partitions``), as a
workload manager refuses it at submission.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cpsched.core.site import NO_SITE, Constraints, Partition, Reservation, Site
from cpsched.errors import ConfigError, SnapshotError

PARTITION_KEYS = ("name", "groups", "max_time", "max_nodes", "queues", "default")
RESERVATION_KEYS = ("name", "groups", "start", "end")


@dataclass(frozen=True, slots=True)
class SiteRules:
    """The site and which partitions each SWF queue's jobs may use."""

    site: Site = NO_SITE
    queues: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    default: tuple[str, ...] = ()

    def constraints_for(self, queue: str) -> Constraints | None:
        partitions = self.queues.get(queue, self.default)
        return Constraints(partitions=partitions) if partitions else None


NO_RULES = SiteRules()


def parse_site_rules(
    data: Mapping[str, Any], group_nodes: Mapping[str, list[int]], where: str
) -> SiteRules:
    """The ``[[partitions]]`` and ``[[reservations]]`` of a system file; ``group_nodes``
    maps each node group to its node indices."""
    partitions: dict[str, Partition] = {}
    queues: dict[str, list[str]] = {}
    default: list[str] = []
    for i, raw in enumerate(_tables(data.get("partitions", []), "partitions", where)):
        label = f"{where}, [[partitions]] entry {i + 1}"
        _known_keys(raw, PARTITION_KEYS, label)
        name = _name(raw, label)
        if name in partitions:
            raise ConfigError(f"{label}: partition {name!r} is defined twice")
        partitions[name] = Partition(
            name,
            _nodes_of(raw, group_nodes, label),
            _optional_positive(raw, "max_time", label),
            _optional_positive(raw, "max_nodes", label),
        )
        for queue in _strings(raw.get("queues", []), "queues", label):
            queues.setdefault(queue, []).append(name)
        if raw.get("default", False) is True:
            default.append(name)
    reservations: list[Reservation] = []
    for i, raw in enumerate(_tables(data.get("reservations", []), "reservations", where)):
        label = f"{where}, [[reservations]] entry {i + 1}"
        _known_keys(raw, RESERVATION_KEYS, label)
        start, end = raw.get("start"), raw.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and _is_int(start)):
            raise ConfigError(f"{label}: start and end must be whole seconds")
        if not 0 <= start < end:
            raise ConfigError(f"{label}: needs 0 <= start < end, got {start}, {end}")
        try:
            reservations.append(
                Reservation(_name(raw, label), _nodes_of(raw, group_nodes, label), start, end)
            )
        except SnapshotError as exc:
            raise ConfigError(f"{label}: {exc}") from None
    if not partitions and not reservations:
        return NO_RULES
    return SiteRules(
        Site(partitions, tuple(reservations)),
        {q: tuple(names) for q, names in queues.items()},
        tuple(default),
    )


def _tables(value: Any, key: str, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise ConfigError(f"{where}: {key} must be [[{key}]] tables")
    return value


def _known_keys(raw: Mapping[str, Any], allowed: tuple[str, ...], label: str) -> None:
    unknown = [k for k in raw if k not in allowed]
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise ConfigError(f"{label}: unknown key(s) {names}; allowed: {', '.join(allowed)}")


def _name(raw: Mapping[str, Any], label: str) -> str:
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip() or "," in name:
        raise ConfigError(f'{label}: needs name = "..." (non-empty, no comma)')
    return name.strip()


def _nodes_of(
    raw: Mapping[str, Any], group_nodes: Mapping[str, list[int]], label: str
) -> frozenset[int]:
    groups = _strings(raw.get("groups"), "groups", label)
    unknown = [g for g in groups if g not in group_nodes]
    if not groups or unknown:
        raise ConfigError(
            f"{label}: groups must name node groups of [[nodes]] "
            f"({', '.join(group_nodes)}); got {groups!r}"
        )
    return frozenset(n for g in groups for n in group_nodes[g])


def _strings(value: Any, key: str, label: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f'{label}: {key} must be a list of strings, e.g. {key} = ["a"]')
    return value


def _optional_positive(raw: Mapping[str, Any], key: str, label: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if not _is_int(value) or value < 1:
        raise ConfigError(f"{label}: {key} must be a whole number >= 1, got {value!r}")
    return int(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
