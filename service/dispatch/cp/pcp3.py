"""PCP3: pure CP scheduling *and* allocation on the real nodes (PCP'19, SPEC §4).

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

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ortools.sat.python import cp_model

from service.dispatch.allocators import Allocator
from service.dispatch.cp.greedy import plan_objective
from service.dispatch.cp.hcp3 import HCP3Dispatcher, _reduction_notes
from service.dispatch.cp.pcp3_greedy import (
    Hosts,
    candidate_node_plans,
    hostable,
    node_capacities,
    node_loads,
    nonzero,
    unit_demand,
)
from service.dispatch.cp.prepare import ModelConfig, Prepared, prepare, priorities, priority_order
from service.dispatch.cp.search import Clock, SearchConfig, solve_with_restarts
from service.dispatch.dispatcher import Dispatcher
from service.dispatch.durations import Durations
from service.dispatch.problem import Decision, Diagnostics, Snapshot, Start
from service.dispatch.validate import decision_violations


@dataclass(frozen=True, slots=True)
class NodeModel:
    model: cp_model.CpModel
    starts: tuple[cp_model.IntVar, ...]
    """Start variables (units from ``t``), aligned with ``Prepared.jobs``."""
    units: tuple[tuple[tuple[int, cp_model.IntVar], ...], ...]
    """Per job, ``(node, x[i,n])`` for each host node."""
    variables: int
    constraints: int
    intervals: int

    def decision_variables(self) -> list[cp_model.IntVar]:
        """Starts, then every ``x[i,n]`` job by job: the order of hints and values."""
        return [*self.starts, *(x for xs in self.units for _, x in xs)]


def build_node_model(
    snapshot: Snapshot,
    durations: Durations,
    prepared: Prepared,
    hosts: Sequence[Hosts],
    *,
    optional: bool = False,
    pooled: bool = True,
) -> NodeModel:
    """The node-level model of ``prepared``; ``hosts[i]`` are job i's nodes and ``m[i,n]``."""
    model = cp_model.CpModel()
    caps = node_capacities(snapshot, prepared)
    starts: list[cp_model.IntVar] = []
    runs: list[cp_model.IntervalVar] = []
    units: list[tuple[tuple[int, cp_model.IntVar], ...]] = []
    # (node, type) → intervals and demands; only (node, type) pairs some job can use.
    usage: dict[tuple[int, int], list[tuple[cp_model.IntervalVar, cp_model.LinearExprT]]] = {}
    peak: dict[tuple[int, int], int] = {}  # the most the items above can ever demand
    intervals = 0
    for j, job_hosts in zip(prepared.jobs, hosts, strict=True):
        upper = prepared.horizon if j.latest is None else min(j.latest, prepared.horizon)
        start = model.new_int_var(0, upper, f"start_{j.job.id}")
        run = model.new_fixed_size_interval_var(start, j.length, f"run_{j.job.id}")
        starts.append(start)
        runs.append(run)
        intervals += 1
        ureq = unit_demand(j, prepared)
        xs = []
        for n, m in job_hosts:
            x = model.new_int_var(0, m, f"x_{j.job.id}_{n}")
            xs.append((n, x))
            iv = run
            if optional:
                present = model.new_bool_var(f"on_{j.job.id}_{n}")
                model.add(x >= 1).only_enforce_if(present)
                model.add(x == 0).only_enforce_if(~present)
                iv = model.new_optional_fixed_size_interval_var(start, j.length, present, "")
                intervals += 1
            for k, a in enumerate(ureq):
                if a:
                    usage.setdefault((n, k), []).append((iv, x * a))
                    peak[n, k] = peak.get((n, k), 0) + m * a
        model.add(sum(x for _, x in xs) == j.job.units)
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
    # First descent as the papers': earliest-startable, highest-priority job first, then
    # its allocation, most units on the first nodes (consolidation).
    model.add_decision_strategy(starts, cp_model.CHOOSE_LOWEST_MIN, cp_model.SELECT_MIN_VALUE)
    xs_all = [x for xs in units for _, x in xs]
    model.add_decision_strategy(xs_all, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
    proto = model.proto
    return NodeModel(
        model, tuple(starts), tuple(units), len(proto.variables), len(proto.constraints), intervals
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


class PCP3Dispatcher(HCP3Dispatcher):
    """PCP3 with search control and fallback; constructor as HCP3's (the allocator only
    serves the guard's reservation: the model allocates). ``optional`` and ``pooled``
    select the model variant (see the module docstring)."""

    name = "pcp3"

    def __init__(
        self,
        allocator: Allocator | None = None,
        search: SearchConfig | None = None,
        model: ModelConfig | None = None,
        *,
        fallback: Dispatcher | None = None,
        clock: Clock = time.perf_counter,
        optional: bool = False,
        pooled: bool = True,
    ) -> None:
        super().__init__(allocator, search, model, fallback=fallback, clock=clock)
        self.optional, self.pooled = optional, pooled

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        began = self.clock()
        heuristic = self.fallback.decide(snapshot, durations)
        prios = priorities(snapshot.queued, durations, snapshot.time)
        order = priority_order(snapshot.queued, prios, durations)
        guard = self._guard(snapshot, durations, order, prios)
        protected = None if guard is None else (guard.job, guard.start_by)
        prepared = prepare(snapshot, durations, self.model, order, prios, protected)
        prepared, hosts = hostable(snapshot, prepared)
        notes = _reduction_notes(prepared, guard)
        if not prepared.jobs:
            return Decision(
                (), planned={}, diagnostics=Diagnostics(self.name, "empty", notes=notes)
            )
        plans = candidate_node_plans(
            snapshot, durations, prepared, hosts, {s.job_id: s.allocation for s in heuristic.starts}
        )
        costs = {name: plan_objective(prepared, p.starts) for name, p in plans.items()}
        chosen = min(costs, key=costs.__getitem__)  # ties: the first, priority order
        hint = plans[chosen]
        built = build_node_model(
            snapshot, durations, prepared, hosts, optional=self.optional, pooled=self.pooled
        )
        values = hint.values(prepared, hosts)  # in the order of decision_variables()
        outcome = solve_with_restarts(
            built.model, built.decision_variables(), values, self.search, self.clock, began
        )
        notes += (
            f"hint: {chosen}; objectives {', '.join(f'{n} {c}' for n, c in costs.items())}",
            f"search: {outcome.runs} run(s), objective {outcome.objective}; {outcome.stop}",
        )
        diagnostics = Diagnostics(
            dispatcher=self.name,
            solver_status=outcome.status,
            restarts=max(0, outcome.runs - 1),
            model_variables=built.variables,
            model_constraints=built.constraints,
            model_intervals=built.intervals,
            notes=notes,
        )
        if outcome.status == "infeasible":
            # SPEC §4 step 2: nothing starts from a proven-infeasible model; no fallback.
            return Decision((), planned={}, diagnostics=diagnostics)
        if outcome.values is None:
            return self._fall_back(heuristic, diagnostics, outcome)
        count = len(prepared.jobs)
        plan = {j.job.id: v for j, v in zip(prepared.jobs, outcome.values[:count], strict=True)}
        x_values = iter(outcome.values[count:])
        allocations = [nonzero((n, next(x_values)) for n, _ in xs) for xs in built.units]
        starts = [
            Start(j.job.id, a)
            for j, a in zip(prepared.jobs, allocations, strict=True)
            if plan[j.job.id] == 0
        ]
        unit, now = prepared.time_unit, prepared.time
        decision = Decision(
            starts=tuple(starts),
            planned={job_id: now + s * unit for job_id, s in plan.items()},
            diagnostics=diagnostics,
        )
        # Cheap independent check (ms): a model bug must never reach the cluster.
        violations = decision_violations(snapshot, decision)
        if violations:
            bad = replace(diagnostics, notes=(*notes, f"invalid CP decision: {violations[:3]}"))
            return self._fall_back(heuristic, bad, replace(outcome, status="invalid"))
        return decision
