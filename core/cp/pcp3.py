"""PCP3: pure CP scheduling *and* allocation on the real nodes (PCP'19).

Steps as HCP3's (shared: fallback first, ``prepare``, guard, ``solve_with_restarts``);
the hint is the best greedy node-level plan, and the jobs planned at ``t`` start on the
nodes the model chose, so nothing planned now is postponed.

Model: per job a start and a fixed-size interval; per job and host node an integer
``x[i,n] ∈ [0, m[i,n]]`` (units there) with ``Σ_n x[i,n] = u_i``; per (node, type) a
cumulative over the *job's* interval with variable demand ``x[i,n]·ureq[i,r]`` (zero is
allowed), plus the running jobs' fixed usage. The paper's ``m[i,n]`` optional
unit-intervals are interchangeable (units are identical), so one integer per (job, node)
counts them without the symmetry. ``optional=True`` adds one optional interval per
(job, node), present iff ``x[i,n] > 0``: on 64-node Eurora-like queues it improved the
hint more at 20 jobs (14% against 5%, 2 s), but its presolve took ~1.4 s at 50 jobs
and 8 of 10 calls fell back; the default found a solution in every call. A redundant
pooled cumulative per type (HCP3's relaxation, ``pooled``) gives the objective bound
the variable demands hide (5% against 3% improvement at 20 jobs).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from cpsched.core.allocators import Allocator
from cpsched.core.cp.budget import Budget, TooLarge
from cpsched.core.cp.bulk import Model, add_strategy, add_sum_equal, indices_of, new_int_vars
from cpsched.core.cp.flow import CPDispatcher, Formulation, cheapest
from cpsched.core.cp.greedy import plan_objective
from cpsched.core.cp.guard import Guard
from cpsched.core.cp.node_symmetry import Group, canonical, interchangeable_nodes, order_groups
from cpsched.core.cp.pcp3_greedy import (
    Hosts,
    candidate_node_plans,
    hostable,
    node_capacities,
    node_loads,
    nonzero,
    unit_demand,
)
from cpsched.core.cp.prepare import ModelConfig, Prepared
from cpsched.core.cp.search import Clock, SearchConfig
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.problem import Decision, Snapshot, Start
from cpsched.core.state import DispatcherState

_Demand = tuple[cp_model.IntervalVar, cp_model.LinearExprT]
"""An interval and its demand on one (node, type) pair: a cumulative's item."""


@dataclass(frozen=True, slots=True)
class NodeModel:
    model: cp_model.CpModel
    starts: tuple[cp_model.IntVar, ...]
    """Start variables (units from ``t``), aligned with ``Prepared.jobs``."""
    units: tuple[tuple[tuple[int, cp_model.IntVar], ...], ...]
    """Per job, ``(node, x[i,n])`` for each host node."""
    unit_indices: tuple[range, ...]
    """Per job, the proto indices of its ``x[i,n]`` (consecutive, as ``units``)."""
    decision_indices: list[int]
    """Starts, then every ``x[i,n]`` job by job: the order of hints and values."""
    variables: int
    constraints: int
    intervals: int


