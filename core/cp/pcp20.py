"""PCP'20: pure CP scheduling and allocation with the size-independent position model.

Steps as PCP3's (HCP3's fallback, ``prepare``, guard, ``solve_with_restarts``; PCP3's host
reduction and greedy node plans); the model is ``pcp20_model.build_position_model``.
Hint: each greedy node plan (priority, ratio, EASY-seeded) is replayed as a serial
schedule on positions (``position_plan``, first-fit rectangles; a node plan respects only
capacities, so a fragmented node moves a job to the earliest time it fits) and the
cheapest is a complete hint. Converting node plans without that repair left 1-2 units
per call unplaced at 50 jobs, and the partial hint cost a fallback in 3 of 10 calls.
Jobs planned at ``t`` start with one unit on ``node[i,k]`` for each unit ``k``.
"""

from __future__ import annotations

from bisect import insort
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from cpsched.core.allocators import Allocator
from cpsched.core.cp.budget import Budget, TooLarge
from cpsched.core.cp.bulk import indices_of
from cpsched.core.cp.flow import CPDispatcher, Formulation, cheapest
from cpsched.core.cp.greedy import plan_objective
from cpsched.core.cp.guard import Guard
from cpsched.core.cp.pcp3_greedy import (
    Hosts,
    NodePlan,
    candidate_node_plans,
    hostable,
    unit_demand,
)
from cpsched.core.cp.pcp20_model import (
    Layout,
    Placed,
    Rect,
    Units,
    build_position_model,
    layout,
    running_rects,
)
from cpsched.core.cp.prepare import (
    ModelConfig,
    ModelJob,
    Prepared,
)
from cpsched.core.cp.search import Clock, SearchConfig
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.problem import Decision, Snapshot, Start
from cpsched.core.state import DispatcherState


class PCP20Dispatcher(CPDispatcher):
    """PCP'20 with search control and fallback; constructor as PCP3's.
    ``order_units`` orders a job's identical units, ``merge_running`` joins the running
    jobs' rectangles (see ``pcp20_model``).

    ``max_unit_hosts`` caps Σ units × host nodes over the window: every unit's node
    variable, position domains and element tables list its hosts, and CP-SAT loads them
    before it looks at its time limit. On Curie (5,544 nodes, jobs of hundreds of 1-core
    units) the sum is 1.4 million in a median window, and a window of 221,000 took 6.6 s
    to solve in a 2 s call; Eurora-like windows stay under 19,000, HPC2N's and KTH's
    under 45,000 in nine windows of ten (at most 163,000). Above the cap the call falls
    back at once (status ``too_large``, reason "model too large")."""

    name = "pcp20"
    presolve_by_default = True
    allocates_in_model = True

    def __init__(
        self,
        allocator: Allocator | None = None,
        search: SearchConfig | None = None,
        model: ModelConfig | None = None,
        *,
        fallback: Dispatcher | None = None,
        clock: Clock | None = None,
        state: DispatcherState | None = None,
        order_units: bool = True,
        merge_running: bool = True,
        max_unit_hosts: int = 100_000,
    ) -> None:
        super().__init__(allocator, search, model, fallback=fallback, clock=clock, state=state)
        self.order_units = order_units
        self.merge_running = merge_running
        self.max_unit_hosts = max_unit_hosts

    def _reduce(self, snapshot: Snapshot, prepared: Prepared) -> tuple[Prepared, Any]:
        return hostable(snapshot, prepared)  # the context: the nodes that can host each job

    def _formulate(
        self,
        snapshot: Snapshot,
        durations: Durations,
        prepared: Prepared,
        context: Any,
        heuristic: Decision,
        budget: Budget,
    ) -> Formulation:
        hosts = context
        unit_hosts = sum(mj.job.units * len(h) for mj, h in zip(prepared.jobs, hosts, strict=True))
        if unit_hosts > self.max_unit_hosts:
            raise TooLarge(
                "hint",
                "model too large",
                f"{unit_hosts} unit-host pairs, above max_unit_hosts {self.max_unit_hosts}",
            )
        plans = candidate_node_plans(
            snapshot,
            durations,
            prepared,
            hosts,
            {s.job_id: s.allocation for s in heuristic.starts},
            tick=lambda: budget.check("hint"),
            previous=self._previous_order(prepared),
        )
        lay = layout(snapshot, prepared)
        running = running_rects(snapshot, durations, prepared, lay)
        placed = {
            name: position_plan(lay, running, prepared, hosts, p, lambda: budget.check("hint"))
            for name, p in plans.items()
        }
        costs = {
            name: plan_objective(prepared, {i: s for i, (s, _) in p.items()})
            for name, p in placed.items()
        }
        chosen = cheapest(costs)
        budget.mark("hint")
        budget.check("build")
        built = build_position_model(
            snapshot,
            durations,
            prepared,
            hosts,
            order_units=self.order_units,
            merge_running=self.merge_running,
            tick=lambda: budget.check("build"),
        )
        return Formulation(
            model=built.model,
            indices=indices_of(built.decision_variables()),
            hint=built.hint_values(prepared, placed[chosen]),
            size=(built.variables, built.constraints, built.intervals),
            hint_name=chosen,
            hint_costs=costs,
            payload=built,
        )

    def _extract(
        self,
        snapshot: Snapshot,
        prepared: Prepared,
        context: Any,
        formulation: Formulation,
        values: Sequence[int],
        guard: Guard | None,
    ) -> tuple[list[Start], dict[str, int], tuple[str, ...]]:
        count = len(prepared.jobs)
        plan = {j.job.id: v for j, v in zip(prepared.jobs, values[:count], strict=True)}
        node_values = iter(values[count:])
        starts = []
        for j, ns in zip(prepared.jobs, formulation.payload.nodes, strict=True):
            on_nodes = Counter(next(node_values) for _ in ns)
            if plan[j.job.id] == 0:
                starts.append(Start(j.job.id, tuple(sorted(on_nodes.items()))))
        return starts, plan, ()


