"""Job and node states in Slurm's JSON, as the bridge reads them.

Slurm 22.05 (openapi v0.0.38) gives a job's state as one word, a flag when one is set
(``COMPLETING``) else the base state, and a node's as a word and a list of flags. The
data_parser formats (v0.0.40-v0.0.42) give each as one list of a base state and flags
(``["RUNNING", "COMPLETING"]``, ``["IDLE", "DRAIN"]``). Every word Slurm 24.11 has is
listed here (its ``JOB_STATE`` and ``NODE_STATES`` flags); any other word is an error,
never a job read as ``other`` nor a node read as up.
"""

from __future__ import annotations

from typing import Any

from cpsched.slurm_bridge.errors import StateParseError
from cpsched.slurm_bridge.model import NodeStateName

_BASE_STATES = frozenset(
    [
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    ]
)
_SHOWN_FLAGS = frozenset(
    [
        "COMPLETING",
        "STAGE_OUT",
        "CONFIGURING",
        "RESIZING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "SPECIAL_EXIT",
        "STOPPED",
        "REVOKED",
        "RESV_DEL_HOLD",
        "SIGNALING",
    ]
)
"""Flags Slurm 22.05 printed instead of the base state (its ``job_state_string``)."""
_LIST_FLAGS = _SHOWN_FLAGS | {"LAUNCH_FAILED", "RECONFIG_FAIL", "POWER_UP_NODE"}
_TELLING_FLAGS = (
    "COMPLETING",
    "CONFIGURING",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "STOPPED",
    "RESV_DEL_HOLD",
)
"""Flags that change what the bridge reads of a job (``slurm_common.job_state``), in the
order 22.05 chose among them; the other flags leave the base state as it is."""


def job_state_word(value: Any, *, newer: bool, job: object) -> str:
    """A job's state as one word, as Slurm 22.05 printed it (``slurm_common.job_state``
    reads it): in the data_parser formats (``newer``) the flag that tells most
    (``COMPLETING`` of ``["COMPLETED", "COMPLETING"]``), else the base state.
    StateParseError naming ``job`` for a state Slurm does not have."""
    if not newer:
        word = str(value or "")
        if word not in _BASE_STATES | _SHOWN_FLAGS:
            raise StateParseError(f"job {job}: unknown job state {value!r}")
        return word
    words = [str(w) for w in value] if isinstance(value, list) else []
    bases = [w for w in words if w in _BASE_STATES]
    if len(bases) != 1 or any(w not in _BASE_STATES | _LIST_FLAGS for w in words):
        raise StateParseError(f"job {job}: unknown job state {value!r}")
    return next((flag for flag in _TELLING_FLAGS if flag in words), bases[0])


_NODE_WORDS: dict[str, NodeStateName] = {
    **dict.fromkeys(
        [
            "IDLE",
            "MIXED",
            "ALLOCATED",
            "COMPLETING",
            "CLOUD",
            "UNDRAIN",
            "RESUME",
            "PLANNED",
            "REBOOT_CANCELED",
            "POWER_UP",
            "DYNAMIC_NORM",
        ],
        "up",
    ),
    "RESERVED": "reserved",
    **dict.fromkeys(["DRAIN", "MAINTENANCE", "POWER_DRAIN"], "drain"),
    **dict.fromkeys(
        [
            "DOWN",
            "ERROR",
            "FUTURE",
            "UNKNOWN",
            "INVALID",
            "NOT_RESPONDING",
            "FAIL",
            "POWERED_DOWN",
            "POWERING_DOWN",
            "POWERING_UP",
            "POWER_DOWN",
            "REBOOT_REQUESTED",
            "REBOOT_ISSUED",
            "INVALID_REG",
            "DYNAMIC_FUTURE",
        ],
        "down",
    ),
}
"""Each word of a node state list (base states and flags) and what it makes the node."""
_RANK: dict[NodeStateName, int] = {"up": 0, "reserved": 1, "drain": 2, "down": 3}


def node_state_of(words: Any) -> NodeStateName:
    """A node state list of the data_parser formats (``["IDLE", "DRAIN"]``) → the wire's
    state: its most restrictive word. ValueError for a word Slurm 24.11 does not have,
    or for no words."""
    if not isinstance(words, list) or not words:
        raise ValueError(f"node state {words!r} is not a list of words")
    unknown = [w for w in words if str(w).upper() not in _NODE_WORDS]
    if unknown:
        raise ValueError(f"unknown node state {unknown} in {words}")
    return max((_NODE_WORDS[str(w).upper()] for w in words), key=_RANK.__getitem__)
