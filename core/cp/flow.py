"""The flow every CP dispatcher shares: one call's phases under its deadline.

``fallback → prepare → (trivial?) → formulate (hint, build) → solve → extract → validate``
(a formulation without a model, ``search_size_cap``, skips the build and the solve: its
hint is the answer)

The fallback heuristic decides first, so there is always an answer; before each later
phase the deadline is checked, and the fallback's decision is returned, marked with the
reason, whenever a phase has no time, the solver has no solution, or the CP decision
fails the independent validator. The models are the subclasses' (``hcp3``, ``pcp3``,
``pcp20``), behind three hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ortools.sat.python import cp_model

from cpsched.core.allocators import Allocator, BestFit
from cpsched.core.cp.allocate import allocate_now
from cpsched.core.cp.budget import Budget, GiveUp, OutOfTime
from cpsched.core.cp.fill import fill
from cpsched.core.cp.greedy import previous_order
from cpsched.core.cp.guard import Guard, protect, starving_job
from cpsched.core.cp.prepare import (
    ModelConfig,
    ModelJob,
    Prepared,
    prepare,
    priorities,
    priority_order,
)
from cpsched.core.cp.search import (
    Clock,
    SearchConfig,
    SearchOutcome,
    solve_with_restarts,
)
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.heuristics import site_rank
from cpsched.core.problem import Decision, Diagnostics, Job, Snapshot, Start
from cpsched.core.state import DispatcherState
from cpsched.core.validate import decision_violations


@dataclass(frozen=True, slots=True)
class Formulation:
    """A CP model ready to search (or none: the hint answers unsearched), its decision
    variables' proto indices, the hint (a complete solution from a greedy plan, in their
    order), its size, and the model's own data."""

    model: cp_model.CpModel | None
    """None: the dispatcher chose not to search (``search_size_cap``); the hint answers."""
    indices: Sequence[int]
    """The decision variables' proto indices (``bulk.indices_of``)."""
    hint: list[int]
    hint_name: str
    """Which greedy plan the hint is (``cheapest(hint_costs)``)."""
    hint_costs: dict[str, int]
    """The objective of every candidate plan, by name."""
    size: tuple[int, int, int]
    """Variables, constraints, intervals."""
    payload: Any = None
    skip_reason: str = ""
    """Why ``model`` is None."""

    @property
    def hint_objective(self) -> int:
        """The hint's objective: every greedy plan is a complete solution of its model, so
        this is the search's incumbent."""
        return self.hint_costs[self.hint_name]

    @property
    def hint_note(self) -> str:
        costs = ", ".join(f"{n} {c}" for n, c in self.hint_costs.items())
        return f"hint: {self.hint_name}; objectives {costs}"


def cheapest(costs: dict[str, int]) -> str:
    """The plan of least objective; ties go to the first (priority order)."""
    return min(costs, key=costs.__getitem__)


