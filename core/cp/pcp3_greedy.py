"""Greedy node-level plans of the PCP3 model: its solution hints.

A serial schedule generation on the real nodes: jobs are taken one by one and each starts
at the earliest time its units fit on the nodes for its whole length, given the running
jobs (on their real nodes until their expected end) and the jobs placed before it; the
units go best-fit (the nodes with the least free capacity of the job's types first).
Every plan built this way is a solution of the PCP3 model (same capacities, lengths and
time units), so it hints starts *and* allocations.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from cpsched.core.cp.greedy import StepProfile, ratio_order
from cpsched.core.cp.prepare import ModelJob, Prepared, to_units
from cpsched.core.durations import Durations, remaining
from cpsched.core.problem import Allocation, Job, Snapshot
from cpsched.core.site import node_choices

Hosts = tuple[tuple[int, int], ...]
"""A job's candidate nodes: ``(node, m[i,n])`` pairs, ``m[i,n] >= 1``, in ascending node
order (``_Machine.earliest``'s early stop relies on it)."""


def unit_demand(mj: ModelJob, prepared: Prepared) -> tuple[int, ...]:
    """``ureq[i,r]`` for each modelled type, aligned with ``Prepared.types``."""
    return tuple(mj.job.unit_request[r] for r in prepared.types)


def node_capacities(snapshot: Snapshot, prepared: Prepared) -> list[tuple[int, ...]]:
    return [tuple(n.capacity[r] for r in prepared.types) for n in snapshot.nodes]


def hosts_of(mj: ModelJob, prepared: Prepared, caps: Sequence[Sequence[int]]) -> Hosts:
    """Nodes that can hold a unit of ``mj`` on their own; ``m[i,n]`` is capped at ``u_i``
    (more never helps and only widens the domain)."""
    wanted = [(k, a) for k, a in enumerate(unit_demand(mj, prepared)) if a]
    hosts: list[tuple[int, int]] = []
    for n, cap in enumerate(caps):
        m = min(cap[k] // a for k, a in wanted)
        if m > 0:
            hosts.append((n, min(m, mj.job.units)))
    return tuple(hosts)


def _unit_hosts(ureq: Sequence[int], caps: Sequence[Sequence[int]]) -> Hosts:
    """Nodes that can hold a unit of request ``ureq``, with how many units they hold."""
    wanted = [(k, a) for k, a in enumerate(ureq) if a]
    hosts: list[tuple[int, int]] = []
    for n, cap in enumerate(caps):
        m = min(cap[k] // a for k, a in wanted)
        if m > 0:
            hosts.append((n, m))
    return tuple(hosts)


def hostable(snapshot: Snapshot, prepared: Prepared) -> tuple[Prepared, list[Hosts]]:
    """``prepared`` without the jobs no set of nodes could ever host (the PCP papers' reduction;
    never true for a job that fits now, nor for the guard, which fits the idle machine: a
    safety net), and each remaining job's hosts."""
    caps = node_capacities(snapshot, prepared)
    jobs, hosts = [], []
    # Jobs of one unit request have the same hosts up to the cap at u_i: the nodes are
    # scanned once per unit request, not once per job (Curie: 5,544 nodes).
    by_request: dict[tuple[int, ...], Hosts] = {}
    by_shape: dict[tuple[tuple[int, ...], int], Hosts] = {}
    for mj in prepared.jobs:
        ureq, units = unit_demand(mj, prepared), mj.job.units
        h = by_shape.get((ureq, units))
        if h is None:
            base = by_request.get(ureq)
            if base is None:
                base = by_request[ureq] = _unit_hosts(ureq, caps)
            h = by_shape[ureq, units] = tuple((n, m if m < units else units) for n, m in base)
        if mj.job.constraints is not None or not snapshot.site.empty:
            h = _within_rules(mj.job, snapshot, h)
        if sum(m for _, m in h) >= units:
            jobs.append(mj)
            hosts.append(h)
    if len(jobs) < len(prepared.jobs):
        prepared = replace(prepared, jobs=tuple(jobs))
    return prepared, hosts


def _within_rules(job: Job, snapshot: Snapshot, hosts: Hosts) -> Hosts:
    """``hosts`` cut to the nodes the site's rules let ``job`` use now, at most its
    units per node on each. What the model does not express (exclusive use, node
    counts, one partition for all nodes) the validator checks; a breach falls back."""
    features = [node.features for node in snapshot.nodes]
    choices = node_choices(job.constraints, job.time_limit, snapshot.site, features, snapshot.time)
    allowed: set[int] | None = None
    if all(choice.nodes is not None for choice in choices):
        allowed = {n for choice in choices if choice.nodes is not None for n in choice.nodes}
    c = job.constraints
    per_node = c.tasks_per_node if c is not None and c.tasks_per_node is not None else 1 << 62
    return tuple(
        (n, m if m < per_node else per_node) for n, m in hosts if allowed is None or n in allowed
    )


def node_loads(
    snapshot: Snapshot, durations: Durations, prepared: Prepared
) -> dict[tuple[int, int], list[int]]:
    """Running usage of the modelled types by ``(node, length in units)``: jobs releasing
    together on one node are merged into one fixed interval (same profile, fewer intervals)."""
    loads: dict[tuple[int, int], list[int]] = {}
    for rj in snapshot.running:
        ureq = [rj.job.unit_request[r] for r in prepared.types]
        if not any(ureq):
            continue
        rem = remaining(rj, durations[rj.job.id], snapshot.time)
        length = to_units(rem, prepared.time_unit)
        for node, units in rj.allocation:
            acc = loads.setdefault((node, length), [0] * len(ureq))
            for k, a in enumerate(ureq):
                acc[k] += units * a
    return loads


@dataclass(slots=True)
class NodePlan:
    starts: dict[str, int]
    """Start of every window job, in units from ``t``."""
    units: dict[str, dict[int, int]]
    """``x[i,n]``: units of each job on each node (nodes with none left out)."""

    def values(self, prepared: Prepared, hosts: Sequence[Hosts]) -> list[int]:
        """Starts, then ``x[i,n]`` job by job over each job's hosts (the model's order)."""
        ids = [mj.job.id for mj in prepared.jobs]
        xs = [self.units[i].get(n, 0) for i, h in zip(ids, hosts, strict=True) for n, _ in h]
        return [self.starts[i] for i in ids] + xs


class _Machine:
    """Per-node usage over time (step functions) and the times at which something ends,
    the only times other than 0 at which a job can become startable.

    The machine's pooled usage is kept beside it: a start at which the pool lacks the
    job's whole demand cannot work on the nodes either, and the pool says how far to
    skip. Without it, ``earliest`` would try every node at every end time: half of a
    PCP'20 call on HPC2N."""

    def __init__(
        self, caps: Sequence[Sequence[int]], loads: Mapping[tuple[int, int], list[int]]
    ) -> None:
        self.caps = caps
        width = len(caps[0]) if caps else 0
        self.cuts: list[list[int]] = [[0] for _ in caps]
        self.used: list[list[list[int]]] = [[[0] * width] for _ in caps]
        self.ends: list[int] = [0]
        self.pool = StepProfile([sum(cap[k] for cap in caps) for k in range(width)])
        for (node, length), demand in loads.items():
            self.add(0, length, ((node, demand),))

    def _split(self, node: int, at: int) -> int:
        cuts = self.cuts[node]
        k = bisect_right(cuts, at) - 1
        if cuts[k] != at:
            k += 1
            cuts.insert(k, at)
            self.used[node].insert(k, list(self.used[node][k - 1]))
        return k

    def add(self, start: int, length: int, usage: Iterable[tuple[int, Sequence[int]]]) -> None:
        """Use ``demand`` on each ``(node, demand)`` of ``usage`` on ``[start, start + length)``
        (one job's units: the pool and the end times are updated once, not per node)."""
        total = [0] * len(self.pool.capacity)
        for node, demand in usage:
            first, last = self._split(node, start), self._split(node, start + length)
            for row in self.used[node][first:last]:
                for k, a in enumerate(demand):
                    row[k] += a
            for k, a in enumerate(demand):
                total[k] += a
        self.pool.add(start, length, total)
        end = start + length
        i = bisect_left(self.ends, end)
        if i == len(self.ends) or self.ends[i] != end:
            self.ends.insert(i, end)

    def fit(
        self, node: int, start: int, length: int, wanted: Sequence[tuple[int, int]]
    ) -> tuple[int, float]:
        """Units fitting on ``node`` throughout ``[start, start + length)`` and the least
        free amount there (summed over the job's types, unweighted: best-fit's key)."""
        cuts, used, cap = self.cuts[node], self.used[node], self.caps[node]
        k = bisect_right(cuts, start) - 1
        end = start + length
        if len(wanted) == 1:  # the common case, kept lean: this is the greedy's inner loop
            ((r, a),) = wanted
            least = cap[r]
            while k < len(cuts) and cuts[k] < end:
                left = cap[r] - used[k][r]
                if left < a:
                    return 0, 0.0
                if left < least:
                    least = left
                k += 1
            return least // a, float(least)
        free = [cap[r] for r, _ in wanted]
        while k < len(cuts) and cuts[k] < end:
            row = used[k]
            for i, (r, a) in enumerate(wanted):
                left = cap[r] - row[r]
                if left < a:  # not one unit fits: most nodes of a busy machine
                    return 0, 0.0
                if left < free[i]:
                    free[i] = left
            k += 1
        units = min(f // a for f, (_, a) in zip(free, wanted, strict=True))
        return units, float(sum(free))

    def earliest(self, mj: ModelJob, ureq: Sequence[int], hosts: Hosts) -> tuple[int, Allocation]:
        wanted = [(k, a) for k, a in enumerate(ureq) if a]
        need = mj.job.units
        total_demand = [need * a for a in ureq]
        # The least free amount a node holding a unit can have (best-fit's key): once
        # nodes at that floor, met in node order, hold the job, no later node can come
        # before them in ``_best_fit``'s order, so the scan stops. On one-core nodes every
        # fitting node is at the floor: CTC's placements scanned all 338 nodes, now only
        # until `need` fitting ones are found.
        floor = float(sum(a for _, a in wanted))
        not_before = 0
        for start in list(self.ends):  # at the last end the machine is empty: always fits
            if start < not_before:
                continue
            blocked_until = self.pool.fits(start, mj.length, total_demand)
            if blocked_until is not None:
                not_before = blocked_until
                continue
            fits = []
            total = tight = 0
            for node, _ in hosts:
                units, left = self.fit(node, start, mj.length, wanted)
                if units:
                    fits.append((left, node, units))
                    total += units
                    if left == floor:
                        tight += units
                        if tight >= need:
                            break
            if total >= need:
                return start, _best_fit(fits, need)
        raise AssertionError(f"job {mj.job.id} fits no node even on the idle machine")


def _best_fit(fits: list[tuple[float, int, int]], need: int) -> Allocation:
    placed: list[tuple[int, int]] = []
    for _, node, units in sorted(fits):
        take = min(units, need)
        placed.append((node, take))
        need -= take
        if not need:
            break
    return tuple(sorted(placed))


def node_plan(
    snapshot: Snapshot,
    durations: Durations,
    prepared: Prepared,
    hosts: Sequence[Hosts],
    order: Sequence[ModelJob] | None = None,
    now_first: Mapping[str, Allocation] | None = None,
    tick: Callable[[], None] = lambda: None,
) -> NodePlan:
    """A greedy plan: the guarded job first (so its bound holds), then the jobs of
    ``now_first`` at 0 on the given nodes when they fit there for their whole length,
    then the others in ``order`` (default: priority order). ``tick`` is called before
    each greedy placement (the deadline check: one placement on thousands of nodes can
    take milliseconds, a whole plan seconds; it raises to stop)."""
    caps = node_capacities(snapshot, prepared)
    machine = _Machine(caps, node_loads(snapshot, durations, prepared))
    plan = NodePlan({}, {})
    index = {mj.job.id: i for i, mj in enumerate(prepared.jobs)}

    def place(mj: ModelJob, ureq: Sequence[int], start: int, allocation: Allocation) -> None:
        plan.starts[mj.job.id] = start
        plan.units[mj.job.id] = dict(allocation)
        machine.add(
            start, mj.length, [(node, [units * a for a in ureq]) for node, units in allocation]
        )

    def greedy(mj: ModelJob) -> None:
        tick()
        ureq = unit_demand(mj, prepared)
        place(mj, ureq, *machine.earliest(mj, ureq, hosts[index[mj.job.id]]))

    for mj in prepared.jobs:
        if mj.latest is not None:
            greedy(mj)
    for job_id, allocation in (now_first or {}).items():
        i = index.get(job_id)
        if i is None or job_id in plan.starts:
            continue
        mj = prepared.jobs[i]
        ureq = unit_demand(mj, prepared)
        wanted = [(k, a) for k, a in enumerate(ureq) if a]
        if all(machine.fit(n, 0, mj.length, wanted)[0] >= u for n, u in allocation):
            place(mj, ureq, 0, allocation)
    for mj in prepared.jobs if order is None else order:
        if mj.job.id not in plan.starts:
            greedy(mj)
    return plan


def candidate_node_plans(
    snapshot: Snapshot,
    durations: Durations,
    prepared: Prepared,
    hosts: Sequence[Hosts],
    now_first: Mapping[str, Allocation],
    tick: Callable[[], None] = lambda: None,
    previous: Sequence[ModelJob] | None = None,
) -> dict[str, NodePlan]:
    """The hints offered, by name (as HCP3's): priority order, Smith's ratio order
    (left out when it is the priority order: the plan would be the same), the
    heuristic's starts (with its allocations) first, and the previous call's order
    (``previous``, from ``greedy.previous_order``; left out when it is the ratio order).
    ``tick``: as ``node_plan``'s."""
    args = (snapshot, durations, prepared, hosts)
    plans = {"priority greedy": node_plan(*args, tick=tick)}
    by_ratio = ratio_order(prepared)
    if by_ratio != list(prepared.jobs):
        plans["ratio greedy"] = node_plan(*args, order=by_ratio, tick=tick)
    if now_first:
        plans["heuristic-seeded"] = node_plan(*args, now_first=now_first, tick=tick)
    if previous is not None and previous != by_ratio:
        plans["previous plan"] = node_plan(*args, order=previous, tick=tick)
    return plans


def nonzero(allocation: Iterable[tuple[int, int]]) -> Allocation:
    return tuple(sorted((n, u) for n, u in allocation if u > 0))
