"""Dispatcher names → dispatchers; the one place that knows every policy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpsched.core.allocators import make_allocator
from cpsched.core.contextual import with_allocator_context
from cpsched.core.correcting import CorrectingDispatcher
from cpsched.core.correction import CorrectionPolicy
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.heuristics import (
    ORDERS,
    BackfillOrder,
    ListDispatcher,
    QueueOrder,
    by_site_priority,
)
from cpsched.core.site_dispatch import SiteRulesDispatcher
from cpsched.core.site_placement import SitePlacement
from cpsched.core.state import DispatcherState
from cpsched.core.steady_blocks import SPLIT_WAIT_S, SteadyBlocks, SteadyStarts
from cpsched.core.trial_runs import TrialRuns
from cpsched.core.wait_bound import BoundSettings, WaitBound
from cpsched.errors import UnknownPolicyError

if TYPE_CHECKING:
    from cpsched.core.cp.prepare import ModelConfig
    from cpsched.core.cp.search import SearchConfig

# name → (queue order, EASY backfilling?)
HEURISTICS: dict[str, tuple[str, bool]] = {
    "fcfs": ("fcfs", False),
    "sjf": ("sjf", False),
    "ljf": ("ljf", False),
    "easy": ("fcfs", True),
}
# name → the CP dispatcher's class, imported only when asked for (OR-Tools is heavy)
CP_DISPATCHERS: dict[str, str] = {
    "hcp3": "cpsched.core.cp.hcp3.HCP3Dispatcher",
    "pcp3": "cpsched.core.cp.pcp3.PCP3Dispatcher",
    "pcp20": "cpsched.core.cp.pcp20.PCP20Dispatcher",
}
DISPATCHERS = (*HEURISTICS, *CP_DISPATCHERS)
"""Every dispatcher's name: adding one here (and its module) is all a new policy needs."""

FALLBACK = ("easy", "best-fit")
"""The heuristic (dispatcher, allocator) that answers when a dispatcher cannot in time."""
FALLBACK_DEPTH = 500
"""Queued jobs the fallback considers per call, in queue order (Slurm's bf_max_job_test
plays the same part): its answer stays quick on any queue."""


def is_cp(name: str) -> bool:
    """Whether ``name`` is a CP dispatcher (it solves models with OR-Tools)."""
    return name in CP_DISPATCHERS


def make_placer(allocator: str, state: DispatcherState, split_wait: int) -> SitePlacement:
    """Where every dispatcher puts a job: ``allocator``, within the site's rules, block
    jobs on splits that cannot drift (waiting up to ``split_wait`` s for one)."""
    inner = make_allocator(allocator, counters=state.priority_counters)
    return SitePlacement(SteadyBlocks(inner, wait=split_wait, waiting=state.split_waits))


