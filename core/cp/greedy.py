"""Greedy plans of the pooled model: the solution hints of HCP3.

A serial schedule generation on the pooled resources: jobs are taken one by one and
each starts at the earliest time the pool holds its demand for its whole length, given
the running jobs and the jobs placed before it. Every plan built this way is a feasible
solution of the pooled model (same capacities, same lengths, same time units), so
CP-SAT's first solution is at least this good.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence

from cpsched.core.cp.prepare import ModelJob, Prepared


class StepProfile:
    """Usage of a pool of ``capacity`` over time as a step function: ``used[k]`` holds on
    ``[cuts[k], cuts[k+1])``; the last step holds forever (it is empty once everything
    has ended)."""

    __slots__ = ("capacity", "cuts", "used")

    def __init__(self, capacity: Sequence[int]) -> None:
        self.capacity = capacity
        self.cuts: list[int] = [0]
        self.used: list[list[int]] = [[0] * len(capacity)]

    def _split(self, at: int) -> int:
        """Index of the step starting at ``at``, creating the breakpoint if needed."""
        k = bisect_right(self.cuts, at) - 1
        if self.cuts[k] == at:
            return k
        self.cuts.insert(k + 1, at)
        self.used.insert(k + 1, list(self.used[k]))
        return k + 1

    def add(self, start: int, length: int, demand: Sequence[int]) -> None:
        first, last = self._split(start), self._split(start + length)
        for k in range(first, last):
            row = self.used[k]
            for r, amount in enumerate(demand):
                row[r] += amount

    def fits(self, start: int, length: int, demand: Sequence[int]) -> int | None:
        """None if ``demand`` fits on ``[start, start + length)``, else the end of the first
        step where it does not (no start before that can work)."""
        cuts, capacity = self.cuts, self.capacity
        k = bisect_right(cuts, start) - 1
        end = start + length
        while k < len(cuts) and cuts[k] < end:
            row = self.used[k]
            for r, amount in enumerate(demand):
                if row[r] + amount > capacity[r]:
                    # The last step is empty, so a conflict is never on it.
                    return cuts[k + 1]
            k += 1
        return None

    def earliest(self, job: ModelJob, not_before: int = 0) -> int:
        start = not_before
        while (blocked_until := self.fits(start, job.length, job.demand)) is not None:
            start = blocked_until
        return start


class PooledProfile(StepProfile):
    """The pooled model's resources: the machine totals, the running jobs held on
    ``[0, length)``.

    Built in one pass from the longest release down (the usage of each step is what the
    loads ending after it hold), not by adding the loads one by one: that walked every
    step for every load, 2.9 s for the 4,000 distinct releases of a 5,000-node machine."""

    __slots__ = ()

    def __init__(self, prepared: Prepared) -> None:
        super().__init__(prepared.capacity)
        width = len(prepared.capacity)
        held: dict[int, list[int]] = {}
        for load in prepared.running:
            if load.length > 0:
                row = held.setdefault(load.length, [0] * width)
                for r, amount in enumerate(load.demand):
                    row[r] += amount
        ends = sorted(held)
        # Step k is [cuts[k], cuts[k+1]) with cuts = [0, *ends]: the loads ending after
        # its start hold it, those of ends[k:]; nothing is held after the last end.
        used: list[list[int]] = [[0] * width]
        for end in reversed(ends):
            used.append([a + b for a, b in zip(used[-1], held[end], strict=True)])
        self.cuts = [0, *ends]
        self.used = used[::-1]


def _no_tick() -> None:
    return None


def serial_plan(
    prepared: Prepared,
    order: Sequence[ModelJob] | None = None,
    now_first: Iterable[str] = (),
    tick: Callable[[], None] = _no_tick,
) -> dict[str, int]:
    """Start (units from ``t``) of every window job.

    The guarded job (``latest`` set) goes first, so its bound holds; then the jobs named
    in ``now_first`` (e.g. those a heuristic starts now) at 0 when the pool still holds
    them there; then the rest in ``order`` (default: priority order, ``Prepared.jobs``).
    ``tick`` is called after each job placed: the caller's deadline check (a plan over
    thousands of running jobs' releases took 1.7 s at 5,000 nodes).
    """
    profile = PooledProfile(prepared)
    plan: dict[str, int] = {}

    def place(job: ModelJob, start: int) -> None:
        plan[job.job.id] = start
        profile.add(start, job.length, job.demand)
        tick()

    for job in prepared.jobs:
        if job.latest is not None:
            place(job, profile.earliest(job))
    by_id = {j.job.id: j for j in prepared.jobs}
    for job_id in now_first:
        first = by_id.get(job_id)
        if first is None or job_id in plan:
            continue
        if profile.fits(0, first.length, first.demand) is None:
            place(first, 0)
    for job in prepared.jobs if order is None else order:
        if job.job.id not in plan:
            place(job, profile.earliest(job))
    return plan


def ratio_order(prepared: Prepared) -> list[ModelJob]:
    """Smith's rule for a shared resource: the most objective weight per unit of
    resource-time first, a job's size being its demand as a share of each pool.

    Priority order is the papers' first descent, but on Eurora-like queues it leaves
    long, wide jobs in front of short ones; this order gave plans with half to a third
    of its objective in measurements (bench/hcp3_latency.py instances), and CP-SAT
    with one worker mostly stays near the plan it is given.
    """

    def density(job: ModelJob) -> float:
        share = sum(d / c for d, c in zip(job.demand, prepared.capacity, strict=True))
        return job.weight / (job.length * share)

    return sorted(prepared.jobs, key=density, reverse=True)  # stable: ties keep priority


def previous_order(prepared: Prepared, previous: Mapping[str, int]) -> list[ModelJob] | None:
    """Reuse between calls: the window in the order the previous call planned its jobs
    (by planned start, ties and new jobs in priority order, new jobs last), or None when
    the previous call planned none of them or the order is the priority order.

    Most of the queue is the same from one call to the next, and the previous call's
    plan, searched for longer than any greedy order, is a guess at a good order for it.
    ``previous`` maps job ids to planned start times (seconds, absolute), as in
    ``Decision.planned``."""
    if not any(mj.job.id in previous for mj in prepared.jobs):
        return None
    never = float("inf")
    order = sorted(prepared.jobs, key=lambda mj: previous.get(mj.job.id, never))  # stable
    return None if order == list(prepared.jobs) else order


def candidate_plans(
    prepared: Prepared,
    now_first: Sequence[str],
    previous: Sequence[ModelJob] | None = None,
    tick: Callable[[], None] = _no_tick,
) -> dict[str, dict[str, int]]:
    """The greedy plans offered as hints, by name: priority order, Smith's ratio order,
    the heuristic's starts first (then priority order), and with ``previous`` (an order
    from :func:`previous_order`) the previous call's order, left out when it is the ratio
    order (as in ``pcp3_greedy.candidate_node_plans``). ``tick``: see :func:`serial_plan`."""
    by_ratio = ratio_order(prepared)
    plans = {
        "priority greedy": serial_plan(prepared, tick=tick),
        "ratio greedy": serial_plan(prepared, by_ratio, tick=tick),
        "heuristic-seeded": serial_plan(prepared, now_first=now_first, tick=tick),
    }
    if previous is not None and previous != by_ratio:
        plans["previous plan"] = serial_plan(prepared, previous, tick=tick)
    return plans


def plan_objective(prepared: Prepared, plan: dict[str, int]) -> int:
    """The pooled model's objective ``Σ w_i · (s_i − t)`` (in units) of ``plan``."""
    return sum(j.weight * plan[j.job.id] for j in prepared.jobs)
