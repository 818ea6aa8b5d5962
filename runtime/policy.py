"""The policy: how a cluster is dispatched, with one set of names and defaults.

The command line (``cpsched replay`` options), the service's configuration (``[defaults]``
and ``[clusters.NAME]`` tables, ``CPSCHED_*`` variables), ``bench-instances`` variants
(``pcp20@cp_time_unit=60``) and the tests all build this one validated object, and it
builds what the dispatch core and the predictors need. A setting is added here, once.

All durations are in seconds. The defaults are the ``default`` policy, what cpsched
recommends (docs/value-over-today.md): HCP3 planned with the users' last two run times,
an overrunning job expected to run to its limit, a 0.2 s deadline with short restarts,
EASY's decision when the search has none in time; limits stay the users' requests.
``today`` (EASY on the requested times, what a site runs now) and the other named
policies are in :data:`NAMED_POLICIES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cpsched.core.allocators import make_allocator
from cpsched.core.correction import CorrectionPolicy
from cpsched.core.heuristics import BackfillOrder, QueueOrder
from cpsched.core.registry import (
    DISPATCHERS,
    FALLBACK,
    FALLBACK_DEPTH,
    bounded,
    corrected,
    is_cp,
    make_dispatcher,
    make_fallback,
)
from cpsched.core.search_defaults import (
    DEADLINE_S,
    FIRST_RESTART_S,
    FIRST_RESTART_WORK,
    PATIENCE,
    RESTART_GROWTH_CAP,
    WORK_PER_SECOND,
)
from cpsched.core.state import DispatcherState
from cpsched.core.steady_blocks import SPLIT_WAIT_S
from cpsched.core.wait_bound import BoundSettings
from cpsched.errors import ConfigError
from cpsched.predictor.margin import Margin
from cpsched.predictor.registry import LEARNED, PREDICTORS, make_predictor
from cpsched.predictor.upper import UpperQuantile
from cpsched.runtime.overrun import OverrunRule

if TYPE_CHECKING:
    from cpsched.core.cp import ModelConfig, SearchConfig
    from cpsched.core.dispatcher import Dispatcher
    from cpsched.predictor.base import Predictor

if TYPE_CHECKING:
    DispatcherName = str
    PredictorName = str
else:
    # The registries are the one list of names: a dispatcher or predictor added there is a
    # choice of the CLI and the config at once (typer and pydantic read the Literal).
    DispatcherName = Literal[DISPATCHERS]
    PredictorName = Literal[tuple(PREDICTORS)]
LimitPolicy = Literal["requested", "predicted"]
CorrectionKind = Literal["off", "simple", "power"]
PresolveEffort = Literal["bounded", "cpsat"]
ReplaySearch = Literal["work", "wall"]

LIMITS: tuple[str, ...] = get_args(LimitPolicy)

WAIT_BOUND_S = 6 * 3600
"""The default policy's wait bound: a job that has waited 6 h gets a start guarantee
(docs/wait-bound.md says why 6 h and one guarantee at a time)."""

NO_WAIT_BOUND: dict[str, Any] = {"wait_bound": 0, "wait_bound_depth": 0}
"""The settings of a policy without start guarantees (today's EASY, easy++, unbounded)."""

DEFAULT_CORRECTION_CAP = 7 * 86400
"""Cap of walltime extensions when neither the policy nor the system sets one: a week."""


NAMED_POLICIES: dict[str, dict[str, Any]] = {
    "today": {
        "dispatcher": "easy",
        "predictor": "wall-time",
        "backfill_order": "queue",
        "overrun": "one-second",
        **NO_WAIT_BOUND,
    },
    "conservative": {
        "dispatcher": "easy",
        "predictor": "wall-time",
        "backfill_order": "queue",
        "backfill_depth": 50,
        "overrun": "one-second",
        **NO_WAIT_BOUND,
    },
    "easy++": {
        "dispatcher": "easy",
        "predictor": "last-two",
        "backfill_order": "shortest",
        "overrun": "request",
        **NO_WAIT_BOUND,
    },
    "default": {},
    "unbounded": NO_WAIT_BOUND,
    "bounded": {},
    "oracle": {"predictor": "oracle"},
}
"""Policies by name, each as its settings over the field defaults:

* ``today``: what a site runs today, EASY backfilling on the users' requested times;
* ``conservative``: today's, with reservations for the first 50 blocked jobs;
* ``easy++``: EASY with the users' last two run times as predictions, shortest predicted
  job backfilled first, and an overrunning job expected to run to its limit (Tsafrir,
  Etsion and Feitelson, TPDS 2007);
* ``default``: what cpsched recommends, the field defaults: HCP3 with easy++'s
  predictions and correction (docs/value-over-today.md says how it was chosen), keeping
  a start guarantee for the longest-waiting job once it has waited 6 h
  (:mod:`cpsched.core.wait_bound`; docs/wait-bound.md): the longest waits near today's;
* ``unbounded``: ``default`` without the start guarantees (the default until
  2026-11-30): more of the mean gain, the longest waits up to several times today's;
* ``bounded``: the same as ``default`` (its name before the bound became the default);
* ``oracle``: ``default`` with the trace's real run times, a bound for replays only.
"""


class Policy(BaseModel):
    """How one cluster is dispatched; every field is reachable from every front end.

    ``policy = NAME`` among the values starts from the named policy
    (:data:`NAMED_POLICIES`) instead of the defaults; the other values override it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    dispatcher: DispatcherName = Field(
        "hcp3",
        description="fcfs, sjf, ljf and easy (EASY backfilling) are heuristics; hcp3, pcp3 "
        "and pcp20 solve CP models, falling back to easy when out of time.",
    )
    allocator: str = Field(
        "best-fit",
        description="first-fit, best-fit, or a heterogeneous allocator, which may name its "
        "critical types: balanced:gpu,mic.",
    )
    predictor: PredictorName = Field(
        "last-two",
        description="Run times the dispatcher plans with: the request (wall-time), the "
        "user's last two (last-two), job profiles, AdaBoost, quantile boosting, last-two with "
        "a learned test for very short jobs (short-jobs), or the trace's (oracle, replay).",
    )
    prediction_margin: float = Field(
        1.0,
        gt=0,
        le=100,
        description="Plan with every prediction this many times longer, never past the "
        "request: an under-estimate breaks plans, an over-estimate only loses a backfill "
        "(the oracle is never scaled).",
    )
    prediction_upper_quantile: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Plan each running job with an upper estimate, from its start: its "
        "prediction times this quantile of the ratio of run time to prediction over the "
        "user's latest finished jobs (everyone's while the user has few), never past the "
        "request; queued jobs keep the prediction (0: running jobs keep it too).",
    )
    backfill_order: BackfillOrder = Field(
        "shortest",
        description="EASY (and the EASY fallback): try backfill candidates in queue order, "
        "or shortest (predicted) first (EASY++'s shortest-job-backfilled-first).",
    )
    priority: QueueOrder = Field(
        "cpsched",
        description="Who goes first: cpsched's own order (FCFS/EASY: submission; CP: "
        "slowdown priority) or the site's priority from the workload manager (site: "
        "FCFS/EASY/conservative follow it; the CP dispatchers fill their window in its "
        "order, slowdown breaking ties; a replay computes a fair-share priority).",
    )
    backfill_depth: int = Field(
        1,
        ge=1,
        description="EASY: blocked jobs, in queue order, that get a reservation: 1 is EASY, "
        "more is conservative backfilling up to that depth.",
    )
    split_wait: int = Field(
        SPLIT_WAIT_S,
        ge=0,
        le=3600,
        description="Jobs whose tasks Slurm spreads over their nodes itself: seconds one that "
        "could start now may wait for nodes where no running job's end can change Slurm's "
        "split (so it runs exactly as decided), if a job on its nodes is expected to end "
        "within that time; 0: start it at once.",
    )
    overrun: OverrunRule = Field(
        "request",
        description="What a running job that outlived its prediction is expected to take: "
        "one more second (the papers'), its limit (request), the next of 1, 5, 15, 30 min, "
        "1, 2, 5, 10, 20, 50, 100 h (ladder), or its prediction doubled (doubling).",
    )
    limits: LimitPolicy = Field(
        "requested",
        description="A started job's time limit: its request, or its prediction (then only "
        "walltime correction keeps an underestimated job alive; replay only).",
    )
    correction: CorrectionKind = Field(
        "off", description="Walltime correction: off, simple (fixed steps) or power (EASY++)."
    )
    correction_step: int = Field(3600, ge=1, description="Seconds a simple correction adds.")
    correction_lead: int = Field(60, ge=0, description="Extend this many seconds before the limit.")
    correction_cap: int | None = Field(
        None,
        ge=1,
        description="Longest limit an extension may set (the partition's maximum); default: "
        "the system's maximum time limit, else a week.",
    )
    deadline: float = Field(
        DEADLINE_S,
        gt=0,
        le=600,
        description="Seconds per call: the service answers within it, from the request's "
        "arrival (reading, predicting, the dispatcher, the fallback if it must, the audit); "
        "a replay gives it all to the dispatcher. Then the fallback answers.",
    )
    fallback_depth: int = Field(
        FALLBACK_DEPTH,
        ge=0,
        description="The fallback (EASY) considers at most this many queued jobs per call, "
        "in queue order, like Slurm's bf_max_job_test, so that its answer is quick on any "
        "queue; 0: all of them.",
    )
    cp_limit: float = Field(
        FIRST_RESTART_S,
        gt=0,
        description="CP: the first restart's time limit (doubles up to 16 times it).",
    )
    cp_patience: int = Field(
        PATIENCE, ge=1, description="CP: stop after this many runs without improvement."
    )
    cp_deterministic: bool = Field(
        False,
        description="CP in the service: limit each search by solver work (cp_work_limit) "
        "instead of wall time (cp_limit); the deadline still applies.",
    )
    cp_replay_search: ReplaySearch = Field(
        "work",
        description="CP in replays: 'work' limits each search by solver work alone "
        "(cp_work_limit, no wall clock in any call: a replay gives the same result on any "
        "machine, idle or busy); 'wall' searches as the service does, within the deadline.",
    )
    cp_work_limit: float = Field(
        FIRST_RESTART_WORK,
        gt=0,
        description="CP searches limited by work: the first restart's limit in CP-SAT's "
        "deterministic time (doubles up to 16 times it); all runs of a call share "
        "deadline x 0.15 units, what an ordinary core does within the deadline.",
    )
    wait_bound: int = Field(
        WAIT_BOUND_S,
        ge=0,
        description="Give each job that has waited this many seconds a start guarantee "
        "(the earliest time it fits, every job at its time limit) that later decisions "
        "keep: a bound on the longest wait (0: none).",
    )
    wait_bound_depth: int = Field(
        1,
        ge=0,
        description="The most jobs holding a start guarantee at once (wait_bound): the "
        "longest-waiting first, the others get theirs as those start (0: no limit).",
    )
    wait_overdue_quantile: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="With wait_bound: a job that has waited longer than this quantile of "
        "the latest 2,000 jobs' waits (and at least 1 h) starts first wherever it fits now "
        "at its limit, guarantees kept (0: none).",
    )
    wait_bound_today: int = Field(
        0,
        ge=0,
        description="A job that has waited this many seconds gets a start guarantee (beyond "
        "wait_bound_depth) once today's scheduler, run beside on the same arrivals (EASY "
        "on the requests), would have reserved room for it, and starts first where it "
        "fits once today's would have started it (0: none).",
    )
    trial_run: int = Field(
        0,
        ge=0,
        description="After each decision, a queued job predicted at least this many seconds "
        "runs that long on what the decision leaves idle, once, and goes back to the queue "
        "unless it ended: the very short jobs found by running them (0: none). Live, only "
        "jobs the workload manager may requeue are tried, where the bridge can end a trial "
        "(Slurm's with scontrol requeuehold, PBS's with qrerun).",
    )
    cp_reserve_after: int = Field(
        0, ge=0, description="CP: reserve for a job once it has waited this long (0: never)."
    )
    cp_reserve_above: float = Field(
        10.0,
        ge=0,
        description="CP: reserve for the first job whose slowdown would reach this, as EASY "
        "does for its head job (0: never).",
    )
    cp_window: int = Field(100, ge=1, description="CP: queued jobs (by priority) per model.")
    cp_reuse: bool = Field(False, description="CP: offer the previous call's plan order as a hint.")
    cp_search_cap: int | None = Field(
        None,
        ge=1,
        description="PCP3: above this many x[i,n] variables, answer with the greedy node plan "
        "without building or searching the model.",
    )
    cp_time_unit: int = Field(1, ge=1, description="CP: seconds per model time unit.")
    cp_presolve_effort: PresolveEffort = Field(
        "bounded", description="CP: presolve effort, bounded (default) or CP-SAT's own."
    )
    cp_workers: int = Field(1, ge=1, description="CP: CP-SAT search workers.")
    cp_merge_running: bool = Field(
        True, description="PCP'20: join running jobs into one rectangle per node run."
    )
    cp_node_symmetry: bool = Field(False, description="PCP3: break identical nodes' symmetry.")
    retrain_every: int = Field(
        1000, ge=1, description="adaboost, quantile-boost, short-jobs: completions per retrain."
    )

    @model_validator(mode="before")
    @classmethod
    def _named(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "policy" in data:
            values = dict(data)
            name = values.pop("policy")
            if name not in NAMED_POLICIES:
                raise ValueError(
                    f"unknown policy {name!r}: choose one of {', '.join(NAMED_POLICIES)}"
                )
            return {**NAMED_POLICIES[name], **values}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Policy:
        try:
            make_allocator(self.allocator)
        except ConfigError as exc:  # it lists the valid names
            raise ValueError(str(exc)) from None
        only: dict[str, tuple[bool, str]] = {
            "cp_search_cap": (self.cp_search_cap is not None, "pcp3"),
            "cp_node_symmetry": (self.cp_node_symmetry, "pcp3"),
            "cp_merge_running": (not self.cp_merge_running, "pcp20"),
        }
        for name, (used, dispatcher) in only.items():
            if used and self.dispatcher != dispatcher:
                raise ValueError(
                    f"{name} applies to {dispatcher} only, not {self.dispatcher}: "
                    f"drop it or use dispatcher {dispatcher}"
                )
        return self

    # -- construction from the front ends ------------------------------------------------

    @classmethod
    def parse(cls, values: Mapping[str, Any], *, where: str = "policy") -> Policy:
        """A policy from ``values``; a bad name or value is a ConfigError saying which."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise ConfigError(f"{where}: {explain(exc)}") from None
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    @classmethod
    def named(cls, name: str, **changes: Any) -> Policy:
        """The policy called ``name`` (:data:`NAMED_POLICIES`), with ``changes``."""
        return cls.parse({"policy": name, **changes}, where=f"policy {name}")

    def but(self, **changes: Any) -> Policy:
        """This policy with ``changes``, validated again."""
        return Policy.parse({**self.model_dump(), **changes})

    # -- what it builds --------------------------------------------------------------------

    @property
    def is_cp(self) -> bool:
        return is_cp(self.dispatcher)

    def correction_policy(self, system_cap: int | None = None) -> CorrectionPolicy:
        """Walltime correction, capped by the policy, else the system, else a week."""
        return CorrectionPolicy(
            self.correction,
            step=self.correction_step,
            lead=self.correction_lead,
            cap=self.correction_cap or system_cap or DEFAULT_CORRECTION_CAP,
        )

    def search_config(self, *, replay: bool = False) -> SearchConfig | None:
        """The CP search settings, for a replay or the service; None for the heuristics
        (OR-Tools is then not loaded). A replay's search is limited by work alone unless
        ``cp_replay_search`` is ``wall``; the service's by wall time unless
        ``cp_deterministic``, always within the deadline."""
        if not self.is_cp:
            return None
        from cpsched.core.cp import SearchConfig
        from cpsched.core.cp.search import PRESOLVE_EFFORT

        effort: dict[str, Any] = {}
        if self.cp_presolve_effort == "cpsat":
            effort = dict.fromkeys(PRESOLVE_EFFORT)
        work_only = replay and self.cp_replay_search == "work"
        by_work = work_only or self.cp_deterministic
        first = self.cp_work_limit if by_work else self.cp_limit
        return SearchConfig(
            initial_limit=first,
            max_limit=RESTART_GROWTH_CAP * first,
            patience=self.cp_patience,
            deadline=self.deadline,
            deterministic=by_work,
            wall_clock=not work_only,
            work_budget=self.deadline * WORK_PER_SECOND if by_work else None,
            num_workers=self.cp_workers,
            reuse=self.cp_reuse,
            search_size_cap=self.cp_search_cap,
            **effort,
        )

    def model_settings(self) -> ModelConfig | None:
        """What goes into the CP models; None for the heuristics."""
        if not self.is_cp:
            return None
        from cpsched.core.cp import ModelConfig

        return ModelConfig(
            window=self.cp_window,
            time_unit=self.cp_time_unit,
            reserve_above=self.cp_reserve_above or None,
            reserve_after=self.cp_reserve_after or None,
            site_order=self.priority == "site",
        )

    def make_dispatchers(
        self,
        *,
        plan: bool = True,
        system_cap: int | None = None,
        state: DispatcherState | None = None,
        replay: bool = False,
    ) -> tuple[Dispatcher, Dispatcher]:
        """The configured dispatcher and its fallback, built once with every setting and
        sharing ``state`` (what they learn between calls, kept by the caller).

        The fallback (EASY, best-fit, at most ``fallback_depth`` jobs, the policy's
        backfill order, queue order and split wait) is one object: a CP dispatcher
        answers with it when its search has none in time, seeds its hint with it and
        fills with it; the service answers with it when the dispatcher misses the
        deadline. ``plan=False`` lets the heuristics skip planned starts nobody reads
        (replays); ``replay`` gives a CP dispatcher the replay's search
        (:meth:`search_config`)."""
        state = state if state is not None else DispatcherState()
        correction = self.correction_policy(system_cap)
        fallback = self._fallback(state, plan)
        dispatcher = make_dispatcher(
            self.dispatcher,
            self.allocator,
            plan=plan,
            correction=correction,
            search=self.search_config(replay=replay),
            model=self.model_settings(),
            merge_running=self.cp_merge_running,
            node_symmetry=self.cp_node_symmetry,
            state=state,
            backfill_order=self.backfill_order,
            backfill_depth=self.backfill_depth,
            queue_order=self.priority,
            split_wait=self.split_wait,
            fallback=fallback,
            wait_bound=self.wait_bound or None,
            wait_bound_depth=self.wait_bound_depth or None,
            wait_overdue_quantile=self.wait_overdue_quantile or None,
            wait_bound_today=self.wait_bound_today or None,
            trial_runs=self.trial_run or None,
        )
        # The service's fallback keeps the same guarantees (the CP dispatcher's own copy
        # of it is inside the bound already).
        answering = self._bounded(fallback, state)
        return dispatcher, corrected(answering, correction)

    def make_dispatcher(
        self,
        *,
        plan: bool = True,
        system_cap: int | None = None,
        state: DispatcherState | None = None,
        replay: bool = False,
    ) -> Dispatcher:
        """The configured dispatcher (:meth:`make_dispatchers`' first)."""
        return self.make_dispatchers(plan=plan, system_cap=system_cap, state=state, replay=replay)[
            0
        ]

    def make_fallback(
        self, *, system_cap: int | None = None, state: DispatcherState | None = None
    ) -> Dispatcher:
        """The heuristic answering when the dispatcher cannot in time, with its
        corrections, as :meth:`make_dispatchers` builds it (without the dispatcher)."""
        state = state if state is not None else DispatcherState()
        fallback = self._bounded(self._fallback(state, True), state)
        return corrected(fallback, self.correction_policy(system_cap))

    def _bounded(self, fallback: Dispatcher, state: DispatcherState) -> Dispatcher:
        """The fallback keeping the dispatcher's start guarantees (the same ``state``)."""
        return bounded(
            fallback, FALLBACK[1], state, self.split_wait, self.bound_settings(), self.priority
        )

    def bound_settings(self) -> BoundSettings:
        """The wait bound's settings (:mod:`cpsched.core.wait_bound`), 0 meaning off."""
        return BoundSettings(
            self.wait_bound or None,
            self.wait_bound_depth or None,
            self.wait_overdue_quantile or None,
            self.wait_bound_today or None,
        )

    def _fallback(self, state: DispatcherState, plan: bool) -> Dispatcher:
        """EASY on best-fit with the policy's backfill order, queue order, depth and
        split wait, learning into ``state``; no corrections."""
        return make_fallback(
            state=state,
            plan=plan,
            backfill_order=self.backfill_order,
            queue_order=self.priority,
            depth=self.fallback_depth or None,
            split_wait=self.split_wait,
        )

    def make_predictor(
        self, *, background: bool = False, run_times: Mapping[str, int] | None = None
    ) -> Predictor:
        """The configured predictor. ``background`` lets a learned predictor retrain off
        the caller's thread (the service); ``run_times`` are the oracle's answers (replay
        only)."""
        if self.predictor == "oracle":
            return make_predictor("oracle", run_times=run_times)
        if self.predictor in LEARNED:
            predictor = make_predictor(
                self.predictor, background=background, retrain_every=self.retrain_every
            )
        else:
            predictor = make_predictor(self.predictor)
        if self.prediction_margin != 1:
            predictor = Margin(predictor, self.prediction_margin)
        if self.prediction_upper_quantile:
            predictor = UpperQuantile(predictor, self.prediction_upper_quantile)
        return predictor


def explain(exc: ValidationError) -> str:
    """A pydantic error as one line: each wrong field and what is wrong with it."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        given = err.get("input")
        if where and isinstance(given, str | int | float):
            where = f"{where} = {given!r}"  # the value the user gave, not only what is valid
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
