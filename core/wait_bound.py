"""A bound on every job's wait: a start guarantee for each job that has waited long, kept.

The planning dispatchers order the queue by predicted run times and slowdown, which is what
makes their mean so much better than EASY's; it is also what lets a long or wide job wait
behind a stream of short ones far longer than EASY would keep it. :class:`WaitBound`
wraps any dispatcher and bounds that wait the way conservative backfilling bounds every
job's, but only for the jobs that need it:

* once a job has waited ``after`` seconds it gets a **guarantee**: the earliest time it
  fits around the running jobs and the guarantees given before it, every job counted at
  its time limit (never a prediction), so that a guarantee holds whatever the jobs' real
  run times are; at most ``depth`` jobs hold one at once, the longest-waiting first (each
  guarantee at limits holds back backfilling: several at once can choke it, as measured
  in docs/wait-bound.md);
* the schedule proving the guarantees, the **witness** (each guaranteed job's start and
  nodes), is kept from call to call. It stays valid while jobs end by their limits: a
  call keeps each witness slot where it was, then moves each guaranteed job earlier where
  the jobs that ended early made room, one job at a time with the others fixed, so that
  no job ever moves later (re-planning them all from scratch would not be monotone: with
  jobs ending early, greedy earliest-fit can place the same jobs later, docs/wait-bound.md);
  the guarantee follows its job earlier and never moves later;
* a guaranteed job whose witness start is now starts now, on its witness nodes; the
  wrapped dispatcher decides on the other jobs, and each of its starts is kept when it
  leaves every witness slot intact, the job counted at its limit; what the starts it
  leaves out would have used is then offered to the jobs not started, shortest predicted
  first, on the same condition.

* with ``overdue_quantile`` q, a job that has waited longer than the q quantile of the
  waits of the latest jobs started (at least :data:`OVERDUE_FLOOR`) is **overdue**: before
  the wrapped dispatcher decides, the overdue jobs without a guarantee start, oldest first,
  wherever they fit now at their limits with every witness slot intact. This is what EASY
  does for its oldest jobs by backfilling in queue order, and what a dispatcher ordering
  by predicted run times does not: a narrow job predicted long otherwise waits behind
  every shorter one, and behind the guaranteed jobs' line (docs/wait-bound.md measured
  the 99th percentile of the wait with and without it).
* with ``today_after`` W, today's scheduler runs beside (:mod:`cpsched.core.today_schedule`,
  EASY on the users' requests over the same arrivals and real run times): a job that has
  waited W gets a guarantee, whatever the depth, once today's would have reserved room
  for it, and starts first where it fits once today's would have started it. The target
  is job by job: no job waiting much longer than today would have kept it.

So a guarantee breaks only when a running job's limit is extended or the state is lost
(a restart): the job then gets the earliest time it can still be given, and
``DispatcherState.guarantees_broken`` counts it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import takewhile

from cpsched.core.allocators import Allocator
from cpsched.core.capacity import FreeCapacity, after_starts
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.durations import Durations
from cpsched.core.problem import Allocation, Decision, Job, Node, Snapshot, Start
from cpsched.core.profile import Profile, make_profile
from cpsched.core.reservation import Release
from cpsched.core.site_dispatch import eligible_snapshot
from cpsched.core.state import (
    Deadline,
    DispatcherState,
    Earlier,
    Guarantee,
    RecentWaits,
    passed,
)
from cpsched.core.today_schedule import TodaySchedule

OVERDUE_FLOOR = 3600
"""No job is overdue before it has waited this long, however short the recent waits."""
NEVER = 1 << 62
AFTER_KEEP = 1.5
"""Times the recent longest work after the wrapped dispatcher kept back from its deadline
(a loaded machine's wall times vary)."""
AFTER_DECAY = 0.9
"""Per call, the share of that longest time kept without a new maximum."""


@dataclass(frozen=True, slots=True)
class BoundSettings:
    """What a :class:`WaitBound` promises, and to whom (None: that part is off)."""

    after: int | None = None
    """A guarantee for each job that has waited this long (the policy's ``wait_bound``)..."""
    depth: int | None = None
    """...at most this many held at once, the longest-waiting first."""
    overdue_quantile: float | None = None
    """Jobs that waited longer than this quantile of recent waits start first."""
    today_after: int | None = None
    """For each job that has waited this long (``wait_bound_today``): a guarantee, whatever
    the depth, once today's scheduler, run beside, would have reserved room for it; a
    start first wherever it fits once today's would have started it."""

    def __post_init__(self) -> None:
        for name in ("after", "depth", "today_after"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"a wait bound's {name} is >= 0 seconds, got {value}")
        q = self.overdue_quantile
        if q is not None and not 0 < q < 1:
            raise ValueError(f"an overdue quantile is in (0, 1), got {q}")

    @property
    def bounds(self) -> bool:
        """Whether any job is ever promised a start."""
        return self.after is not None or self.today_after is not None


Guarantees = dict[str, Guarantee]
Slots = dict[str, Allocation]
"""Each guaranteed job's witness nodes this call, as indices into the snapshot's nodes."""


def named(allocation: Allocation, nodes: tuple[Node, ...]) -> tuple[tuple[str, int], ...]:
    """A witness allocation as kept between calls: by node name."""
    return tuple((nodes[node].name, units) for node, units in allocation)


def slots_of(guarantees: Guarantees, nodes: tuple[Node, ...]) -> dict[str, Allocation | None]:
    """Each guarantee's witness nodes in this snapshot's indices; None where a node of it
    has left the cluster (the slot is then placed again)."""
    index = {node.name: i for i, node in enumerate(nodes)}
    return {
        job_id: tuple((index[name], units) for name, units in g.placement)
        if all(name in index for name, _ in g.placement)
        else None
        for job_id, g in guarantees.items()
    }


def limit_releases(snapshot: Snapshot) -> list[Release]:
    """Each running job's end by its limit (a job past it ends in a second: it is being
    killed), what a guarantee must hold against."""
    soonest = snapshot.time + 1
    return [
        (max(soonest, rj.start + rj.time_limit), rj.allocation, rj.job) for rj in snapshot.running
    ]


class WaitBound:
    """``inner`` deciding around start guarantees for the jobs that waited ``after`` s,
    the overdue jobs (``overdue_quantile``; None: none) started first where they fit."""

    def __init__(
        self,
        inner: Dispatcher,
        allocator: Allocator,
        state: DispatcherState,
        bound: BoundSettings,
        today: Dispatcher | None = None,
    ) -> None:
        if (today is None) != (bound.today_after is None):
            raise ValueError("a bound owed from today's schedule needs today's scheduler")
        self.inner = inner
        self.allocator = allocator
        self.after = bound.after if bound.after is not None else NEVER
        self.state = state
        self.depth = bound.depth if bound.depth is not None else NEVER
        self.overdue_quantile = bound.overdue_quantile
        self.today_after = bound.today_after
        if bound.overdue_quantile is not None and state.recent_waits is None:
            state.recent_waits = RecentWaits()  # the cluster runtime records into it
        if today is not None and state.today_schedule is None:
            state.today_schedule = TodaySchedule(today)  # the cluster runtime records ends into it
        self.name = inner.name

    def decide(self, snapshot: Snapshot, durations: Durations) -> Decision:
        now = snapshot.time
        observe = getattr(self.allocator, "observe", None)
        if observe is not None:
            observe(snapshot, durations)
        eligible = {job.id: job for job in eligible_snapshot(snapshot).queued}
        oldest = next(iter(eligible.values()), None)
        overdue_after = self._overdue_after()
        trigger = self.after if overdue_after is None else min(self.after, overdue_after)
        schedule = self._today_schedule()
        if schedule is not None:
            schedule.advance(snapshot)
            trigger = min(trigger, self.today_after or 0)
        if not self.state.guarantees and (oldest is None or now - oldest.submit < trigger):
            # Nothing to keep, nor to promise, nor overdue.
            return self.inner.decide(snapshot, durations)
        # A copy, swapped in at the end: a call the service gave up on (and answered with
        # the fallback, which keeps the same guarantees) may still be running beside it.
        guarantees = {
            job_id: replace(g) for job_id, g in self.state.guarantees.items() if job_id in eligible
        }  # the others started, went, or are held back by the site
        profile = make_profile(now, FreeCapacity.of(snapshot), limit_releases(snapshot))
        broken_before = self.state.guarantees_broken
        slots, notes = self._witness(profile, guarantees, eligible, snapshot)
        self._compress(profile, guarantees, slots, eligible)
        self._promise(profile, guarantees, slots, eligible, now, schedule)
        for job_id, g in guarantees.items():
            g.placement = named(slots[job_id], snapshot.nodes)
        kept = [Start(job_id, slots[job_id]) for job_id, g in guarantees.items() if g.start == now]
        if overdue_after is not None:
            overdue = self._first(profile, guarantees, _submitted_by(eligible, now - overdue_after))
            if overdue:
                kept += overdue
                notes.append(
                    f"{len(overdue)} overdue job(s) started first (waited over "
                    f"{overdue_after} s, longer than {self.overdue_quantile:.0%} of recent jobs)"
                )
        if schedule is not None:
            late = self._first(profile, guarantees, self._late(schedule, eligible, now, kept))
            if late:
                kept += late
                notes.append(
                    f"{len(late)} job(s) started first: today's scheduler would have started "
                    "them by now"
                )
        rest = after_starts(snapshot, kept)
        taken = guarantees.keys() | {start.job_id for start in kept}
        rest = replace(rest, queued=tuple(j for j in rest.queued if j.id not in taken))
        deadline = self.state.deadline
        decision = self._decide_inner(rest, durations, deadline)
        returned = None if deadline is None else deadline.left()
        later = {
            node for job_id, g in guarantees.items() if g.start > now for node, _ in slots[job_id]
        }
        starts, dropped, untaken = self._admit(profile, decision.starts, eligible, now, later)
        self.state.guarantees = guarantees
        if dropped:  # what the dropped starts would have used, for the jobs that fit there
            for job, allocation in untaken:
                profile.take(0, job.time_limit, allocation, job)
            started = {start.job_id for start in starts} | guarantees.keys()
            starts += self._fill(profile, rest, started, eligible, durations, deadline)
            notes.append(f"{dropped} start(s) left out: they would break a start guarantee")
        if deadline is not None and returned is not None:
            self._learn_after(returned - deadline.left())
        planned = dict(decision.planned or {})
        planned.update((job_id, g.start) for job_id, g in guarantees.items() if g.start > now)
        return replace(
            decision,
            starts=(*kept, *starts),
            planned=planned,
            diagnostics=replace(
                decision.diagnostics,
                guaranteed=len(guarantees) - len(kept),
                guarantees_broken=self.state.guarantees_broken - broken_before,
                notes=(*decision.diagnostics.notes, *notes),
            ),
        )

    def _decide_inner(
        self, snapshot: Snapshot, durations: Durations, deadline: Deadline | None
    ) -> Decision:
        """The wrapped dispatcher's decision, by a deadline that keeps back the time this
        wrapper's work after it took recently (on 5,000 nodes, checking 400 starts against
        the witness took 20-30 ms: past the deadline, had the wrapped one used it all)."""
        if deadline is None:
            return self.inner.decide(snapshot, durations)
        # At most half of what is left: one slow call must not starve the next ones.
        keep = min(AFTER_KEEP * self.state.timings.wait_bound_after_s, deadline.left() / 2)
        earlier = Earlier(deadline, max(0.0, keep))
        self.state.deadline = earlier
        try:
            return self.inner.decide(snapshot, durations)
        finally:
            # A call the service gave up on may still run beside the next one, whose
            # deadline is then the state's: leave that one in place.
            if self.state.deadline is earlier:
                self.state.deadline = deadline

    def _learn_after(self, seconds: float) -> None:
        """Keep the longest recent time of the work after the wrapped dispatcher."""
        timings = self.state.timings
        timings.wait_bound_after_s = max(seconds, AFTER_DECAY * timings.wait_bound_after_s)

    def _witness(
        self, profile: Profile, guarantees: Guarantees, eligible: dict[str, Job], snapshot: Snapshot
    ) -> tuple[Slots, list[str]]:
        """The kept witness in ``profile``: each slot where it was while it still fits;
        the others (a limit extended, a node gone, a restart) placed again, as early as
        they can be."""
        now = snapshot.time
        notes: list[str] = []
        slots: Slots = {}
        moved: list[str] = []
        found_slots = slots_of(guarantees, snapshot.nodes)
        for job_id in sorted(guarantees, key=lambda job_id: guarantees[job_id].start):
            job, g, allocation = eligible[job_id], guarantees[job_id], found_slots[job_id]
            start = max(g.start, now)
            if allocation is not None and profile.fits_at(start, job.time_limit, allocation, job):
                g.start, slots[job_id] = start, allocation
                profile.take(profile.step_at(start), job.time_limit, allocation, job)
            else:
                moved.append(job_id)
        for job_id in moved:
            job, g = eligible[job_id], guarantees[job_id]
            found = profile.earliest(job, job.time_limit, self.allocator)
            if found is None:
                del guarantees[job_id]
                notes.append(f"job {job_id}: its guarantee cannot be kept on these nodes")
                continue
            step, slots[job_id] = found
            g.start = profile.times[step]
            if g.start > g.start_by:
                self.state.guarantees_broken += 1
                notes.append(f"job {job_id}: guarantee broken, {g.start - g.start_by} s later")
                g.start_by = g.start
            profile.take(step, job.time_limit, slots[job_id], job)
        return slots, notes

    def _compress(
        self, profile: Profile, guarantees: Guarantees, slots: Slots, eligible: dict[str, Job]
    ) -> None:
        """Each guaranteed job, in witness order, moved as early as the others allow."""
        for job_id in sorted(guarantees, key=lambda job_id: guarantees[job_id].start):
            job, g = eligible[job_id], guarantees[job_id]
            if g.start == profile.times[0]:
                continue
            profile.give(g.start, job.time_limit, slots[job_id], job)
            found = profile.earliest(job, job.time_limit, self.allocator)
            if found is not None and profile.times[found[0]] < g.start:
                g.start, slots[job_id] = profile.times[found[0]], found[1]
                g.start_by = min(g.start_by, g.start)
            profile.take(profile.step_at(g.start), job.time_limit, slots[job_id], job)

    def _promise(
        self,
        profile: Profile,
        guarantees: Guarantees,
        slots: Slots,
        eligible: dict[str, Job],
        now: int,
        schedule: TodaySchedule | None,
    ) -> None:
        """Guarantees for the jobs today's scheduler has reserved room for once they have
        waited ``today_after`` s, whatever the depth, then for the jobs that have waited
        ``after`` s, oldest first, up to the depth."""
        if schedule is not None and self.today_after is not None:
            for job_id, job in eligible.items():  # in submission order
                if now - job.submit < self.today_after:
                    break
                if job_id not in guarantees and job_id in schedule.reserved_at:
                    self._guarantee(profile, guarantees, slots, job, now)
        for job_id, job in eligible.items():
            if now - job.submit < self.after or len(guarantees) >= self.depth:
                break
            if job_id not in guarantees:
                self._guarantee(profile, guarantees, slots, job, now)

    def _guarantee(
        self, profile: Profile, guarantees: Guarantees, slots: Slots, job: Job, now: int
    ) -> None:
        """``job``'s guarantee: the earliest step it fits at its limit, taken in ``profile``."""
        found = profile.earliest(job, job.time_limit, self.allocator)
        if found is None:
            return  # it fits on no step, not even an idle machine: nothing to promise
        step, slots[job.id] = found
        start = profile.times[step]
        guarantees[job.id] = Guarantee(start, start, (), now)
        profile.take(step, job.time_limit, slots[job.id], job)

    def _today_schedule(self) -> TodaySchedule | None:
        """Today's scheduler run beside, when this bound asks for it."""
        return self.state.today_schedule if self.today_after is not None else None

    def _overdue_after(self) -> int | None:
        """How long a job waits before it is overdue; None: no job is (no quantile asked
        for, or too few waits known yet)."""
        if self.overdue_quantile is None:
            return None
        waits = self.state.recent_waits
        recent = None if waits is None else waits.quantile(self.overdue_quantile)
        return None if recent is None else max(OVERDUE_FLOOR, recent)

    def _late(
        self, schedule: TodaySchedule, eligible: dict[str, Job], now: int, kept: list[Start]
    ) -> list[Job]:
        """The jobs today's scheduler would have started by now that have waited
        ``today_after`` s and are not starting yet, oldest first."""
        assert self.today_after is not None
        starting = {start.job_id for start in kept}
        late = [
            eligible[job_id]
            for job_id in list(schedule.started_at)  # copied at once: a late call may advance it
            if job_id in eligible
            and job_id not in starting
            and now - eligible[job_id].submit >= self.today_after
        ]
        return sorted(late, key=lambda job: job.submit)

    def _first(self, profile: Profile, guarantees: Guarantees, jobs: Iterable[Job]) -> list[Start]:
        """Those of ``jobs`` without a guarantee that fit now at their limits with every
        witness slot intact, in the order given, taken in ``profile`` (those looked at
        before the caller's deadline)."""
        started: list[Start] = []
        deadline = self.state.deadline
        for job in jobs:
            if passed(deadline):
                break
            if job.id in guarantees or not profile.fits_now_total(job.request):
                continue
            found = profile.earliest(job, job.time_limit, self.allocator, now_only=True)
            if found is not None:
                profile.take(0, job.time_limit, found[1], job)
                started.append(Start(job.id, found[1]))
        return started

    def _admit(
        self,
        profile: Profile,
        starts: tuple[Start, ...],
        eligible: dict[str, Job],
        now: int,
        later: set[int],
    ) -> tuple[list[Start], int, list[tuple[Job, Allocation]]]:
        """The inner dispatcher's starts that leave every witness slot intact, how many
        were left out, and those of the kept ones not yet taken in ``profile``.

        A start on none of the ``later`` nodes (those of the witness slots after now) is
        kept unchecked: until a slot is taken from it, what a node has free only grows
        (releases), and the inner starts fit together on what is free now. It is taken in
        ``profile`` only if something is placed after (:meth:`_fill`): on an idle 50,000-
        node machine, checking and taking 2,000 starts one by one took 0.1 s."""
        admitted: list[Start] = []
        untaken: list[tuple[Job, Allocation]] = []
        for start in starts:
            job = eligible.get(start.job_id)
            if job is None:
                continue  # a site-held job: the site's rules wrapper dropped it already
            if later.isdisjoint([node for node, _ in start.allocation]):
                admitted.append(start)
                untaken.append((job, start.allocation))
            elif profile.fits_at(now, job.time_limit, start.allocation, job):
                profile.take(0, job.time_limit, start.allocation, job)
                admitted.append(start)
        return admitted, len(starts) - len(admitted), untaken

    def _fill(
        self,
        profile: Profile,
        rest: Snapshot,
        started: set[str],
        eligible: dict[str, Job],
        durations: Durations,
        deadline: Deadline | None,
    ) -> list[Start]:
        """What the admitted starts leave idle, offered to the jobs not started, shortest
        predicted first, each where it leaves every witness slot intact, until the
        caller's deadline."""
        waiting = [job for job in rest.queued if job.id not in started and job.id in eligible]
        waiting.sort(key=lambda job: durations[job.id])
        added: list[Start] = []
        for job in waiting:
            if passed(deadline):
                break
            if not profile.fits_now_total(job.request):
                continue
            found = profile.earliest(job, job.time_limit, self.allocator, now_only=True)
            if found is not None:
                profile.take(0, job.time_limit, found[1], job)
                added.append(Start(job.id, found[1]))
        return added

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)  # transparent, as the other wrappers


def _submitted_by(eligible: dict[str, Job], by: int) -> Iterator[Job]:
    """The jobs of ``eligible`` (in submission order) submitted by ``by``."""
    return takewhile(lambda job: job.submit <= by, eligible.values())
