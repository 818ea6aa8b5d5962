"""Symmetry between interchangeable nodes in PCP3's node-level model ("going
further"; off by default, see ``PCP3Dispatcher.node_symmetry``).

Two nodes are interchangeable when no constraint of the model tells them apart: the same
capacity, the same running loads (length and demand), and for every modelled job either
both or neither among its hosts, with the same ``m[i,n]``. Swapping the ``x[i,n]`` of two
such nodes maps a solution to one of the same objective, so within each group the model
may ask for the nodes' total units to be non-increasing in node order; a plan is moved
into that form by renaming its nodes, fullest first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

from ortools.sat.python import cp_model

from cpsched.core.cp.pcp3_greedy import Hosts, NodePlan

Group = tuple[int, ...]
"""Interchangeable nodes, ascending."""


def interchangeable_nodes(
    caps: Sequence[Sequence[int]],
    loads: Mapping[tuple[int, int], Sequence[int]],
    hosts: Sequence[Hosts],
) -> list[Group]:
    """Groups of two or more interchangeable nodes among the nodes hosting some job."""
    held: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    for (node, length), demand in loads.items():
        held.setdefault(node, []).append((length, tuple(demand)))
    m_of = [dict(h) for h in hosts]
    hosting = sorted({n for h in hosts for n, _ in h})
    groups: dict[tuple[object, ...], list[int]] = {}
    for n in hosting:
        key = (tuple(caps[n]), tuple(sorted(held.get(n, ()))), tuple(m.get(n, 0) for m in m_of))
        groups.setdefault(key, []).append(n)
    return [tuple(g) for g in groups.values() if len(g) > 1]


def order_groups(
    model: cp_model.CpModel,
    units: Sequence[Sequence[tuple[int, cp_model.IntVar]]],
    groups: Sequence[Group],
) -> int:
    """Post "non-increasing total units in node order" in every group; the count posted."""
    if not groups:
        return 0  # the default: indexing every x[i,n] by node cost 5% of a CTC build
    on_node: dict[int, list[cp_model.IntVar]] = {}
    for xs in units:
        for n, x in xs:
            on_node.setdefault(n, []).append(x)
    posted = 0
    for group in groups:
        for a, b in pairwise(group):
            model.add(sum(on_node[a]) >= sum(on_node[b]))
            posted += 1
    return posted


def canonical(plan: NodePlan, groups: Sequence[Group]) -> NodePlan:
    """``plan`` with each group's nodes renamed so that the fullest comes first: the same
    plan up to interchangeable nodes, and a solution of the model with ``order_groups``."""
    rename: dict[int, int] = {}
    for group in groups:
        total = dict.fromkeys(group, 0)
        for per_node in plan.units.values():
            for n, u in per_node.items():
                if n in total:
                    total[n] += u
        fullest = sorted(group, key=lambda n: -total[n])  # stable: ties keep node order
        rename.update(zip(fullest, group, strict=True))
    units = {
        job: {rename.get(n, n): u for n, u in per_node.items()}
        for job, per_node in plan.units.items()
    }
    return NodePlan(dict(plan.starts), units)