class CPDispatcher:
    """What HCP3, PCP3 and PCP'20 share: the phases of a call under its deadline, the
    fallback, the guard and the trivial case; subclasses supply the model through the
    hooks ``_reduce``, ``_formulate`` and ``_extract``. ``clock`` (default:
    ``search.clock``) measures the per-call deadline only and is injectable for tests;
    nothing else here reads time."""

    name = "cp"
    presolve_by_default = True
    """CP-SAT's presolve when ``SearchConfig.presolve`` leaves it to the dispatcher: off
    for PCP3, whose node-level models it slows down more than it helps (measured on
    KTH)."""
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
        state: DispatcherState | None = None,
    ) -> None:
        self.allocator = allocator if allocator is not None else BestFit()
        self.search = search if search is not None else SearchConfig()
        self.model = model if model is not None else ModelConfig()
        self.clock = clock if clock is not None else self.search.clock
        self.state = state if state is not None else DispatcherState()
        """What this dispatcher learns between calls (its caller's): the time kept for
        the work after the search (extract, validate) beyond the margin, the longest
        recently seen, decaying by ``_DECAY`` per call (on Curie's 5,544 nodes that work
        took up to ~130 ms, past the fixed 30 ms margin); and with ``search.reuse`` the
        previous plan. The search also keeps at least what the fallback heuristic took on
        this snapshot: placing and checking jobs on the same nodes, it grows with the
        machine and the queue as the work after the search does, where a past maximum
        can be from a smaller call. On a large queue where EASY's planning is slow this
        can hold back up to half the deadline from the search: accepted, since a late
        answer is worse."""
        if fallback is None:
            from cpsched.core.registry import make_fallback  # the registry imports this module

            fallback = make_fallback(state=self.state)
        self.fallback = fallback
        """The heuristic computed first on every call: its decision is the answer when the
        search has none in time, its plan a hint, and it fills what the plan leaves idle."""

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
        deadline = self.state.deadline
        budget = Budget(self.search, self.clock, None if deadline is None else deadline.left())
        heuristic = self.fallback.decide(snapshot, durations)
        budget.mark("fallback")
        self.state.timings.fallback_s = budget.last("fallback")
        try:
            decision = self._decide(snapshot, durations, heuristic, budget)
        except GiveUp as stop:
            budget.mark(stop.phase)
            notes = (stop.detail, budget.note()) if stop.detail else (budget.note(),)
            diagnostics = Diagnostics(self.name, stop.status, notes=notes)
            decision = self._fall_back(heuristic, diagnostics, stop.reason)
        if self.search.reuse:
            self.state.previous_planned = dict(decision.planned or {})
        return decision

    def _search(
        self,
        model: cp_model.CpModel,
        formulation: Formulation,
        prepared: Prepared,
        budget: Budget,
    ) -> SearchOutcome:
        budget.check("solve")
        # CP-SAT copies, expands and presolves the model before it looks at its time limit
        # often; on Curie-sized PCP'20 models that took longer than building it (a 2 s
        # call overran by 3 s). With less time left than the build took, do not start.
        if budget.left() - budget.margin <= budget.last("build"):
            raise OutOfTime("solve")
        # This call's deadline (the caller may give less than the configured one).
        search = self.search
        if budget.deadline != search.deadline:
            search = replace(search, deadline=budget.deadline)
        return solve_with_restarts(
            model,
            formulation.indices,
            formulation.hint,
            search,
            budget.clock,
            budget.began,
            incumbent=formulation.hint_objective,
            keep=min(
                _KEEP_FACTOR
                * max(
                    self.state.timings.after_solve_s,
                    budget.last("fallback"),
                    self._extract_estimate(_starting(formulation.hint, prepared)),
                ),
                budget.deadline / 2,
            ),
        )

    def _extract_estimate(self, starting: int) -> float:
        """Seconds the extract phase is expected to take for ``starting`` jobs now."""
        timings = self.state.timings
        return timings.extract_fixed_s + timings.extract_per_start_s * starting

    def _learn_extract(self, seconds: float, starting: int) -> None:
        timings = self.state.timings
        if starting == 0:
            timings.extract_fixed_s = max(seconds, _DECAY * timings.extract_fixed_s)
            return
        per_start = max(0.0, seconds - timings.extract_fixed_s) / starting
        timings.extract_per_start_s = max(per_start, _DECAY * timings.extract_per_start_s)

    def _previous_order(self, prepared: Prepared) -> list[ModelJob] | None:
        """The previous call's order of this window, for the hooks' hints (``reuse``)."""
        if not self.search.reuse:
            return None
        return previous_order(prepared, self.state.previous_planned)

    def _decide(
        self, snapshot: Snapshot, durations: Durations, heuristic: Decision, budget: Budget
    ) -> Decision:
        budget.check("prepare")
        prios = priorities(snapshot.queued, durations, snapshot.time)
        order = priority_order(snapshot.queued, prios, durations)
        if self.model.site_order:
            order.sort(key=lambda job: site_rank(job)[0])  # stable: slowdown breaks ties
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
            return self._trivial(snapshot, durations, prepared, heuristic, guard, notes, budget)
        budget.check("formulate")
        formulation = self._formulate(snapshot, durations, prepared, context, heuristic, budget)
        budget.mark("build")
        if formulation.model is None:
            outcome = _skipped(formulation)
        else:
            outcome = self._search(formulation.model, formulation, prepared, budget)
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
            # Nothing starts from a proven-infeasible model; no fallback.
            return Decision((), planned={}, diagnostics=diagnostics)
        if outcome.values is None:
            diagnostics = replace(diagnostics, notes=(*notes, budget.note()))
            return self._fall_back(heuristic, diagnostics, f"no CP solution ({outcome.status})")
        # Placing the jobs a solution starts now costs per job (Curie: about 2 ms each on
        # 5,544 nodes, 50 ms for 25 jobs), more than the reserve kept from the search when
        # the solution starts many more than the hint did; the fallback's answer is
        # ready, so give it instead of answering late.
        starting = _starting(outcome.values, prepared)
        if budget.left() <= self._extract_estimate(starting):
            # Decay as a measured call would, so that one slow extract cannot keep
            # every later call from extracting.
            self.state.timings.extract_fixed_s *= _DECAY
            self.state.timings.extract_per_start_s *= _DECAY
            late = replace(diagnostics, solver_status="deadline", notes=(*notes, budget.note()))
            return self._fall_back(heuristic, late, "no time left for extract")
        starts, plan, more = self._extract(
            snapshot, prepared, context, formulation, outcome.values, guard
        )
        budget.mark("extract")
        starts, plan, more = self._fill(snapshot, durations, starts, plan, guard, budget, more)
        unit, now = prepared.time_unit, prepared.time
        decision = Decision(
            starts=tuple(starts),
            planned={job_id: now + s * unit for job_id, s in plan.items()},
            diagnostics=replace(diagnostics, notes=(*notes, *more)),
        )
        # Cheap independent check (ms): a model bug must never reach the cluster.
        violations = decision_violations(snapshot, decision)
        budget.mark("validate")
        after = budget.last("extract") + budget.last("fill") + budget.last("validate")
        timings = self.state.timings
        timings.after_solve_s = max(after, _DECAY * timings.after_solve_s)
        self._learn_extract(budget.last("extract"), starting)
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
        durations: Durations,
        prepared: Prepared,
        heuristic: Decision,
        guard: Guard | None,
        notes: tuple[str, ...],
        budget: Budget,
    ) -> Decision:
        """The decision when every modelled job can start now (``_heuristic_is_optimal``):
        the model's only optimum plans them all at ``t``, so they are placed as the
        solution would be, in priority order with the allocator. When that order does
        not place them all, a dispatcher whose model allocates (``allocates_in_model``)
        uses the heuristic's placement, which the model admits; HCP3 postpones and fills
        as it would after a search."""
        plan = {mj.job.id: 0 for mj in prepared.jobs}
        starts, postponed = allocate_now(snapshot, prepared, plan, self.allocator, None)
        notes += ("the heuristic starts every modelled job now: objective 0, no search",)
        if postponed and self.allocates_in_model:
            starts = list(heuristic.starts)
            notes += ("placed as the heuristic placed them",)
        elif postponed:
            notes += (f"{len(postponed)} job(s) planned now did not fit on the nodes",)
        budget.mark("allocate")
        placed = len(starts)
        if postponed and not self.allocates_in_model:
            starts, plan, notes = self._fill(
                snapshot, durations, starts, plan, guard, budget, notes
            )
        diagnostics = Diagnostics(self.name, "trivial", notes=(*notes, budget.note()))
        planned = {**(heuristic.planned or {}), **dict.fromkeys(plan, snapshot.time)}
        decision = Decision(tuple(starts), planned=planned, diagnostics=diagnostics)
        if len(starts) > placed:
            # The fill's starts are a second heuristic call's: checked as a solution is.
            violations = decision_violations(snapshot, decision)
            if violations:
                why = f"invalid filled decision: {violations[:3]}"
                bad = replace(diagnostics, notes=(*diagnostics.notes, why))
                return self._fall_back(heuristic, bad, "invalid filled decision")
        return decision

    def _fill(
        self,
        snapshot: Snapshot,
        durations: Durations,
        starts: list[Start],
        plan: dict[str, int],
        guard: Guard | None,
        budget: Budget,
        notes: tuple[str, ...],
    ) -> tuple[list[Start], dict[str, int], tuple[str, ...]]:
        """When a job the plan starts now was not placed (HCP3's pooled plan), add the
        fallback's starts on what is left (:func:`~cpsched.core.cp.fill.fill`), if the
        time left holds another fallback call; the plan then starts them now. One call's
        time is enough: the search already kept twice the fallback's time for the work
        after it, and the fill's time counts in that work (``after_solve_s``)."""
        started = {start.job_id for start in starts}
        if all(at != 0 or job_id in started for job_id, at in plan.items()):
            return starts, plan, notes
        if budget.left() <= budget.margin + budget.last("fallback"):
            return starts, plan, (*notes, "no time left to fill what the plan left idle")
        added = fill(snapshot, durations, starts, self.fallback, guard, self.allocator)
        budget.mark("fill")
        if not added:
            return starts, plan, notes
        why = f"{len(added)} job(s) started by {self.fallback.name} in what the plan left idle"
        return (
            [*starts, *added],
            {**plan, **dict.fromkeys((s.job_id for s in added), 0)},
            (*notes, why),
        )

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
        raise NotImplementedError

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
        raise NotImplementedError

    def _guard(
        self, snapshot: Snapshot, durations: Durations, order: list[Job], prios: dict[str, float]
    ) -> Guard | None:
        model = self.model
        job = starving_job(order, prios, snapshot, model.reserve_above, model.reserve_after)
        return None if job is None else protect(job, snapshot, durations, self.allocator)

    def _fall_back(self, heuristic: Decision, diagnostics: Diagnostics, reason: str) -> Decision:
        """The heuristic's decision, marked: ``fallback: <reason>; decision of <name>``."""
        why = f"fallback: {reason}; decision of {self.fallback.name}"
        return replace(
            heuristic,
            diagnostics=replace(
                diagnostics,
                fallback=True,
                fallback_reason=reason,
                notes=(*diagnostics.notes, why, *heuristic.diagnostics.notes),
            ),
        )


_DECAY = 0.9
"""Per call, the share of the kept post-search time that remains without a new maximum."""
_KEEP_FACTOR = 2.0
"""Safety factor on the post-search time kept: on a loaded machine a phase's wall time
varies by about that much from call to call (Curie, 25 calls at 2 s, two replays beside:
extract + validate up to 375 ms of wall time, against under 200 ms of CPU)."""


def _skipped(formulation: Formulation) -> SearchOutcome:
    """The outcome of a search not run (``search_size_cap``): the hint, a complete
    solution of the model the dispatcher did not build."""
    stop = f"search skipped: {formulation.skip_reason}"
    return SearchOutcome("skipped", tuple(formulation.hint), formulation.hint_objective, 0, stop)


def _starting(values: Sequence[int], prepared: Prepared) -> int:
    """Jobs a solution (or hint) starts now: every model's first values are the starts."""
    return sum(1 for value in values[: len(prepared.jobs)] if value == 0)


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
