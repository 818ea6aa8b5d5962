"""Search control of the CP dispatchers: time-limited restarts under a hard deadline.

The papers' search control, for any CP-SAT model whose decision variables are listed:

1. solve with limit δ;
2. proven infeasible → stop (the caller starts nothing from this model; no retry);
3. no solution within the limit → multiply the limit by ``growth`` and retry while it is
   ≤ δ_max;
4. a solution → keep restarting with the larger limit, each run hinted with the best
   solution so far, until the objective has not improved over ``patience`` consecutive
   runs (or the optimum is proven, or δ_max is passed). A hint whose objective is given
   (``incumbent``) is a solution from the start: CP-SAT does not always find it again
   within a short run (on HPC2N, 808 of 3,162 PCP'20 searches at 0.2 s found no
   solution, although fixing the variables to the hint solved in ~6 ms), and it is then
   the answer (status "hint") instead of the heuristic fallback's;
5. every run's limit is ``min(limit, time left before the deadline)``; the caller falls
   back to a heuristic decision when no solution came back in time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from cpsched.core.search_defaults import (
    DEADLINE_S,
    FIRST_RESTART_S,
    PATIENCE,
    RESTART_GROWTH_CAP,
)
from cpsched.errors import ConfigError

Clock = Callable[[], float]
"""Seconds on a monotonic scale; ``time.perf_counter`` unless a test injects another."""


PRESOLVE_EFFORT = (
    "presolve_iterations",
    "probing_level",
    "symmetry_level",
    "presolve_probing_dtime",
)
"""The SearchConfig fields bounding CP-SAT's presolve; None in all of them: CP-SAT's own."""


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Search parameters. The defaults are the product's (:mod:`cpsched.core.search_defaults`,
    which the policy reads too): the papers' restarts (×2 up to 16 times the first limit)
    scaled to a 0.2 s deadline, first limit 0.02 s, patience 1 (the papers': δ = 1 s,
    δ_max = 16 s, k = 2, for 2 s deadlines).

    * ``deadline`` — hard per-call budget in seconds, from the start of ``decide`` (the
      fallback heuristic, preparation and model building count). It caps δ_max.
    * ``improve`` — keep restarting after the first solution (step 4); off: stop at once.
    * ``margin`` — seconds kept back from the deadline for the work after the search
      (allocation, building the decision: ~1 ms for 100 jobs on 64 nodes) and for
      CP-SAT overshooting its own limit (a few ms, rarely ~25 ms in measurements).
    * ``min_run`` — do not start a run with less time left than this.
    * ``num_workers`` — CP-SAT workers; 1 by default (2-core machines, and the service
      and the replay need the other core; a second worker did not help in measurements).
    * ``random_seed`` — fixed, so equal inputs give equal runs as far as CP-SAT allows.
    * ``deterministic`` — limit each run by CP-SAT's ``max_deterministic_time`` instead of
      wall time, so that replays and tests are reproducible on any machine. The limits
      are then work units, not seconds: on the pooled model of 100-job Eurora-like queues
      one unit took 3-4 s of wall time on a 2-core machine, so scale ``initial_limit``
      and ``max_limit`` down (the tests use 0.1 and 1.6). The wall deadline still applies
      as a safety net; a run is reproducible as long as it does not hit it.
    * ``wall_clock`` — off (with ``deterministic``): no wall clock anywhere in the call,
      no deadline, no safety net; every phase runs to its end and the restarts are
      limited by work alone, so a call gives the same answer on any machine, idle or
      busy (replays: the policy's ``cp_replay_search``).
    * ``presolve_iterations``, ``probing_level``, ``symmetry_level``,
      ``presolve_probing_dtime`` — CP-SAT's presolve effort (``max_presolve_iterations``,
      ``cp_model_probing_level``, ``symmetry_level``,
      ``presolve_probing_deterministic_time_limit``); None keeps CP-SAT's default. CP-SAT
      checks its time limit only between presolve steps, so a full presolve of a big
      model overruns 0.2 s deadlines; the lighter defaults here bound that work (measured
      in docs/results/cp-dispatchers.md).
    * ``clock`` — what the deadline is read from; injectable so tests can drive it. The
      only clock the dispatch core reads.
    """

    initial_limit: float = FIRST_RESTART_S
    growth: float = 2.0
    max_limit: float = RESTART_GROWTH_CAP * FIRST_RESTART_S
    patience: int = PATIENCE
    deadline: float = DEADLINE_S
    margin: float = 0.03
    improve: bool = True
    min_run: float = 0.005
    num_workers: int = 1
    random_seed: int = 0
    deterministic: bool = False
    wall_clock: bool = True
    work_budget: float | None = None
    """With ``deterministic``: the most CP-SAT deterministic time all runs of one call may
    use together, as the deadline bounds their wall time (None: each run's limit only).
    The policy sets it from the deadline (:data:`~cpsched.core.search_defaults.WORK_PER_SECOND`)."""
    presolve: bool | None = None
    """CP-SAT's presolve; None: the dispatcher's default (on for HCP3; off for PCP3, whose
    node-level models it slows down more than it helps — measured on KTH)."""
    presolve_iterations: int | None = 1
    probing_level: int | None = 0
    symmetry_level: int | None = 0
    presolve_probing_dtime: float | None = 0.01
    reuse: bool = False
    """Reuse between calls: offer the previous call's plan order as one more greedy hint
    (``greedy.previous_order``); off by default (measured in docs/results/cp-dispatchers.md)."""
    search_size_cap: int | None = None
    """PCP3: a model of more ``x[i,n]`` than this is neither built nor searched; the call
    answers with its best greedy node plan (a solution of the model; status
    ``skipped``). None (the default): always search. On CTC (338 one-core nodes) at a
    0.2 s deadline no call above 20,000 ``x[i,n]`` beat its hint, and those calls took
    half of the CPU (docs/results/cp-dispatchers.md). HCP3 and PCP'20 ignore it."""
    clock: Clock = field(default=time.perf_counter, compare=False)

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not self.initial_limit > 0:
            problems.append(f"initial_limit must be > 0 s, got {self.initial_limit}")
        if not self.growth > 1:
            # growth 1 could retry forever under a clock that does not advance.
            problems.append(f"growth must be > 1, got {self.growth}")
        if not self.max_limit >= self.initial_limit:
            problems.append(f"max_limit {self.max_limit} is below initial_limit")
        if self.patience < 1:
            problems.append(f"patience must be >= 1 run, got {self.patience}")
        if not self.deadline > 0:
            problems.append(f"deadline must be > 0 s, got {self.deadline}")
        if not 0 <= self.margin < self.deadline:
            problems.append(f"margin must be in [0, deadline), got {self.margin}")
        if not self.min_run >= 0:
            problems.append(f"min_run must be >= 0 s, got {self.min_run}")
        if self.num_workers < 1:
            problems.append(f"num_workers must be >= 1, got {self.num_workers}")
        if self.random_seed < 0:
            problems.append(f"random_seed must be >= 0, got {self.random_seed}")
        problems += self._presolve_problems()
        if self.search_size_cap is not None and self.search_size_cap < 1:
            problems.append(f"search_size_cap must be >= 1 or None, got {self.search_size_cap}")
        if self.work_budget is not None and not self.work_budget > 0:
            problems.append(f"work_budget must be > 0 or None, got {self.work_budget}")
        if not self.wall_clock and not self.deterministic:
            problems.append(
                "a search without the wall clock must be limited by work: set deterministic"
            )
        if problems:
            raise ConfigError("invalid search config: " + "; ".join(problems))

    def _presolve_problems(self) -> list[str]:
        problems: list[str] = []
        if self.presolve_iterations is not None and self.presolve_iterations < 0:
            problems.append(f"presolve_iterations must be >= 0, got {self.presolve_iterations}")
        for name in ("probing_level", "symmetry_level"):
            level = getattr(self, name)
            if level is not None and not 0 <= level <= 3:
                problems.append(f"{name} must be in 0..3 (CP-SAT's levels), got {level}")
        if self.presolve_probing_dtime is not None and not self.presolve_probing_dtime >= 0:
            problems.append(
                f"presolve_probing_dtime must be >= 0, got {self.presolve_probing_dtime}"
            )
        return problems


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    status: str
    """"optimal", "feasible" (a solution, optimality not proven), "hint" (the hint given as
    the incumbent, not improved on in time, optimality not proven), "skipped" (the hint,
    no search: ``SearchConfig.search_size_cap``), "infeasible" (proven),
    "unknown" (no solution within δ_max), "deadline" (no solution before the deadline)
    or "model_invalid" (a bug in the model; CP-SAT refused it)."""
    values: tuple[int, ...] | None
    """The best solution's values of the decision variables, when there is one."""
    objective: int | None
    runs: int
    stop: str
    """Why the restart loop stopped, for the decision's notes."""


