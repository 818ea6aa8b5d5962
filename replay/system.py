"""Machine descriptions for trace replay: a TOML system file, or what an SWF header says.

A system file describes nodes in groups; every node of a group is identical::

    name = "HPC2N Seth"
    max_time_limit = 432000     # optional: partition maximum run time, seconds
    [units]                     # optional, documentation only; memory is always MB
    mem = "MB"
    [[nodes]]
    group = "thin"              # nodes are named f"{group}{i:04d}", i from 0 in each group
    count = 120                 # required, >= 1
    cpu = 2                     # required, >= 1
    mem = 1024                  # any other key is a resource type (mem, gpu, mic, ...)

Every resource value is a non-negative integer. ``resource_names`` starts with ``cpu``
and lists the other types in the order they first appear; a type a group does not
mention has capacity 0 on that group's nodes. ``systems/`` holds commented examples.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cpsched.core.problem import Node
from cpsched.errors import ConfigError, TraceError
from cpsched.replay.system_site import NO_RULES, SiteRules, parse_site_rules
from cpsched.wire.schemas import MAX_NODES

if TYPE_CHECKING:
    from cpsched.replay.swf import SwfHeader

_TOP_KEYS = ("name", "max_time_limit", "units", "nodes", "partitions", "reservations")
_GROUP_KEYS = ("group", "count")
_RESOURCE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_GROUP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_EXAMPLES = "examples: systems/ctc.toml, curie.toml, hpc2n.toml, kth.toml, metacentrum.toml"


@dataclass(frozen=True, slots=True)
class System:
    name: str
    resource_names: tuple[str, ...]
    """Always starts with ``"cpu"``; then the other types in first-seen order."""
    nodes: tuple[Node, ...]
    max_time_limit: int | None = None
    """Partition maximum run time in seconds, when declared (caps wall-time extensions)."""
    source: str = ""
    """Where the description came from, for people: a file, or the SWF header."""
    rules: SiteRules = NO_RULES
    """Partitions, the queues they serve, and reservations (:mod:`.system_site`)."""


def _is_int(value: object) -> bool:
    # TOML booleans arrive as Python bools, which are ints: they must not pass as amounts.
    return isinstance(value, int) and not isinstance(value, bool)


def read_toml(
    path: Path, where: str, *, missing: str, error: type[ConfigError] = ConfigError
) -> dict[str, Any]:
    """The TOML file at ``path`` (``where`` names it in messages); a missing, unreadable
    or invalid file is an ``error`` saying which, ``missing`` telling what to do."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{where} does not exist; {missing}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{where} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where} is not valid TOML: {exc}") from None


def load_system(path: Path) -> System:
    """Read a TOML system file; every problem is a ConfigError naming the file and the fix."""
    where = f"system file {path}"
    data = read_toml(Path(path), where, missing="pass an existing TOML file")

    unknown = [k for k in data if k not in _TOP_KEYS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown top-level key(s) {', '.join(map(repr, unknown))}; "
            f"allowed keys are {', '.join(_TOP_KEYS)} (resources go inside [[nodes]] groups)"
        )
    name = data.get("name", Path(path).stem)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: name must be a non-empty string")
    max_time_limit = data.get("max_time_limit")
    if max_time_limit is not None and (not _is_int(max_time_limit) or max_time_limit < 1):
        raise ConfigError(
            f"{where}: max_time_limit must be a whole number of seconds >= 1, "
            f"got {max_time_limit!r}; remove it if the partition has no maximum"
        )
    _check_units(data.get("units", {}), where)

    groups = data.get("nodes")
    if not isinstance(groups, list) or not groups:
        raise ConfigError(
            f"{where}: no nodes; add at least one [[nodes]] table with group, count and cpu"
        )
    parsed = [_parse_group(g, i, where) for i, g in enumerate(groups)]
    total = sum(count for _, count, _ in parsed)
    if total > MAX_NODES:
        raise ConfigError(
            f"{where}: the groups' counts add up to {total:,} nodes; at most {MAX_NODES:,} "
            "are supported (the service's snapshot limit): check the counts"
        )

    names: list[str] = ["cpu"]
    for _, _, amounts in parsed:
        names.extend(r for r in amounts if r not in names)
    nodes: list[Node] = []
    seen: set[str] = set()
    group_nodes: dict[str, list[int]] = {}
    for group, count, amounts in parsed:
        capacity = tuple(amounts.get(r, 0) for r in names)
        group_nodes.setdefault(group, []).extend(range(len(nodes), len(nodes) + count))
        for i in range(count):
            node_name = f"{group}{i:04d}"
            if node_name in seen:
                raise ConfigError(
                    f"{where}: group {group!r} produces node name {node_name!r} that another "
                    "group also produces; rename one of the groups"
                )
            seen.add(node_name)
            nodes.append(Node(node_name, capacity))
    return System(
        name=name.strip(),
        resource_names=tuple(names),
        nodes=tuple(nodes),
        max_time_limit=max_time_limit,
        source=where,
        rules=parse_site_rules(data, group_nodes, where),
    )


