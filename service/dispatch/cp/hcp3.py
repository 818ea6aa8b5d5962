"""HCP3: CP scheduling on pooled resources, heuristic allocation on the real nodes (SPEC §4).

One call: the fallback heuristic decides first (its decision is the answer if CP has
none in time), then *prepare* (priorities, reductions, window, guard), *build* (one
interval per window job, fixed intervals for the running jobs, one cumulative per
modelled type with the machine total as capacity), *search* (restarts hinted with the
best of three greedy plans), and the jobs planned at ``t`` are placed in priority order
with the allocator; a job that does not fit on the nodes waits for the next call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ortools.sat.python import cp_model

from service.dispatch.allocators import Allocator, BestFit
from service.dispatch.capacity import FreeCapacity, covers
from service.dispatch.cp.greedy import candidate_plans, plan_objective
from service.dispatch.cp.guard import Guard, protect, starving_job
from service.dispatch.cp.prepare import ModelConfig, Prepared, prepare, priorities, priority_order
from service.dispatch.cp.search import (
    Budget,
    Clock,
    GiveUp,
    OutOfTime,
    SearchConfig,
    make_fallback,
    solve_with_restarts,
)
from service.dispatch.dispatcher import Dispatcher
from service.dispatch.durations import Durations
from service.dispatch.problem import Decision, Diagnostics, Job, Snapshot, Start
from service.dispatch.validate import decision_violations


@dataclass(frozen=True, slots=True)
class Formulation:
    """A CP model ready to search: its decision variables, the hint (a complete solution
    from a greedy plan, in the variables' order), its size, and the model's own data."""

    model: cp_model.CpModel
    variables: Sequence[cp_model.IntVar]
    hint: list[int]
    size: tuple[int, int, int]
    """Variables, constraints, intervals."""
    hint_note: str
    payload: Any = None


def hint_note(chosen: str, costs: dict[str, int]) -> str:
    return f"hint: {chosen}; objectives {', '.join(f'{n} {c}' for n, c in costs.items())}"


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
    model = cp_model.CpModel()
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
    model.add_decision_strategy(starts, cp_model.CHOOSE_LOWEST_MIN, cp_model.SELECT_MIN_VALUE)
    proto = model.proto
    return PooledModel(
        model=model,
        starts=tuple(starts),
        variables=len(proto.variables),
        constraints=len(proto.constraints),
        intervals=len(intervals),
    )


def allocate_now(
    snapshot: Snapshot,
    prepared: Prepared,
    plan: dict[str, int],
    allocator: Allocator,
    guard: Guard | None,
) -> tuple[list[Start], list[str]]:
    """Place the jobs planned at ``t``, in priority order; return the starts and the ids
    of the jobs postponed because their units did not fit on the nodes (their planned
    start stays ``t``: that is what the model said; the next call re-plans them).

    With a guard that cannot start now, a job still running at the guard's reserved time
    may only use what the reservation leaves spare (EASY's rule), so the pooled plan's
    promise to the guarded job also holds node by node.
    """
    free = FreeCapacity.of(snapshot)
    reservation = guard.reservation if guard is not None else None
    reservation_for = guard.job if guard is not None else None
    starts: list[Start] = []
    postponed: list[str] = []
    for mj in prepared.jobs:
        job = mj.job
        if plan[job.id] != 0:
            continue
        allocation = None
        if reservation is not None and job is reservation_for:
            pass  # it could not be placed now (that is why it has a reservation)
        elif reservation is None or snapshot.time + mj.duration <= reservation.time:
            allocation = allocator.place(job, free)
        elif covers(reservation.spare_total, job.request):
            allocation = allocator.place(job, free.clamp_to(reservation.spare()))
            if allocation is not None:
                reservation.take(allocation, job)
        if allocation is None:
            postponed.append(job.id)
            continue
        free.take(allocation, job)
        starts.append(Start(job.id, allocation))
    return starts, postponed


class HCP3Dispatcher:
    """HCP3 with search control and fallback. ``clock`` (default: ``search.clock``)
    measures the per-call deadline only and is injectable for tests; nothing else here
    reads time."""

    name = "hcp3"
    allocates_in_model = False
    """Whether the model places units on nodes (PCP3, PCP'20) or only the allocator does."""

    def __init__(
        self,
        allocator: Allocator | None = None,
        search: SearchConfig | None = None,
        model: ModelConfig | None = None,
        *,
        fallback: Dispatcher | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.allocator = allocator if allocator is not None else BestFit()
        self.search = search if search is not None else SearchConfig()
        self.model = model if model is not None else ModelConfig()
        self.fallback = fallback if fallback is not None else make_fallback(self.search)
        self.clock = clock if clock is not None else self.search.clock

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        """The steps every CP dispatcher shares; the model-specific ones are the hooks
        ``_reduce``, ``_formulate`` and ``_extract``.

        Never late: the fallback decision is computed first, and before each later phase
        the deadline is checked; when the time left is only the margin (or less), the
        fallback decision is returned, its diagnostics naming the phase that had no time.
        The solver gets the time left minus the margin. Phases are not interrupted, so a
        call can still overrun by at most the length of the phase under way (hooks check
        inside their long loops to keep that short).
        """
        budget = Budget(self.search, self.clock)
        heuristic = self.fallback.decide(snapshot, durations)
        budget.mark("fallback")
        try:
            return self._decide(snapshot, durations, heuristic, budget)
        except GiveUp as stop:
            budget.mark(stop.phase)
            notes = (stop.detail, budget.note()) if stop.detail else (budget.note(),)
            diagnostics = Diagnostics(self.name, stop.status, notes=notes)
            return self._fall_back(heuristic, diagnostics, stop.reason)

    def _decide(
        self, snapshot: Snapshot, durations: Durations, heuristic: Decision, budget: Budget
    ) -> Decision:
        budget.check("prepare")
        prios = priorities(snapshot.queued, durations, snapshot.time)
        order = priority_order(snapshot.queued, prios, durations)
        guard = self._guard(snapshot, durations, order, prios)
        protected = None if guard is None else (guard.job, guard.start_by)
        prepared = prepare(snapshot, durations, self.model, order, prios, protected)
        prepared, context = self._reduce(snapshot, prepared)
        budget.mark("prepare")
        notes = _reduction_notes(prepared, guard)
        if not prepared.jobs:
            empty = Diagnostics(self.name, "empty", notes=notes)
            return Decision((), planned={}, diagnostics=empty)
        if _heuristic_is_optimal(prepared, heuristic, guard):
            return self._trivial(snapshot, prepared, heuristic, notes, budget)
        budget.check("formulate")
        formulation = self._formulate(snapshot, durations, prepared, context, heuristic, budget)
        budget.mark("build")
        budget.check("solve")
        # CP-SAT copies, expands and presolves the model before it looks at its time limit
        # often; on Curie-sized PCP'20 models that took longer than building it (a 2 s
        # call overran by 3 s). With less time left than the build took, do not start.
        if budget.left() - budget.margin <= budget.last("build"):
            raise OutOfTime("solve")
        outcome = solve_with_restarts(
            formulation.model,
            formulation.variables,
            formulation.hint,
            self.search,
            budget.clock,
            budget.began,
        )
        budget.mark("solve")
        notes += (
            formulation.hint_note,
            f"search: {outcome.runs} run(s), objective {outcome.objective}; {outcome.stop}",
        )
        diagnostics = Diagnostics(
            dispatcher=self.name,
            solver_status=outcome.status,
            restarts=max(0, outcome.runs - 1),
            model_variables=formulation.size[0],
            model_constraints=formulation.size[1],
            model_intervals=formulation.size[2],
            notes=notes,
        )
        if outcome.status == "infeasible":
            # SPEC §4 step 2: nothing starts from a proven-infeasible model; no fallback.
            return Decision((), planned={}, diagnostics=diagnostics)
        if outcome.values is None:
            diagnostics = replace(diagnostics, notes=(*notes, budget.note()))
            return self._fall_back(heuristic, diagnostics, f"no CP solution ({outcome.status})")
        if budget.left() <= 0:  # the solver overran: its answer is too late to use
            late = replace(diagnostics, solver_status="deadline", notes=(*notes, budget.note()))
            return self._fall_back(heuristic, late, "no time left for extract")
        starts, plan, more = self._extract(
            snapshot, prepared, context, formulation, outcome.values, guard
        )
        unit, now = prepared.time_unit, prepared.time
        decision = Decision(
            starts=tuple(starts),
            planned={job_id: now + s * unit for job_id, s in plan.items()},
            diagnostics=replace(diagnostics, notes=(*notes, *more)),
        )
        budget.mark("extract")
        # Cheap independent check (ms): a model bug must never reach the cluster.
        violations = decision_violations(snapshot, decision)
        budget.mark("validate")
        if violations:
            bad = replace(
                diagnostics,
                solver_status="invalid",
                notes=(*notes, f"invalid CP decision: {violations[:3]}", budget.note()),
            )
            return self._fall_back(heuristic, bad, "invalid CP decision")
        return replace(
            decision,
            diagnostics=replace(
                decision.diagnostics, notes=(*decision.diagnostics.notes, budget.note())
            ),
        )

    def _trivial(
        self,
        snapshot: Snapshot,
        prepared: Prepared,
        heuristic: Decision,
        notes: tuple[str, ...],
        budget: Budget,
    ) -> Decision:
        """The decision when every modelled job can start now (``_heuristic_is_optimal``):
        the model's only optimum plans them all at ``t``, so they are placed as the
        solution would be, in priority order with the allocator. When that order does
        not place them all, a dispatcher whose model allocates (``allocates_in_model``)
        uses the heuristic's placement, which the model admits; HCP3 postpones as it
        would after a search."""
        plan = {mj.job.id: 0 for mj in prepared.jobs}
        starts, postponed = allocate_now(snapshot, prepared, plan, self.allocator, None)
        notes += ("the heuristic starts every modelled job now: objective 0, no search",)
        if postponed and self.allocates_in_model:
            starts = list(heuristic.starts)
            notes += ("placed as the heuristic placed them",)
        elif postponed:
            notes += (f"{len(postponed)} job(s) planned now did not fit on the nodes",)
        budget.mark("allocate")
        diagnostics = Diagnostics(self.name, "trivial", notes=(*notes, budget.note()))
        planned = {**(heuristic.planned or {}), **dict.fromkeys(plan, snapshot.time)}
        return Decision(tuple(starts), planned=planned, diagnostics=diagnostics)

    # -- the model-specific steps ------------------------------------------------------

    def _reduce(self, snapshot: Snapshot, prepared: Prepared) -> tuple[Prepared, Any]:
        """Further reductions, and what ``_formulate``/``_extract`` need to share."""
        return prepared, None

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
        plans = candidate_plans(prepared, [s.job_id for s in heuristic.starts])
        budget.mark("hint")
        budget.check("build")
        costs = {name: plan_objective(prepared, plan) for name, plan in plans.items()}
        chosen = min(costs, key=costs.__getitem__)  # ties: the first, priority order
        pooled = build_pooled_model(prepared)
        return Formulation(
            model=pooled.model,
            variables=pooled.starts,
            hint=[plans[chosen][j.job.id] for j in prepared.jobs],
            size=(pooled.variables, pooled.constraints, pooled.intervals),
            hint_note=hint_note(chosen, costs),
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

    def _guard(
        self, snapshot: Snapshot, durations: Durations, order: list[Job], prios: dict[str, float]
    ) -> Guard | None:
        if self.model.reserve_above is None:
            return None
        job = starving_job(order, prios, snapshot, self.model.reserve_above)
        return None if job is None else protect(job, snapshot, durations, self.allocator)

    def _fall_back(self, heuristic: Decision, diagnostics: Diagnostics, reason: str) -> Decision:
        """The heuristic's decision, marked: ``fallback: <reason>; decision of <name>``."""
        why = f"fallback: {reason}; decision of {self.fallback.name}"
        return replace(
            heuristic,
            diagnostics=replace(
                diagnostics,
                fallback=True,
                notes=(*diagnostics.notes, why, *heuristic.diagnostics.notes),
            ),
        )


def _heuristic_is_optimal(prepared: Prepared, heuristic: Decision, guard: Guard | None) -> bool:
    """Whether the heuristic's decision is an optimum of the model, so that searching is
    pointless: it starts exactly the modelled jobs, all at ``t`` (the objective's lower
    bound, 0), and no guarded job is waiting for a reservation (the model would then
    also keep the jobs started now off that job's reserved capacity; the heuristic
    keeps its own reservation, which may be another job's). On HPC2N's first 1,000
    jobs, 613 of 971 PCP'20 models were of this kind."""
    if guard is not None and guard.reservation is not None:
        return False
    started = {start.job_id for start in heuristic.starts}
    return len(started) == len(prepared.jobs) and all(mj.job.id in started for mj in prepared.jobs)


def _reduction_notes(prepared: Prepared, guard: Guard | None) -> tuple[str, ...]:
    notes: list[str] = []
    if prepared.dropped:
        notes.append(f"{len(prepared.dropped)} job(s) cannot start now; not modelled")
    if prepared.beyond_window:
        notes.append(f"{len(prepared.beyond_window)} startable job(s) beyond the window")
    if guard is not None:
        notes.append(f"job {guard.job.id} is protected: start by {guard.start_by}")
    return tuple(notes)
