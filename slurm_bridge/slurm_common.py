"""Pieces both Slurm readers (JSON and text) share: states, limits, partitions."""

from __future__ import annotations

import re
import secrets

from cpsched.slurm_bridge import hostlist
from cpsched.slurm_bridge.errors import StateParseError
from cpsched.slurm_bridge.model import NodeStateName, PartitionView, ReservationView

_RUNNING_STATES = {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED"}
_END_STATES = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timeout",
    "NODE_FAIL": "node_fail",
}


def job_state(slurm_state: str) -> str:
    """Slurm's job state → pending, running, or one of the wire's end states."""
    state = slurm_state.strip().upper().split()[0] if slurm_state.strip() else ""
    state = state.split("+", 1)[0]
    if state in {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}:
        return "pending"
    if state in _RUNNING_STATES:
        return "running"
    return _END_STATES.get(state, "other")


def start_time(state: str, start: int | None, nodes: list[str]) -> int | None:
    """A job's start as the bridge reads it (``state`` from ``job_state``): none while it
    is pending, nor for a job that ended on no node. Slurm gives a job cancelled while
    pending a start time, its end; it never ran."""
    if state == "pending" or not start or not (nodes or state == "running"):
        return None
    return start


def is_ending(slurm_state: str) -> bool:
    """COMPLETING: the job has ended and its nodes are being cleaned up; it still holds
    them (so it is sent as running), but they are about to be free."""
    return slurm_state.strip().upper().startswith("COMPLETING")