def _check_units(units: Any, where: str) -> None:
    if not isinstance(units, dict) or not all(isinstance(v, str) for v in units.values()):
        raise ConfigError(f'{where}: [units] must map resource names to strings, e.g. mem = "MB"')
    mem_unit = units.get("mem", "MB")
    if mem_unit.strip().upper() != "MB":
        raise ConfigError(
            f"{where}: [units] says mem is {mem_unit!r}, but cpsched counts memory in MB; "
            'convert the mem amounts to MB and write mem = "MB"'
        )


def _parse_group(raw: Any, index: int, where: str) -> tuple[str, int, dict[str, int]]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: [[nodes]] entry {index + 1} must be a table")
    group = raw.get("group")
    if not isinstance(group, str) or not _GROUP_NAME.fullmatch(group):
        raise ConfigError(
            f'{where}: [[nodes]] entry {index + 1} needs group = "name" (letters, digits, '
            f"'_' or '-', starting with a letter), got {group!r}"
        )
    label = f"{where}, group {group!r}"
    count = raw.get("count")
    if count is None:
        raise ConfigError(f"{label}: count is missing; add count = <number of nodes>")
    if not _is_int(count) or count < 1:
        raise ConfigError(f"{label}: count must be a whole number >= 1, got {count!r}")
    amounts: dict[str, int] = {}
    for key, value in raw.items():
        if key in _GROUP_KEYS:
            continue
        if not _RESOURCE_NAME.fullmatch(key):
            raise ConfigError(f"{label}: {key!r} is not a valid resource name")
        if not _is_int(value) or value < 0:
            raise ConfigError(
                f"{label}: {key} must be a whole non-negative amount per node, got {value!r}"
            )
        amounts[key] = value
    if amounts.get("cpu", 0) < 1:
        raise ConfigError(f"{label}: cpu is missing or 0; add cpu = <processors per node>")
    return group, count, amounts


def _leading_int(fields: dict[str, str], key: str) -> int | None:
    match = re.match(r"\s*(\d+)", fields.get(key, ""))
    return int(match.group(1)) if match else None


def system_from_header(header: SwfHeader, trace_name: str) -> System:
    """A cpu-only machine of ``MaxNodes`` identical nodes holding ``MaxProcs`` in total.

    SWF headers say nothing about memory per node, so only ``cpu`` is described. When the
    header cannot describe identical nodes, a TraceError asks for ``--system FILE``.
    """
    nodes, procs = header.max_nodes, header.max_procs
    fix = f"pass --system FILE describing the machine — {_EXAMPLES}"
    if procs is None or nodes is None:
        missing = " and ".join(
            k for k, v in (("MaxProcs", procs), ("MaxNodes", nodes)) if v is None
        )
        raise TraceError(
            f"{trace_name}: the SWF header does not give {missing}, so the machine size "
            f"is unknown; {fix}"
        )
    if nodes < 1 or procs < 1:
        raise TraceError(
            f"{trace_name}: the SWF header says MaxNodes {nodes}, MaxProcs {procs}; "
            f"both must be >= 1; {fix}"
        )
    if procs % nodes:
        raise TraceError(
            f"{trace_name}: MaxProcs {procs} is not a multiple of MaxNodes {nodes}, so the "
            f"nodes are not identical and the header cannot say which has how many; {fix}"
        )
    per_node = procs // nodes
    run_max = _leading_int(header.fields, "MaxRuntime")
    return System(
        name=trace_name,
        resource_names=("cpu",),
        nodes=tuple(Node(f"node{i:04d}", (per_node,)) for i in range(nodes)),
        max_time_limit=run_max if run_max else None,
        source=f"derived from SWF header: {nodes} nodes x {per_node} cpu",
    )
