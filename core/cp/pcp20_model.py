"""The PCP'20 position model in CP-SAT.

Per modelled type ``r`` the units of the machine are numbered in node order: node ``n``
holds positions ``[off[n,r], off[n,r] + cap[n,r])``. Each unit ``k`` of job ``i`` gets a
position ``p[i,k,r]`` per requested type and occupies ``[s_i, s_i + d_i) × [p, p + ureq)``;
``AddNoOverlap2D`` per type keeps rectangles apart, running jobs included as fixed
rectangles packed from the bottom of their nodes.

"On one node" is not the paper's ``node_of[p]`` element lookup, which CP-SAT expands
into one literal per node: each unit has a node index ``node[i,k]`` over its host nodes,
and each type's position is bounded by ``AddElement`` tables of the nodes' lowest and
highest positions. One literal ``b[i,k,n] ⇔ node = n`` per host node with linear bounds
would be about nine times the variables and a presolve too slow for the deadline.

The identical units of a job are ordered (ascending positions on its first type, hence
non-decreasing nodes, ``order_units``): it breaks their symmetry, so the search proves
optimality more often. There is no time cumulative per type: CP-SAT's no-overlap-2D
already reasons on that energy. The measurements: docs/results/cp-dispatchers.md.

Positions count the snapshot's resource units divided by the type's gcd over node
capacities and unit requests (exact; e.g. memory in MB with GB-multiple requests
becomes GB), which keeps ``C_r`` small without ever splitting a unit's request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from math import gcd

from ortools.sat.python import cp_model

from cpsched.core.cp.bulk import Model, add_strategy, indices_of
from cpsched.core.cp.pcp3 import _break_symmetry
from cpsched.core.cp.pcp3_greedy import Hosts, node_capacities, unit_demand
from cpsched.core.cp.prepare import Prepared, to_units
from cpsched.core.durations import Durations, remaining
from cpsched.core.problem import Snapshot

Rect = tuple[int, int, int, int]
"""``(start, end, low, high)``: time × position, half-open."""
Units = list[tuple[int, tuple[int, ...]]]
"""A job's units as ``(node, position per type)``, 0 for a type not requested."""
Placed = dict[str, tuple[int, Units]]
"""A plan on positions: per job, its start and units."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Scaled capacities and offsets per node and modelled type."""

    scale: tuple[int, ...]
    caps: tuple[tuple[int, ...], ...]
    offsets: tuple[tuple[int, ...], ...]
    total: tuple[int, ...]

    def ureq(self, unit_request: Sequence[int]) -> tuple[int, ...]:
        return tuple(a // g for a, g in zip(unit_request, self.scale, strict=True))


def layout(snapshot: Snapshot, prepared: Prepared) -> Layout:
    raw = node_capacities(snapshot, prepared)
    amounts = [list(col) for col in zip(*raw, strict=True)] if raw else []
    for j in prepared.jobs:
        for k, a in enumerate(unit_demand(j, prepared)):
            amounts[k].append(a)
    for rj in snapshot.running:
        for k, r in enumerate(prepared.types):
            amounts[k].append(rj.job.unit_request[r])
    scale = tuple(max(1, gcd(*col)) for col in amounts)
    caps = tuple(tuple(c // g for c, g in zip(row, scale, strict=True)) for row in raw)
    offsets, acc = [], [0] * len(scale)
    for row in caps:
        offsets.append(tuple(acc))
        acc = [a + c for a, c in zip(acc, row, strict=True)]
    return Layout(scale, caps, tuple(offsets), tuple(acc))


def running_rects(
    snapshot: Snapshot, durations: Durations, prepared: Prepared, lay: Layout
) -> list[list[list[Rect]]]:
    """Fixed rectangles of the running jobs per type: on each node, consecutive positions
    from its offset (they fit: the node's usage is within its capacity), the longest-
    remaining job lowest, so what they free is always one block at the node's top: real
    units have no positions, and any other layout would fragment nodes artificially."""
    rects: list[list[list[Rect]]] = [[[] for _ in prepared.types] for _ in lay.caps]
    cursor = [list(o) for o in lay.offsets]
    lengths = [
        to_units(remaining(rj, durations[rj.job.id], snapshot.time), prepared.time_unit)
        for rj in snapshot.running
    ]
    for length, rj in sorted(zip(lengths, snapshot.running, strict=True), key=lambda x: -x[0]):
        ureq = lay.ureq([rj.job.unit_request[r] for r in prepared.types])
        for node, units in rj.allocation:
            for k, a in enumerate(ureq):
                if a:
                    low = cursor[node][k]
                    cursor[node][k] += units * a
                    here = rects[node][k]
                    if here and here[-1][1] == length:  # equal ends, adjacent: one rectangle
                        here[-1] = (0, length, here[-1][2], low + units * a)
                    else:
                        here.append((0, length, low, low + units * a))
    return rects


@dataclass(frozen=True, slots=True)
class PositionModel:
    model: cp_model.CpModel
    starts: tuple[cp_model.IntVar, ...]
    nodes: tuple[tuple[cp_model.IntVar, ...], ...]
    """Per job, ``node[i,k]`` of each unit."""
    positions: tuple[tuple[tuple[cp_model.IntVar | None, ...], ...], ...]
    """Per job and unit, ``p[i,k,r]`` per modelled type (None where not requested)."""
    variables: int
    constraints: int
    intervals: int

    def decision_variables(self) -> list[cp_model.IntVar]:
        """Starts, nodes, then positions: the order of hints and values."""
        ps = [p for job in self.positions for unit in job for p in unit if p is not None]
        return [*self.starts, *(n for ns in self.nodes for n in ns), *ps]

    def hint_values(self, prepared: Prepared, placed: Placed) -> list[int]:
        """``placed`` in ``decision_variables()`` order."""
        units = [placed[j.job.id][1] for j in prepared.jobs]
        positions = [
            q
            for ps, us in zip(self.positions, units, strict=True)
            for unit_ps, (_, where) in zip(ps, us, strict=True)
            for p, q in zip(unit_ps, where, strict=True)
            if p is not None
        ]
        nodes = [n for us in units for n, _ in us]
        return [*(placed[j.job.id][0] for j in prepared.jobs), *nodes, *positions]


def build_position_model(
    snapshot: Snapshot,
    durations: Durations,
    prepared: Prepared,
    hosts: Sequence[Hosts],
    *,
    order_units: bool = True,
    merge_running: bool = True,
    tick: Callable[[], None] = lambda: None,
) -> PositionModel:
    """The position model; ``tick`` is called before each job's variables are built (the
    deadline check; it raises to stop). ``merge_running``: see ``merged``."""
    model = Model()
    lay = layout(snapshot, prepared)
    width = len(prepared.types)
    xs: list[list[cp_model.IntervalVar]] = [[] for _ in range(width)]
    ys: list[list[cp_model.IntervalVar]] = [[] for _ in range(width)]
    held: dict[int, cp_model.IntervalVar] = {}  # one fixed x-interval per running length
    running = running_rects(snapshot, durations, prepared, lay)
    for k, rects in enumerate(zip(*running, strict=True)):
        fixed = [rect for node_rects in rects for rect in node_rects]
        for _, end, low, high in merged(fixed) if merge_running else fixed:
            if end not in held:
                held[end] = model.new_fixed_size_interval_var(0, end, f"held_{end}")
            xs[k].append(held[end])
            ys[k].append(model.new_fixed_size_interval_var(low, high - low, ""))
    starts, node_vars, positions = [], [], []
    bounds_of: dict[tuple[tuple[int, ...], int, int], _Bounds] = {}
    intervals = len(held) + sum(len(y) for y in ys)
    for j, job_hosts in zip(prepared.jobs, hosts, strict=True):
        tick()
        upper = prepared.horizon if j.latest is None else min(j.latest, prepared.horizon)
        start = model.new_int_var(0, upper, f"start_{j.job.id}")
        run = model.new_fixed_size_interval_var(start, j.length, f"run_{j.job.id}")
        starts.append(start)
        intervals += 1
        ureq = lay.ureq(unit_demand(j, prepared))
        host_ids = tuple(n for n, _ in job_hosts)
        node_domain = cp_model.Domain.from_values(host_ids)
        # A job's units, and jobs of one unit request on the same hosts, share their
        # position bounds: computed once, not per unit (per unit, a third of a PCP'20 call).
        bounds: list[_Bounds | None] = []
        for k, a in enumerate(ureq):
            key = (host_ids, k, a)
            if a and key not in bounds_of:
                bounds_of[key] = _bounds(lay, host_ids, k, a)
            bounds.append(bounds_of[key] if a else None)
        job_nodes, job_positions = [], []
        for u in range(j.job.units):
            tick()  # per unit: a Curie job has hundreds, each over thousands of hosts
            node = model.new_int_var_from_domain(node_domain, f"node_{j.job.id}_{u}")
            unit_ps: list[cp_model.IntVar | None] = []
            for k, a in enumerate(ureq):
                b = bounds[k]
                if b is None:
                    unit_ps.append(None)
                    continue
                p = model.new_int_var_from_domain(b.domain, f"p_{j.job.id}_{u}_{k}")
                xs[k].append(run)
                ys[k].append(model.new_fixed_size_interval_var(p, a, ""))
                intervals += 1
                unit_ps.append(p)
                if len(host_ids) > 1:  # else the domain holds that node's range only
                    _link(model, node, p, b)
            job_nodes.append(node)
            job_positions.append(tuple(unit_ps))
        if order_units:  # units are interchangeable: ascending positions on the first type
            k0 = next(k for k, a in enumerate(ureq) if a)
            for prev, nxt in pairwise(job_positions):
                model.add(prev[k0] + ureq[k0] <= nxt[k0])  # type: ignore[operator]
            for left, right in pairwise(job_nodes):
                model.add(left <= right)
        node_vars.append(tuple(job_nodes))
        positions.append(tuple(job_positions))
    for k in range(width):
        if xs[k]:
            model.add_no_overlap_2d(xs[k], ys[k])
    model.minimize(sum(j.weight * s for j, s in zip(prepared.jobs, starts, strict=True)))
    _break_symmetry(model, prepared, starts)
    add_strategy(model, indices_of(starts), cp_model.CHOOSE_LOWEST_MIN, cp_model.SELECT_MIN_VALUE)
    proto = model.proto
    return PositionModel(
        model,
        tuple(starts),
        tuple(node_vars),
        tuple(positions),
        len(proto.variables),
        len(proto.constraints),
        intervals,
    )


def merged(rects: Iterable[Rect]) -> list[Rect]:
    """The running jobs' fixed rectangles of one type, those that touch along the position
    axis and end together joined into one (all start at 0). Positions run on across node
    boundaries, so whole nodes held until the same time, as a many-node job holds them,
    become one rectangle instead of one per node: the no-overlap constraint then grows
    with the running jobs, not with the nodes they hold (docs/results/cp-dispatchers.md)."""
    out: list[Rect] = []
    for rect in sorted(rects, key=lambda r: r[2]):
        if out and out[-1][1] == rect[1] and out[-1][3] == rect[2]:
            out[-1] = (0, rect[1], out[-1][2], rect[3])
        else:
            out.append(rect)
    return out


MAX_PIECES = 16
"""Above this many linear pieces, a unit's position bounds are element tables."""


@dataclass(frozen=True, slots=True)
class _Piece:
    """Consecutive hosts ``first..last`` over which both bounds are linear in the node."""

    first: int
    last: int
    lo: tuple[int, int]
    """``(a, b)``: the lowest start position on node ``n`` is ``a + b·n``."""
    hi: tuple[int, int]


@dataclass(frozen=True, slots=True)
class _Bounds:
    """Where a unit's position of one type may lie, given its node among ``hosts``."""

    domain: cp_model.Domain
    """The union of the hosts' ranges."""
    lo: list[int]
    """Lowest start position on each node of the machine (a table indexed by node)."""
    hi: list[int]
    pieces: list[_Piece] | None
    """The hosts cut into runs on which the bounds are linear; None if there are more
    than ``MAX_PIECES``."""


def _bounds(lay: Layout, hosts: Sequence[int], k: int, a: int) -> _Bounds:
    lo = [o[k] for o in lay.offsets]
    hi = [o[k] + c[k] - a for o, c in zip(lay.offsets, lay.caps, strict=True)]
    domain = cp_model.Domain.from_intervals([[lo[n], hi[n]] for n in hosts])
    return _Bounds(domain, lo, hi, _pieces(hosts, lo, hi))


def _pieces(hosts: Sequence[int], lo: Sequence[int], hi: Sequence[int]) -> list[_Piece] | None:
    """``hosts`` (sorted) cut greedily into the longest runs over which ``lo`` and ``hi``
    are both linear in the node index."""
    pieces: list[_Piece] = []
    i = 0
    while i < len(hosts):
        if len(pieces) == MAX_PIECES:
            return None
        j = i + 1  # hosts[i:j] is the run so far
        lines = (lo[hosts[i]], 0), (hi[hosts[i]], 0)
        if j < len(hosts):
            pair = hosts[i : j + 1]
            line_lo, line_hi = _line(pair, lo), _line(pair, hi)
            if line_lo is not None and line_hi is not None:
                lines = line_lo, line_hi
                j += 1
                (a_lo, b_lo), (a_hi, b_hi) = lines
                while j < len(hosts) and (
                    lo[hosts[j]] == a_lo + b_lo * hosts[j]
                    and hi[hosts[j]] == a_hi + b_hi * hosts[j]
                ):
                    j += 1
        pieces.append(_Piece(hosts[i], hosts[j - 1], *lines))
        i = j
    return pieces


def _link(model: cp_model.CpModel, node: cp_model.IntVar, p: cp_model.IntVar, b: _Bounds) -> None:
    """A unit's position ``p`` of one type lies within the range of the unit's node.

    Where the hosts' lowest and highest start positions are linear in the node index
    (identical hosts, numbered in order: every homogeneous machine), two linear
    inequalities say it; where they are linear on a few runs of hosts (the node groups of
    a heterogeneous machine), one literal per run selects its inequalities. Otherwise the
    bounds are looked up by ``AddElement`` on the index, which CP-SAT expands into one
    literal per node: on 120 HPC2N nodes that made 198,000 booleans from 1,100 lookups
    (a 0.05 s run took 0.8 s before it looked at its limit), and on Curie's 5,544 nodes
    in three groups CP-SAT spent up to 3.9 s loading such tables."""
    if b.pieces is not None and len(b.pieces) == 1:
        (a_lo, b_lo), (a_hi, b_hi) = b.pieces[0].lo, b.pieces[0].hi
        model.add(p >= a_lo + b_lo * node)
        model.add(p <= a_hi + b_hi * node)
        return
    if b.pieces is not None:
        chosen = [model.new_bool_var("") for _ in b.pieces]
        model.add_exactly_one(chosen)
        for lit, piece in zip(chosen, b.pieces, strict=True):
            (a_lo, b_lo), (a_hi, b_hi) = piece.lo, piece.hi
            model.add(node >= piece.first).only_enforce_if(lit)
            model.add(node <= piece.last).only_enforce_if(lit)
            model.add(p >= a_lo + b_lo * node).only_enforce_if(lit)
            model.add(p <= a_hi + b_hi * node).only_enforce_if(lit)
        return
    lo_v = model.new_int_var(min(b.lo), max(b.lo), "")
    hi_v = model.new_int_var(min(b.hi), max(b.hi), "")
    model.add_element(node, b.lo, lo_v)
    model.add_element(node, b.hi, hi_v)
    model.add(lo_v <= p)
    model.add(p <= hi_v)


def _line(xs: Sequence[int], table: Sequence[int]) -> tuple[int, int] | None:
    """``(a, b)`` with ``table[x] == a + b·x`` for every ``x`` in ``xs`` (sorted, ≥ 2 of
    them), in integers; None when no such line exists."""
    x0, x1 = xs[0], xs[1]
    step, rest = divmod(table[x1] - table[x0], x1 - x0)
    if rest:
        return None
    a = table[x0] - step * x0
    if all(table[x] == a + step * x for x in xs):
        return a, step
    return None