def make_dispatcher(
    name: str,
    allocator: str,
    *,
    plan: bool = True,
    correction: CorrectionPolicy | None = None,
    search: SearchConfig | None = None,
    model: ModelConfig | None = None,
    merge_running: bool = True,
    node_symmetry: bool = False,
    state: DispatcherState | None = None,
    backfill_order: BackfillOrder = "queue",
    backfill_depth: int = 1,
    queue_order: QueueOrder = "cpsched",
    queue_depth: int | None = None,
    split_wait: int = SPLIT_WAIT_S,
    fallback: Dispatcher | None = None,
    wait_bound: int | None = None,
    wait_bound_depth: int | None = None,
    wait_overdue_quantile: float | None = None,
    wait_bound_today: int | None = None,
    trial_runs: int | None = None,
) -> Dispatcher:
    """The dispatcher registered as ``name`` placing jobs with ``allocator``.

    ``plan=False`` lets a heuristic skip planned starts nobody will read (replays);
    ``correction`` adds walltime-extension directives to its decisions; ``search`` sets
    a CP dispatcher's time limits and deadline, ``model`` what goes into its models;
    ``merge_running`` and ``node_symmetry`` are PCP'20's and PCP3's formulation options.
    ``state`` is what the dispatcher learns between calls: the caller keeps it (default:
    a fresh one, which nobody else sees). ``backfill_order`` is the order EASY tries
    backfill candidates in, ``backfill_depth`` how many blocked jobs get a reservation.
    ``queue_order="site"`` orders FCFS, EASY and conservative by the site's priority (the
    CP dispatchers take it from ``model``). ``queue_depth`` bounds the jobs a heuristic
    considers per call (None: all; the CP dispatchers bound theirs by their window).
    ``split_wait`` is how long a block job may wait for a split that cannot drift
    (:mod:`cpsched.core.steady_blocks`). ``fallback`` is what a CP dispatcher answers
    with when its search has none in time (default: :func:`make_fallback` with these
    settings and ``state``); the heuristics have none. ``wait_bound`` gives every job
    that has waited that many seconds a start guarantee the decisions keep
    (:mod:`cpsched.core.wait_bound`), at most ``wait_bound_depth`` jobs at a time (None:
    every such job); None: none. ``wait_overdue_quantile`` starts first, where they fit,
    the jobs that waited longer than that quantile of the latest jobs' waits (None: none).
    ``wait_bound_today``: a job that has waited that long is promised a start, whatever the
    depth, once today's scheduler, run beside, would have reserved room for it, and starts
    first where it fits once today's would have started it (None: neither).
    ``trial_runs``: after each decision, jobs predicted at least that many seconds run that
    long on what it leaves idle, each once, and go back to the queue unless they ended
    (:mod:`cpsched.core.trial_runs`; None: none).
    """
    dispatcher: Dispatcher
    state = state if state is not None else DispatcherState()  # its parts are shared below
    if name in CP_DISPATCHERS:
        if fallback is None:
            fallback = make_fallback(
                state=state,
                plan=plan,
                backfill_order=backfill_order,
                queue_order=queue_order,
                split_wait=split_wait,
            )
        # Imported here: OR-Tools is heavy, and heuristic-only callers never need it.
        from cpsched.core.cp import make_cp_dispatcher

        cp = make_cp_dispatcher(
            name,
            allocator,
            search,
            model=model,
            merge_running=merge_running,
            node_symmetry=node_symmetry,
            state=state,
            split_wait=split_wait,
            fallback=fallback,
        )
        dispatcher = with_allocator_context(cp, cp.allocator)
    elif name in HEURISTICS:
        order, backfill = HEURISTICS[name]
        placer = make_placer(allocator, state, split_wait)
        ordering = ORDERS[order]
        if queue_order == "site" and order == "fcfs":
            ordering = by_site_priority  # SJF and LJF keep their own orders
        listed = ListDispatcher(
            name,
            ordering,
            placer,
            backfill=backfill,
            plan=plan,
            backfill_order=backfill_order,
            depth=backfill_depth,
            max_jobs=queue_depth,
            state=state,
        )
        # The site's rules, and balanced, weighted, ...: they observe each snapshot.
        dispatcher = with_allocator_context(listed, placer)
    else:
        raise UnknownPolicyError("dispatcher", name, DISPATCHERS)
    # Block-layout jobs (the bridge's Slurm task jobs) get the split Slurm reproduces, on
    # nodes where it cannot drift (or marked may_drift once they waited); then the site's
    # rules: ineligible jobs out, every start checked against them.
    dispatcher = SiteRulesDispatcher(SteadyStarts(dispatcher, state.split_waits, split_wait))
    bound = BoundSettings(wait_bound, wait_bound_depth, wait_overdue_quantile, wait_bound_today)
    dispatcher = bounded(dispatcher, allocator, state, split_wait, bound, queue_order)
    if trial_runs:
        placer = make_placer(allocator, state, split_wait)
        dispatcher = TrialRuns(dispatcher, placer, trial_runs, state)
    return corrected(dispatcher, correction)


def bounded(
    dispatcher: Dispatcher,
    allocator: str,
    state: DispatcherState,
    split_wait: int,
    bound: BoundSettings,
    queue_order: QueueOrder = "cpsched",
) -> Dispatcher:
    """``dispatcher`` keeping the start guarantees of ``state`` (:mod:`cpsched.core.wait_bound`)
    as ``bound`` says; unchanged when it promises nothing. A bound owed from today's
    schedule runs today's scheduler beside (:func:`make_today`)."""
    if not bound.bounds:
        return dispatcher
    placer = make_placer(allocator, state, split_wait)
    today = None if bound.today_after is None else make_today(queue_order, split_wait)
    return WaitBound(dispatcher, placer, state, bound, today)


def make_today(queue_order: QueueOrder = "cpsched", split_wait: int = SPLIT_WAIT_S) -> Dispatcher:
    """What a site runs today, as the ``today`` policy replays it: EASY on best-fit,
    backfilling in queue order, planning with the jobs' limits, with a state of its own."""
    dispatcher, allocator = FALLBACK
    return make_dispatcher(
        dispatcher,
        allocator,
        plan=False,
        state=DispatcherState(),
        queue_order=queue_order,
        split_wait=split_wait,
    )


def corrected(dispatcher: Dispatcher, correction: CorrectionPolicy | None) -> Dispatcher:
    """``dispatcher`` adding walltime-extension directives to its decisions, if any."""
    if correction is not None and correction.kind != "off":
        return CorrectingDispatcher(dispatcher, correction)
    return dispatcher


def make_fallback(
    *,
    state: DispatcherState,
    plan: bool = True,
    backfill_order: BackfillOrder = "queue",
    queue_order: QueueOrder = "cpsched",
    depth: int | None = FALLBACK_DEPTH,
    split_wait: int = SPLIT_WAIT_S,
) -> Dispatcher:
    """The heuristic that answers when a dispatcher cannot in time (:data:`FALLBACK`),
    with the dispatcher's settings and its ``state`` (the jobs waiting for a steady
    split): one object, handed to a CP dispatcher (which answers with it when its search
    has none, seeds its hint and fills with it) and to the service (which answers with
    it when the dispatcher misses the deadline). ``plan`` as the dispatcher's (its
    planned starts are the answer's when it answers); no corrections: the caller adds
    them (:func:`corrected`)."""
    dispatcher, allocator = FALLBACK
    return make_dispatcher(
        dispatcher,
        allocator,
        plan=plan,
        state=state,
        backfill_order=backfill_order,
        queue_order=queue_order,
        queue_depth=depth,
        split_wait=split_wait,
    )