def solve_with_restarts(
    model: cp_model.CpModel,
    indices: Sequence[int],
    hint: Sequence[int] | None,
    config: SearchConfig,
    clock: Clock,
    began: float,
    incumbent: int | None = None,
    keep: float = 0.0,
) -> SearchOutcome:
    """Run the restart loop on ``model``; ``began`` is ``clock()`` at the start of the call.
    ``indices``: the decision variables' proto indices (``bulk.indices_of``; ``-i-1``
    stands for variable i negated, see ``_values``), the order of ``hint`` and of the
    outcome's values.

    ``incumbent``: the objective of ``hint`` when the hint is a complete solution of the
    model, which then counts as the best solution so far. ``keep``: seconds kept back
    from the solver beyond ``config.margin`` (for the work after the search)."""
    best: tuple[int, ...] | None = None
    best_objective: int | None = None
    from_hint = False
    limit = config.initial_limit
    runs = stale = 0
    proven = False
    work_left = _work_budget(config)
    if hint is not None:
        _set_hint(model, indices, hint)
        if incumbent is not None:
            best, best_objective, from_hint = tuple(hint), incumbent, True
    while True:
        left, spent = _room(config, clock() - began, keep, work_left)
        if spent is not None:
            stop = spent
            break
        solver = _solver(config, min(limit, work_left), left)
        code = solver.solve(model)
        runs += 1
        work_left -= _work_used(config, solver)
        if code == cp_model.INFEASIBLE:
            return SearchOutcome("infeasible", None, None, runs, "proven infeasible")
        if code == cp_model.MODEL_INVALID:
            return SearchOutcome("model_invalid", None, None, runs, model.validate())
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            objective = round(solver.objective_value)
            # A proven optimum above the incumbent's objective: the hint was no solution
            # of the model after all (a bug in a hint builder); trust the solver.
            hint_was_wrong = (
                from_hint
                and incumbent is not None
                and code == cp_model.OPTIMAL
                and objective > incumbent
            )
            if best_objective is None or objective < best_objective or hint_was_wrong:
                best = _values(solver, indices)
                best_objective, stale, from_hint = objective, 0, False
                _set_hint(model, indices, best)  # the next run starts from it
            else:
                stale += 1
            if code == cp_model.OPTIMAL:
                proven, stop = True, "optimal"
                break
            if not config.improve:
                stop = "first solution"
                break
            if stale >= config.patience:
                stop = f"no improvement in {stale} runs"
                break
        elif best is not None:
            stale += 1  # a run that found nothing did not improve either
            if stale >= config.patience:
                stop = f"no improvement in {stale} runs"
                break
        limit *= config.growth
        if limit > config.max_limit:
            stop = "limit above max_limit"
            break
    if best is None:
        status = "deadline" if stop == "deadline" else "unknown"
        return SearchOutcome(status, None, None, runs, stop)
    status = "optimal" if proven else "hint" if from_hint else "feasible"
    return SearchOutcome(status, best, best_objective, runs, stop)