def node_state(state: str, flags: list[str] | tuple[str, ...] = ()) -> NodeStateName:
    """A node's Slurm state (``idle``, ``mixed+drain``, ``down*``...) → the wire's state."""
    words = {w.strip("*~#!%$@^-").upper() for w in re.split(r"[+ ]", state) if w}
    words |= {f.upper() for f in flags}
    if words & {"DOWN", "FAIL", "FAILING", "NOT_RESPONDING", "FUTURE", "UNKNOWN", "NO_RESPOND"}:
        return "down"
    if words & {"POWER_DOWN", "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "REBOOT"}:
        return "down"
    if words & {"DRAIN", "DRAINED", "DRAINING", "MAINT"}:
        return "drain"
    if words & {"RESERVED", "RESV"}:
        return "reserved"
    return "up"


_LIMIT = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def time_limit_minutes(text: str | int | None) -> int | None:
    """Slurm's time limit (minutes, or ``[D-]HH:MM:SS``/``MM:SS``/``MM``) in minutes.

    ``None`` for UNLIMITED / INFINITE / NOT_SET (the caller substitutes the partition's
    maximum). Seconds are rounded up: a limit never shrinks.
    """
    if text is None:
        return None
    if isinstance(text, int):
        return text
    value = text.strip()
    if value.upper() in {"", "UNLIMITED", "INFINITE", "NOT_SET", "N/A", "NONE", "PARTITION_LIMIT"}:
        return None
    match = _LIMIT.match(value)
    if not match:
        raise StateParseError(f"cannot read time limit {text!r}")
    days = int(match.group(1) or 0)
    parts = [int(g) for g in match.groups()[1:] if g is not None]
    if match.group(1) is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = [*parts, 0, 0][:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    elif len(parts) == 2:
        hours, minutes, seconds = 0, parts[0], parts[1]
    else:
        hours, minutes, seconds = 0, parts[0], 0
    return days * 1440 + hours * 60 + minutes + (1 if seconds else 0)


def _fields(line: str) -> dict[str, str]:
    """``Key=value Key2=value2`` (``scontrol -o show ...``) → dict."""
    return dict(re.findall(r"(?:^|\s)([A-Za-z]+)=(\S*)", line))


def parse_partitions(scontrol_show_partition: str) -> dict[str, PartitionView]:
    """``scontrol -o show partition`` → each partition's nodes and limits."""
    partitions: dict[str, PartitionView] = {}
    for line in scontrol_show_partition.splitlines():
        f = _fields(line)
        name = f.get("PartitionName")
        if not name:
            continue
        max_time = time_limit_minutes(f["MaxTime"]) if "MaxTime" in f else None
        max_nodes = f.get("MaxNodes", "UNLIMITED")
        nodes = f.get("Nodes", "")
        partitions[name] = PartitionView(
            name=name,
            nodes=tuple(hostlist.expand(nodes if nodes != "(null)" else "")),
            max_time_s=max_time * 60 if max_time is not None else None,
            max_nodes=int(max_nodes) if max_nodes.isdigit() else None,
            exclusive=f.get("OverSubscribe", "").upper() == "EXCLUSIVE",
            priority_job_factor=int(factor)
            if (factor := f.get("PriorityJobFactor", "1")).isdigit()
            else 1,
        )
    return partitions


def partition_max_minutes(partitions: dict[str, PartitionView]) -> dict[str, int | None]:
    """Each partition's MaxTime in minutes (None: unlimited)."""
    return {
        name: p.max_time_s // 60 if p.max_time_s is not None else None
        for name, p in partitions.items()
    }


def parse_reservations(scontrol_show_reservation: str) -> tuple[ReservationView, ...]:
    """``scontrol -o show reservation`` with ``SLURM_TIME_FORMAT=%s`` → reservations."""
    found: list[ReservationView] = []
    for line in scontrol_show_reservation.splitlines():
        f = _fields(line)
        name, start, end = f.get("ReservationName"), f.get("StartTime"), f.get("EndTime")
        if not name or start is None or end is None:
            continue
        if not (start.isdigit() and end.isdigit()):
            raise StateParseError(
                f"reservation {name}: times {start!r}/{end!r} are not epoch seconds "
                "(run scontrol with SLURM_TIME_FORMAT=%s)"
            )
        nodes = f.get("Nodes", "")
        found.append(
            ReservationView(
                name=name,
                nodes=tuple(hostlist.expand(nodes if nodes != "(null)" else "")),
                start=int(start),
                end=int(end),
            )
        )
    return tuple(found)


def memory_mib(text: str | None) -> int | None:
    """``"256M"``, ``"4G"``, ``"1000"`` → MiB; empty / N/A → None."""
    if text is None:
        return None
    value = text.strip().upper()
    if not value or value in {"N/A", "0", "NONE"}:
        return None
    match = re.match(r"^(\d+(?:\.\d+)?)([KMGT]?)B?[NC]?$", value)
    if not match:
        raise StateParseError(f"cannot read memory {text!r}")
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[match.group(2)]
    return max(1, round(float(match.group(1)) * scale))


NO_VAL16 = 0xFFFE
"""Slurm's 16-bit "not set" (``NO_VAL16``); 0xFFFF is ``INFINITE16``."""


def set_count(value: int | None) -> int | None:
    """A per-node or per-core task count as Slurm reports it; None when not set (0, or
    its 16-bit "not set" and "infinite" values)."""
    return value if value is not None and 0 < value < NO_VAL16 else None


def field_separator() -> str:
    """A field separator for one run of a Slurm command that no job name can hold.

    Slurm prints a job's name as it was given, ``|`` and line breaks included (22.05
    takes ``sbatch -J $'a\\n…'``), so behind a fixed separator a name could pass for
    fields of its own or for the lines of other jobs.
    """
    return f"|{secrets.token_hex(6)}|"


def split_records(text: str, separator: str, width: int, what: str) -> list[list[str]]:
    """Records of ``width`` fields, each field but the last ended by ``separator``, each
    record by a line break. Any field may hold line breaks but the first (a job id): the
    last (a job name) runs to the last line break before the next record's first field."""
    body = text.removesuffix("\n")
    if not body.strip():
        return []
    tokens = body.split(separator)
    if (len(tokens) - 1) % (width - 1):
        raise StateParseError(
            f"{what} printed {len(tokens) - 1} separators, not a multiple of {width - 1}: "
            f"{body[:120]!r}"
        )
    records: list[list[str]] = []
    first = tokens[0].lstrip("\n")
    for start in range(1, len(tokens), width - 1):
        *middle, last = tokens[start : start + width - 1]
        if start + width - 1 == len(tokens):
            name, next_first = last, ""
        elif "\n" in last:
            name, _, next_first = last.rpartition("\n")
        else:
            raise StateParseError(f"{what} printed a record without a line break: {last!r}")
        records.append([first, *middle, name])
        first = next_first
    return records


def shown_node_limit(
    limit: int, least: int, *, packed_as_asked: bool, asked_nodes: int, estimated: bool
) -> int:
    """A pending job's maximum node count as Slurm shows it (0: none), where the kit's
    record of the user's own is missing (an older kit; ``slurm_tag``).

    Since Slurm 23.11 (``estimated``: the version shows it), a pending job asking only
    tasks (no ``--ntasks-per-node``, ``--ntasks-per-core``, nor more than one CPU per task:
    ``packed_as_asked`` false) shows its estimated node count ``least`` as its maximum too
    (``NumNodes=1-1`` for ``-n 3``), which is no limit: released, it spreads. The user's
    own ``-N k`` (k > 1) is kept: k is also the node count it asked (``asked_nodes``, the
    ``node=`` of its requested TRES, 1 without ``-N``). An explicit ``-N 1`` cannot be told
    from no ``-N`` there: read as none. Both readers, JSON and text, use this rule."""
    if not estimated or limit != least:
        return limit
    return limit if packed_as_asked or (asked_nodes == limit and asked_nodes > 1) else 0
