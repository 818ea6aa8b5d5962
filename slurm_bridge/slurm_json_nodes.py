"""Read the nodes of Slurm's JSON: 22.05's ``sinfo --json`` and 23.11-24.11's ``scontrol
--json show nodes`` (also slurmrestd's ``nodes``): one record per node, with its
capacity, what is allocated on it, its state, partitions and features.

Slurm 24.11's ``sinfo --json`` has one record per node *group* under ``sinfo`` and no
per-node list: it is not read (``json_argvs`` runs ``scontrol`` there instead).
"""

from __future__ import annotations

from typing import Any

from cpsched.slurm_bridge.model import NodeView
from cpsched.slurm_bridge.slurm_common import node_state
from cpsched.slurm_bridge.slurm_json_doc import (
    NEWER_FORMATS,
    Doc,
    JsonOrigin,
    data_format,
    records,
)
from cpsched.slurm_bridge.slurm_json_states import node_state_of
from cpsched.slurm_bridge.slurm_shape import parse_gres

SINFO = JsonOrigin("sinfo --json")


def parse_nodes(
    doc: Doc, partitions: list[str], *, origin: JsonOrigin = SINFO
) -> dict[str, NodeView]:
    """The nodes of ``doc`` in the wanted partitions (all when ``partitions`` is []).
    Anything not understood is an error for the whole read (StateParseError naming the
    command and Slurm's version)."""
    newer = data_format(doc, origin) in NEWER_FORMATS
    hint = (
        ""
        if "nodes" in doc or "sinfo" not in doc
        else (
            " (since Slurm 23.02, sinfo --json lists node groups: the bridge reads "
            "`scontrol --json show nodes` there)"
        )
    )
    nodes: dict[str, NodeView] = {}
    for raw in records(doc, "nodes", origin, hint):
        try:
            parts = tuple(raw.get("partitions") or ())
            if partitions and not set(parts) & set(partitions):
                continue
            nodes[raw["name"]] = _node(raw, parts, newer)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            name = raw.get("name", "?") if isinstance(raw, dict) else "?"
            raise origin.error(doc, f"node {name}: {type(exc).__name__}: {exc}") from None
    return nodes


def _node(raw: dict[str, Any], parts: tuple[str, ...], newer: bool) -> NodeView:
    capacity = {"cpu": int(raw["cpus"]), "mem": int(raw.get("real_memory") or 0)}
    capacity.update(parse_gres(raw.get("gres")))
    used = {"cpu": int(raw.get("alloc_cpus") or 0), "mem": int(raw.get("alloc_memory") or 0)}
    used.update(parse_gres(raw.get("gres_used")))
    if newer:
        state = node_state_of(raw.get("state"))
    else:
        state = node_state(str(raw.get("state", "")), raw.get("state_flags") or ())
    return NodeView(
        name=raw["name"],
        capacity=capacity,
        used={r: used.get(r, 0) for r in capacity},
        state=state,
        partitions=parts,
        features=_words(raw.get("active_features")),
        cpus_per_core=max(1, int(raw.get("threads") or 1)),
    )


def _words(value: Any) -> tuple[str, ...]:
    """A node's features: ``"skylake,ib"`` (v0.0.38) or a list (the data_parser
    formats) → names."""
    if isinstance(value, list):
        return tuple(str(v) for v in value if v)
    return tuple(w for w in str(value or "").split(",") if w and w != "(null)")