class _Positions:
    """Rectangles placed so far per (node, type), for a serial schedule on positions."""

    def __init__(self, lay: Layout, running: list[list[list[Rect]]]) -> None:
        self.lay = lay
        self.rects = [[list(rects) for rects in row] for row in running]
        self.ends = {0} | {rect[1] for row in running for rects in row for rect in rects}

    def fit(self, n: int, s: int, e: int, ureq: Sequence[int], need: int) -> list[tuple[int, ...]]:
        """Up to ``need`` units on node ``n`` over ``[s, e)``, first-fit per type."""
        busy = {
            k: sorted((lo, hi) for rs, re, lo, hi in self.rects[n][k] if rs < e and s < re)
            for k, a in enumerate(ureq)
            if a
        }
        out: list[tuple[int, ...]] = []
        while len(out) < need:
            place = []
            for k, a in enumerate(ureq):
                low = self.lay.offsets[n][k]
                q = _first_fit(busy[k], low, low + self.lay.caps[n][k], a) if a else 0
                if q is None:
                    return out
                place.append(q)
            for k, a in enumerate(ureq):
                if a:
                    insort(busy[k], (place[k], place[k] + a))
            out.append(tuple(place))
        return out

    def earliest(
        self,
        mj: ModelJob,
        ureq: Sequence[int],
        tries: Sequence[tuple[int, Sequence[int]]],
        tick: Callable[[], None] = lambda: None,
    ) -> tuple[int, Units]:
        """The first of ``tries`` (start, nodes) where all units fit, then the earliest
        end time at which they fit on the last try's nodes (the idle machine always does).
        ``tick`` is called before each try (the deadline check; it raises to stop)."""
        *firsts, (_, hosts) = tries
        candidates = [*firsts, *((t, hosts) for t in sorted(self.ends))]
        for start, nodes in candidates:
            tick()
            units: Units = []
            for n in nodes:
                need = mj.job.units - len(units)
                units += [(n, q) for q in self.fit(n, start, start + mj.length, ureq, need)]
                if len(units) == mj.job.units:
                    return start, units
        raise AssertionError(f"job {mj.job.id} fits no node even on the idle machine")

    def add(self, start: int, length: int, ureq: Sequence[int], units: Units) -> None:
        for n, where in units:
            for k, a in enumerate(ureq):
                if a:
                    self.rects[n][k].append((start, start + length, where[k], where[k] + a))
        self.ends.add(start + length)


def position_plan(
    lay: Layout,
    running: list[list[list[Rect]]],
    prepared: Prepared,
    hosts: Sequence[Hosts],
    plan: NodePlan,
    tick: Callable[[], None] = lambda: None,
) -> Placed:
    """A serial schedule on positions following a node plan: jobs in the plan's start
    order (the guarded job first, as in the plan), each at the plan's start on the plan's
    nodes when its units fit there as rectangles, else at the earliest time they fit on
    any host (a node plan only respects capacities, so a node can be fragmented).
    ``tick`` is called before each job (the deadline check; it raises to stop)."""
    machine = _Positions(lay, running)
    rank = {mj.job.id: i for i, mj in enumerate(prepared.jobs)}
    host_of = dict(zip((mj.job.id for mj in prepared.jobs), hosts, strict=True))
    jobs = sorted(
        prepared.jobs,
        key=lambda mj: (mj.latest is None, plan.starts[mj.job.id], rank[mj.job.id]),
    )
    placed: Placed = {}
    for mj in jobs:
        tick()
        ureq = machine.lay.ureq(unit_demand(mj, prepared))
        mine = sorted(plan.units[mj.job.id])
        others = mine + [n for n, _ in host_of[mj.job.id] if n not in plan.units[mj.job.id]]
        tries = [(plan.starts[mj.job.id], mine), (0, others)]
        start, units = machine.earliest(mj, ureq, tries, tick)
        machine.add(start, mj.length, ureq, units)
        k0 = next(k for k, a in enumerate(ureq) if a)
        placed[mj.job.id] = (start, sorted(units, key=lambda u: u[1][k0]))  # the model's order
    return placed


def _first_fit(busy: list[tuple[int, int]], low: int, high: int, a: int) -> int | None:
    """The lowest ``q`` in ``[low, high − a]`` with ``[q, q + a)`` clear of ``busy`` (sorted)."""
    q = low
    for lo, hi in busy:
        if hi <= q or lo >= high:
            continue
        if lo >= q + a:
            break
        q = max(q, hi)
    return q if q + a <= high else None
