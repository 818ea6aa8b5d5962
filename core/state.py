"""What a dispatcher learns between calls, in one object its caller owns.

Every dispatcher's ``decide`` is a function of the snapshot, the durations and this
state: nothing else survives a call. The caller (the service's cluster runtime, a replay)
makes one :class:`DispatcherState` per cluster, hands it to ``make_dispatcher`` and keeps
it; a fresh state is a dispatcher that remembers nothing, as after a restart. The state
only ever steers how the next call spends its time, breaks ties or bounds a wait, never
whether a decision is valid (the validator checks every decision on its own).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cpsched.core.allocators_hetero import PriorityCounters

if TYPE_CHECKING:
    from cpsched.core.today_schedule import TodaySchedule


@dataclass(slots=True)
class PhaseTimings:
    """How long a CP call's work after the search took recently, to keep time for it.

    Each is the longest recently seen, decaying by a constant factor per call: one slow
    call does not keep later calls from searching for ever.
    """

    after_solve_s: float = 0.0
    """Extract and validate together, beyond the search's fixed margin."""
    extract_fixed_s: float = 0.0
    """The extract phase's fixed part (seen on calls that start nothing)."""
    extract_per_start_s: float = 0.0
    """The extract phase's part per job started now (placing it on the nodes)."""
    fallback_s: float = 0.0
    """The fallback heuristic's time on the latest call (not decaying: read by the
    caller, which keeps that much aside in case it must answer with the fallback)."""
    wait_bound_after_s: float = 0.0
    """The wait bound's work after its wrapped dispatcher returns (checking its starts
    against the witness, filling what they leave), kept from that dispatcher's time."""


class Deadline(Protocol):
    """The caller's deadline for one call, read through the caller's own clock: the
    dispatch core reads none."""

    def left(self) -> float:
        """Seconds before it (negative once it has passed)."""
        ...


def passed(deadline: Deadline | None) -> bool:
    """Whether ``deadline`` has passed (never, without one)."""
    return deadline is not None and deadline.left() <= 0


@dataclass(frozen=True, slots=True)
class Earlier:
    """``deadline`` less ``by`` seconds: what a wrapper gives the dispatcher it wraps,
    keeping time for its own work after that dispatcher returns."""

    deadline: Deadline
    by: float

    def left(self) -> float:
        return self.deadline.left() - self.by


RECENT_WAITS = 2000
"""Starts whose waits :class:`RecentWaits` keeps: about a week of a busy cluster's."""
REFRESH_EVERY = 50
"""Starts between two computations of a quantile (a sort of the kept waits)."""
FEWEST_WAITS = 100
"""Below this many waits (a new cluster, a restart) no quantile is given."""


@dataclass(slots=True)
class RecentWaits:
    """How long the latest :data:`RECENT_WAITS` jobs started waited, and a quantile of
    those waits kept for :data:`REFRESH_EVERY` starts (a replay asks at every call)."""

    waits: deque[int] = field(default_factory=lambda: deque(maxlen=RECENT_WAITS))
    _quantile: tuple[float, int] | None = None
    _since: int = 0

    def add(self, wait: int) -> None:
        self.waits.append(wait)
        self._since += 1

    def quantile(self, q: float) -> int | None:
        """The ``q`` quantile of the kept waits (the nearest rank below), None while
        fewer than :data:`FEWEST_WAITS` are known."""
        if len(self.waits) < FEWEST_WAITS:
            return None
        cached = self._quantile
        if cached is None or cached[0] != q or self._since >= REFRESH_EVERY:
            ordered = sorted(self.waits)
            cached = self._quantile = (q, ordered[int(q * (len(ordered) - 1))])
            self._since = 0
        return cached[1]


@dataclass(slots=True)
class Guarantee:
    """A queued job's start guarantee (:mod:`cpsched.core.wait_bound`) and its witness."""

    start_by: int
    """The promise: the job starts no later than this (it only ever moves earlier)."""
    start: int
    """Where the witness, a schedule keeping every promise with every job running to its
    limit, starts the job (never after ``start_by``)..."""
    placement: tuple[tuple[str, int], ...]
    """...and on which nodes: ``(node name, units)`` pairs. By name, not by index into
    the snapshot's nodes: a node that joins or leaves the cluster moves the others'
    indices, and the witness must follow each node, not a position."""
    given: int
    """When the promise was first made (the snapshot time)."""


@dataclass(slots=True)
class DispatcherState:
    """Everything a dispatcher carries from one call to the next."""

    timings: PhaseTimings = field(default_factory=PhaseTimings)
    """CP dispatchers: the time to keep back from the search."""
    previous_planned: dict[str, int] = field(default_factory=dict)
    """CP dispatchers with ``reuse``: the last decision's planned starts, the next call's
    "previous plan" hint. A hint only, so a stale one (a dry run, a restart) is safe."""
    priority_counters: PriorityCounters = field(default_factory=PriorityCounters)
    """The priority-weighted allocator's failure counters per critical resource type."""
    split_waits: dict[str, int] = field(default_factory=dict)
    """Block jobs waiting for a placement whose split cannot drift: the snapshot time each
    started waiting (:mod:`cpsched.core.steady_blocks` bounds the wait with it)."""
    guarantees: dict[str, Guarantee] = field(default_factory=dict)
    """The wait bound's promises to queued jobs, by job id (:mod:`cpsched.core.wait_bound`):
    kept from call to call, the witness with them, so that later decisions keep them."""
    recent_waits: RecentWaits | None = None
    """The waits of the latest jobs started on the cluster, recorded where decisions are
    applied (:meth:`cpsched.runtime.cluster.Cluster.started`; not a dry run's): what the
    wait bound counts as overdue. Kept only for a bound that asks (None: not recorded, so
    a replay's loop does no work for it)."""
    today_schedule: TodaySchedule | None = None
    """Today's scheduler run beside on the same arrivals, its ends recorded where the real
    jobs end (:meth:`cpsched.runtime.cluster.Cluster.finished`): which queued jobs today
    would have served by now (:mod:`cpsched.core.today_schedule`). Kept only for a bound
    that asks (None: not run)."""
    tried: set[str] = field(default_factory=set)
    """Jobs given a trial run (:mod:`cpsched.core.trial_runs`) still queued or running:
    none is tried twice."""
    guarantees_broken: int = 0
    """Promises that could not be kept (a running job's limit was extended, or the state
    was lost): each then moved to the earliest time the job can still be given."""
    deadline: Deadline | None = None
    """The caller's deadline for the next call, set before each call; None: every call
    runs to its end (replays: the same decision every time). A CP dispatcher searches
    for the time it leaves (the service has spent part of it reading the request and
    keeps some for answering); a heuristic (EASY, FCFS..., the fallback) looks at it
    between jobs and, once it has passed, returns the starts made so far, marked partial
    (``Diagnostics.partial``); a wrapper that works after its dispatcher returns gives it
    an :class:`Earlier` one."""