def build_node_model(
    snapshot: Snapshot,
    durations: Durations,
    prepared: Prepared,
    hosts: Sequence[Hosts],
    *,
    optional: bool = False,
    pooled: bool = True,
    node_groups: Sequence[Group] = (),
    tick: Callable[[], None] = lambda: None,
) -> NodeModel:
    """The node-level model of ``prepared``; ``hosts[i]`` are job i's nodes and ``m[i,n]``.
    ``node_groups``: interchangeable nodes whose symmetry to break (``node_symmetry``).
    ``tick`` is called before each job (the deadline check; it raises to stop)."""
    model = Model()
    caps = node_capacities(snapshot, prepared)
    starts: list[cp_model.IntVar] = []
    runs: list[cp_model.IntervalVar] = []
    units: list[tuple[tuple[int, cp_model.IntVar], ...]] = []
    unit_indices: list[range] = []
    # (node, type) → intervals and demands; only (node, type) pairs some job can use.
    usage: defaultdict[tuple[int, int], list[_Demand]] = defaultdict(list)
    peak: defaultdict[tuple[int, int], int] = defaultdict(int)  # the most usage can demand
    intervals = 0
    for j, job_hosts in zip(prepared.jobs, hosts, strict=True):
        tick()
        upper = prepared.horizon if j.latest is None else min(j.latest, prepared.horizon)
        start = model.new_int_var(0, upper, f"start_{j.job.id}")
        run = model.new_fixed_size_interval_var(start, j.length, f"run_{j.job.id}")
        starts.append(start)
        runs.append(run)
        intervals += 1
        demanded = [(k, a) for k, a in enumerate(unit_demand(j, prepared)) if a]
        first = len(model.proto.variables)  # new_int_vars' indices are consecutive
        x_vars = new_int_vars(model, [m for _, m in job_hosts])
        xs = [(n, x) for (n, _), x in zip(job_hosts, x_vars, strict=True)]
        for (n, m), x in zip(job_hosts, x_vars, strict=True):
            iv = run
            if optional:
                present = model.new_bool_var(f"on_{j.job.id}_{n}")
                model.add(x >= 1).only_enforce_if(present)
                model.add(x == 0).only_enforce_if(~present)
                iv = model.new_optional_fixed_size_interval_var(start, j.length, present, "")
                intervals += 1
            for k, a in demanded:
                usage[n, k].append((iv, x * a))
                peak[n, k] += m * a
        unit_indices.append(range(first, first + len(x_vars)))
        add_sum_equal(model, unit_indices[-1], j.job.units)
        units.append(tuple(xs))
    held: dict[int, cp_model.IntervalVar] = {}
    for (n, length), demand in sorted(node_loads(snapshot, durations, prepared).items()):
        for k, a in enumerate(demand):
            if a and (n, k) in usage:
                if length not in held:  # one fixed interval per release time, shared
                    held[length] = model.new_fixed_size_interval_var(0, length, f"held_{length}")
                usage[n, k].append((held[length], a))
                peak[n, k] += a
    intervals += len(held)
    for (n, k), items in usage.items():
        # A pair whose total possible demand fits its capacity cannot be violated.
        if peak[n, k] > caps[n][k]:
            model.add_cumulative([iv for iv, _ in items], [d for _, d in items], caps[n][k])
    if pooled:  # redundant: the pooled model of HCP3 is a relaxation of this one
        for k, capacity in enumerate(prepared.capacity):
            pool = [(iv, j.demand[k]) for j, iv in zip(prepared.jobs, runs, strict=True)]
            for load in prepared.running:
                if load.length not in held:
                    held[load.length] = model.new_fixed_size_interval_var(0, load.length, "")
                    intervals += 1
                pool.append((held[load.length], load.demand[k]))
            pool = [(iv, a) for iv, a in pool if a]
            model.add_cumulative([iv for iv, _ in pool], [a for _, a in pool], capacity)
    model.minimize(sum(j.weight * s for j, s in zip(prepared.jobs, starts, strict=True)))
    _break_symmetry(model, prepared, starts)
    order_groups(model, units, node_groups)
    # First descent as the papers': earliest-startable, highest-priority job first, then
    # its allocation, most units on the first nodes (consolidation).
    start_indices = indices_of(starts)
    add_strategy(model, start_indices, cp_model.CHOOSE_LOWEST_MIN, cp_model.SELECT_MIN_VALUE)
    xs_all = [i for xs in unit_indices for i in xs]
    add_strategy(model, xs_all, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
    proto = model.proto
    return NodeModel(
        model,
        tuple(starts),
        tuple(units),
        tuple(unit_indices),
        [*start_indices, *xs_all],
        len(proto.variables),
        len(proto.constraints),
        intervals,
    )


def _break_symmetry(
    model: cp_model.CpModel, prepared: Prepared, starts: Sequence[cp_model.IntVar]
) -> None:
    """Interchangeable jobs (same length, units, unit request and weight): the higher-
    priority one starts no later. As in HCP3: otherwise presolve breaks the symmetry its
    own way, which can start a newer job before an older identical one and invalidate the
    greedy hint (greedy plans in priority order satisfy this)."""
    last: dict[tuple[int, int, tuple[int, ...], int], cp_model.IntVar] = {}
    for j, start in zip(prepared.jobs, starts, strict=True):
        if j.latest is None:
            shape = (j.length, j.job.units, j.job.unit_request, j.weight)
            if shape in last:
                model.add(last[shape] <= start)
            last[shape] = start


class PCP3Dispatcher(CPDispatcher):
    """PCP3 with search control and fallback; constructor as HCP3's (the allocator only
    serves the guard's reservation: the model allocates). ``optional`` and ``pooled``
    select the model variant (see the module docstring). ``max_unit_counts`` caps the
    ``x[i,n]`` variables (Σ host nodes over the window): on Curie (5,544 nodes) a window
    asks for up to 554,000 and re-solving Curie instances grew to 23 GB before the kernel
    killed it; Eurora-like windows need at most 6,400, CTC's 33,800. Above the cap the
    call falls back at once (status ``too_large``). Below it, ``search.search_size_cap``
    (opt-in) answers larger windows with the best greedy plan, unsearched (``skipped``)."""

    name = "pcp3"
    presolve_by_default = False
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
        optional: bool = False,
        pooled: bool = True,
        max_unit_counts: int = 50_000,
        node_symmetry: bool = False,
    ) -> None:
        super().__init__(allocator, search, model, fallback=fallback, clock=clock, state=state)
        self.optional, self.pooled = optional, pooled
        self.max_unit_counts = max_unit_counts
        self.node_symmetry = node_symmetry

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
        counts = sum(len(h) for h in hosts)
        if counts > self.max_unit_counts:
            detail = f"{counts} x[i,n] variables, above max_unit_counts {self.max_unit_counts}"
            raise TooLarge("hint", "model too large", detail)
        plans = candidate_node_plans(
            snapshot,
            durations,
            prepared,
            hosts,
            {s.job_id: s.allocation for s in heuristic.starts},
            tick=lambda: budget.check("hint"),
            previous=self._previous_order(prepared),
        )
        costs = {name: plan_objective(prepared, p.starts) for name, p in plans.items()}
        chosen = cheapest(costs)
        hint = plans[chosen]
        cap = self.search.search_size_cap
        if cap is not None and counts > cap:
            budget.mark("hint")
            return Formulation(
                model=None,
                indices=(),
                hint=hint.values(prepared, hosts),
                size=(0, 0, 0),
                hint_name=chosen,
                hint_costs=costs,
                skip_reason=f"{counts} x[i,n] variables, above search_size_cap {cap}",
            )
        groups: list[Group] = []
        if self.node_symmetry:  # for the model's ordering constraints only
            caps = node_capacities(snapshot, prepared)
            groups = interchangeable_nodes(caps, node_loads(snapshot, durations, prepared), hosts)
            hint = canonical(hint, groups)
        budget.mark("hint")
        budget.check("build")
        built = build_node_model(
            snapshot,
            durations,
            prepared,
            hosts,
            optional=self.optional,
            pooled=self.pooled,
            node_groups=groups,
            tick=lambda: budget.check("build"),
        )
        return Formulation(
            model=built.model,
            indices=built.decision_indices,
            hint=hint.values(prepared, hosts),  # in decision_indices order
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
        starts = []
        offset = count  # x[i,n] follow the starts, job by job, over each job's hosts
        for j, job_hosts in zip(prepared.jobs, context, strict=True):
            if plan[j.job.id] == 0:  # only jobs starting now need their allocation read
                units = values[offset : offset + len(job_hosts)]
                allocation = nonzero((n, u) for (n, _), u in zip(job_hosts, units, strict=True))
                starts.append(Start(j.job.id, allocation))
            offset += len(job_hosts)
        return starts, plan, ()
