"""HCP3: CP scheduling on pooled resources, heuristic allocation on the real nodes.

The call's phases are ``flow.CPDispatcher``'s; HCP3's model: *build* (one
interval per window job, fixed intervals for the running jobs, one cumulative per
modelled type with the machine total as capacity), *search* (restarts hinted with the
best of three greedy plans), and the jobs planned at ``t`` are placed in priority order
with the allocator; a job that does not fit on the nodes waits for the next call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from cpsched.core.cp.allocate import allocate_now
from cpsched.core.cp.budget import Budget
from cpsched.core.cp.bulk import Model, add_strategy, indices_of
from cpsched.core.cp.flow import CPDispatcher, Formulation, cheapest
from cpsched.core.cp.greedy import candidate_plans, plan_objective
from cpsched.core.cp.guard import Guard
from cpsched.core.cp.prepare import Prepared
from cpsched.core.durations import Durations
from cpsched.core.problem import Decision, Snapshot, Start


@dataclass(frozen=True, slots=True)
class PooledModel:
    model: cp_model.CpModel
    starts: tuple[cp_model.IntVar, ...]
    """Start variables (units from ``t``), aligned with ``Prepared.jobs``."""
    variables: int
    constraints: int
    """CP-SAT constraints, interval definitions included."""
    intervals: int


def build_pooled_model(prepared: Prepared) -> PooledModel:
    """The pooled model of ``prepared``. Export it with ``model.export_to_file`` to debug."""
    model = Model()
    starts: list[cp_model.IntVar] = []
    intervals: list[cp_model.IntervalVar] = []
    for j in prepared.jobs:
        upper = prepared.horizon if j.latest is None else min(j.latest, prepared.horizon)
        start = model.new_int_var(0, upper, f"start_{j.job.id}")
        starts.append(start)
        intervals.append(model.new_fixed_size_interval_var(start, j.length, f"run_{j.job.id}"))
    demands = [j.demand for j in prepared.jobs]
    for load in prepared.running:
        intervals.append(model.new_fixed_size_interval_var(0, load.length, f"held_{load.length}"))
        demands.append(load.demand)
    for k, capacity in enumerate(prepared.capacity):
        used = [(iv, d[k]) for iv, d in zip(intervals, demands, strict=True) if d[k]]
        model.add_cumulative([iv for iv, _ in used], [a for _, a in used], capacity)
    model.minimize(sum(j.weight * s for j, s in zip(prepared.jobs, starts, strict=True)))
    # Symmetry breaking: jobs of the same length, demand and weight are interchangeable in
    # the model, so the higher-priority one may start no later. Without this, CP-SAT's
    # presolve breaks the symmetry its own way, which can start a newer job before an
    # older identical one, and invalidates the greedy hint.
    last: dict[tuple[int, tuple[int, ...], int], cp_model.IntVar] = {}
    for j, start in zip(prepared.jobs, starts, strict=True):
        if j.latest is None:
            shape = (j.length, j.demand, j.weight)
            if shape in last:
                model.add(last[shape] <= start)
            last[shape] = start
    # The first descent is the greedy priority order: among the jobs that can start
    # earliest, the one listed first (highest priority) is fixed to its earliest start.
    add_strategy(model, indices_of(starts), cp_model.CHOOSE_LOWEST_MIN, cp_model.SELECT_MIN_VALUE)
    proto = model.proto
    return PooledModel(
        model=model,
        starts=tuple(starts),
        variables=len(proto.variables),
        constraints=len(proto.constraints),
        intervals=len(intervals),
    )


class HCP3Dispatcher(CPDispatcher):
    """HCP3: the pooled model, then the allocator places the jobs planned at ``t``."""

    name = "hcp3"
    presolve_by_default = True

    def _formulate(
        self,
        snapshot: Snapshot,
        durations: Durations,
        prepared: Prepared,
        context: Any,
        heuristic: Decision,
        budget: Budget,
    ) -> Formulation:
        """The model and its hint; ``budget.check`` between long steps (``OutOfTime``)."""
        now_first = [s.job_id for s in heuristic.starts]
        plans = candidate_plans(
            prepared,
            now_first,
            self._previous_order(prepared),
            tick=lambda: budget.check("hint"),
        )
        budget.mark("hint")
        budget.check("build")
        costs = {name: plan_objective(prepared, plan) for name, plan in plans.items()}
        chosen = cheapest(costs)
        pooled = build_pooled_model(prepared)
        return Formulation(
            model=pooled.model,
            indices=indices_of(pooled.starts),
            hint=[plans[chosen][j.job.id] for j in prepared.jobs],
            size=(pooled.variables, pooled.constraints, pooled.intervals),
            hint_name=chosen,
            hint_costs=costs,
            payload=pooled,
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
        """Starts now, the plan (time units from ``t``) and notes, from the solution."""
        plan = {j.job.id: v for j, v in zip(prepared.jobs, values, strict=True)}
        starts, postponed = allocate_now(snapshot, prepared, plan, self.allocator, guard)
        more = (f"{len(postponed)} job(s) planned now did not fit on the nodes",)
        return starts, plan, more if postponed else ()