def _work_budget(config: SearchConfig) -> float:
    """The deterministic time all runs of one call may use (infinite: no such budget)."""
    if config.deterministic and config.work_budget is not None:
        return config.work_budget
    return math.inf


def _room(
    config: SearchConfig, elapsed: float, keep: float, work_left: float
) -> tuple[float, str | None]:
    """The seconds a next run may take (infinite without the wall clock), and why none
    may start (its ``stop``) or None: the deadline is too near, or the call's work budget
    is used up."""
    left = config.deadline - config.margin - keep - elapsed if config.wall_clock else math.inf
    if left < config.min_run or left <= 0:
        return left, "deadline"
    if work_left <= 0:
        return left, "work budget spent"
    return left, None


def _work_used(config: SearchConfig, solver: cp_model.CpSolver) -> float:
    """The deterministic time a run used, where the call has a work budget (else 0)."""
    if not config.deterministic:
        return 0.0
    return float(solver.deterministic_time)  # not response_proto: a copy of the solution


def _solver(config: SearchConfig, limit: float, left: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = config.num_workers
    params.random_seed = config.random_seed
    params.cp_model_presolve = config.presolve is not False
    if config.presolve_iterations is not None:
        params.max_presolve_iterations = config.presolve_iterations
    if config.probing_level is not None:
        params.cp_model_probing_level = config.probing_level
    if config.symmetry_level is not None:
        params.symmetry_level = config.symmetry_level
    if config.presolve_probing_dtime is not None:
        params.presolve_probing_deterministic_time_limit = config.presolve_probing_dtime
    if config.deterministic:
        params.max_deterministic_time = limit
        if math.isfinite(left):
            params.max_time_in_seconds = left  # the safety net only
    else:
        params.max_time_in_seconds = min(limit, left)
    return solver


def _values(solver: cp_model.CpSolver, indices: Sequence[int]) -> tuple[int, ...]:
    """The solution's values of the variables of these indices (a negated literal's index
    is ``-i-1``: its variable's value, flipped), from the response in one copy:
    ``solver.value`` per variable took 12-15 ms on PCP3's 17,000 ``x[i,n]`` (CTC)."""
    solution = list(solver.response_proto.solution)
    return tuple(solution[i] if i >= 0 else 1 - solution[-i - 1] for i in indices)


def _set_hint(model: cp_model.CpModel, indices: Sequence[int], values: Sequence[int]) -> None:
    # In bulk on the proto: ``add_hint`` appends one pair per Python call, and PCP3's
    # hints on wide machines have tens of thousands of pairs. A negated literal
    # (index ``-i-1``, see ``_values``) is hinted as ``add_hint`` does: its variable,
    # flipped.
    if len(indices) != len(values):
        raise ValueError(f"{len(indices)} variables but {len(values)} hint values")
    model.clear_hints()  # type: ignore[no-untyped-call]
    hint = model.proto.solution_hint
    hint.vars.extend([i if i >= 0 else -i - 1 for i in indices])
    hint.values.extend(
        [int(v) if i >= 0 else int(not v) for i, v in zip(indices, values, strict=True)]
    )
