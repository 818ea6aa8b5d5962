"""Filling what a pooled plan leaves idle (``core/cp/fill.py``): capacity and the guarded
job's reservation are never given away."""

import re
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core import check_decision
from cpsched.core.allocators import BestFit
from cpsched.core.capacity import FreeCapacity, after_starts, distinct_rows, placeable_units
from cpsched.core.cp import HCP3Dispatcher, ModelConfig
from cpsched.core.cp.fill import fill, holds
from cpsched.core.cp.guard import Guard
from cpsched.core.durations import expected_end
from cpsched.core.problem import Decision, Snapshot, Start
from cpsched.core.registry import make_fallback
from cpsched.core.reservation import reserve
from cpsched.core.site import Constraints
from cpsched.core.state import DispatcherState
from tests.core.cp._util import DETERMINISTIC, NOW, decide, filled_starts, hcp3
from tests.factories import job, limits_as_durations, nodes, running, snapshot

ALWAYS_GUARD = ModelConfig(reserve_above=1.0)
"""Every call protects its highest-priority job that fits an idle machine."""
LONGEST_WAITING = ModelConfig(reserve_above=None, reserve_after=20, site_order=True)
"""The longest-waiting job is protected; the site's priority orders the window."""


def site_ordered(model: ModelConfig) -> HCP3Dispatcher:
    """HCP3 whose fallback takes the site's order, sharing its state, as a policy builds it."""
    state = DispatcherState()
    fallback = make_fallback(state=state, queue_order="site")
    return hcp3(model, DETERMINISTIC, state=state, fallback=fallback)


class Fixed:
    """A fallback that always proposes the same starts."""

    name = "fixed"

    def __init__(self, starts: list[Start]) -> None:
        self.starts = starts

    def decide(self, snapshot, durations):
        return Decision(tuple(self.starts))


def test_after_starts_runs_the_started_jobs_and_takes_them_out_of_the_queue():
    busy = job("busy", units=2, limit=50)
    snap = snapshot(7, nodes(4, 4), [running(busy, 0, [(0, 2)])], [job("a", units=3), job("b")])
    rest = after_starts(snap, [Start("a", ((1, 3),))])
    assert [j.id for j in rest.queued] == ["b"]
    assert [(rj.job.id, rj.start, rj.allocation) for rj in rest.running] == [
        ("busy", 0, ((0, 2),)),
        ("a", 7, ((1, 3),)),
    ]
    assert rest.free == ((2,), (1,))
    assert rest.free_total == (3,)
    assert snap.free == ((2,), (4,))  # the snapshot itself is unchanged


def test_holds_checks_every_node_and_a_whole_node_for_an_exclusive_job():
    snap = snapshot(0, nodes(4, 4), [running(job("r", units=3), 0, [(0, 3)])])
    free = FreeCapacity.of(snap)
    two = job("two", units=2)
    assert holds(free, ((1, 2),), two)
    assert not holds(free, ((0, 2),), two)
    assert holds(free, ((0, 1), (1, 1)), two)
    whole = replace(job("whole"), constraints=Constraints(exclusive=True))
    assert whole.exclusive
    assert holds(free, ((1, 1),), whole)
    assert not holds(free, ((0, 1),), whole)


def test_fill_charges_the_reservation_with_each_start_it_keeps():
    # g (7 cores) is reserved at 50, when a ends: one core is spare then. Two 500 s jobs
    # proposed on that core: the first takes it, the second would delay g.
    a = job("a", units=4, limit=50)
    g, z1, z2 = job("g", units=7), job("z1", limit=500), job("z2", limit=500)
    snap = snapshot(0, nodes(4, 4), [running(a, 0, [(1, 4)])], [g, z1, z2])
    reservation = reserve(g, FreeCapacity.of(snap), [(50, ((1, 4),), a)], BestFit())
    assert reservation is not None and reservation.time == 50
    spare = next(n for n in range(2) if reservation.spare().row(n) == (1,))
    proposed = [Start("z1", ((spare, 1),)), Start("z2", ((spare, 1),))]
    guard = Guard(g, 50, reservation)
    added = fill(snap, limits_as_durations(snap), [], Fixed(proposed), guard, BestFit())
    assert [s.job_id for s in added] == ["z1"]


def test_a_guarded_job_the_plan_could_not_place_is_not_pushed_back_by_the_fill():
    # y has waited longest and is protected; it fits now (start by 0), but the site's
    # order places x first, and then y does not fit. EASY in the site's order would fill
    # node 0 with the site's favourite z (100,000 s), which would hold y back until
    # about 100,000 s; y's room when x ends (at 10) is kept instead.
    b0, b1 = job("b0", limit=100_000), job("b1", units=5, limit=100_000)
    y = replace(job("y", submit=-10_000, unit=4, limit=1000), priority=1)
    x = replace(job("x", submit=-1_000, unit=2, limit=10), priority=1)
    z = replace(job("z", unit=3, limit=100_000), priority=100)
    snap = snapshot(0, nodes(6, 6), [running(b0, 0, [(0, 1)]), running(b1, 0, [(1, 5)])], [y, x, z])
    model = ModelConfig(reserve_above=None, reserve_after=5000, site_order=True)
    decision = decide(snap, dispatcher=site_ordered(model))
    assert "job y is protected: start by 0" in decision.diagnostics.notes
    assert [s.job_id for s in decision.starts] == ["x"]


@st.composite
def fragmented(draw):
    """Four-core nodes partly used by one-core running jobs, and a queue of jobs whose
    units take 2 or 3 cores beside one-core jobs, with site priorities: the pool often
    holds a unit the nodes cannot, which is when HCP3 postpones and fills."""
    count = draw(st.integers(2, 4))
    run = []
    for node in range(count):
        for k in range(draw(st.integers(0, 3))):
            rj = job(f"r{node}.{k}", limit=draw(st.integers(1, 30)))
            run.append(running(rj, draw(st.integers(0, NOW)), [(node, 1)]))
    queue = [
        replace(
            job(
                f"q{i}",
                submit=draw(st.integers(-40, NOW)),
                units=draw(st.integers(1, 3)),
                unit=draw(st.sampled_from((1, 2, 3))),
                limit=draw(st.integers(1, 40)),
            ),
            priority=draw(st.integers(0, 3)),
        )
        for i in range(draw(st.integers(2, 6)))
    ]
    return snapshot(NOW, nodes(*[4] * count), run, queue)


@settings(max_examples=300, deadline=None)
@given(fragmented(), st.sampled_from(("slowdown", "longest-waiting")))
def test_the_fill_keeps_capacity_and_never_delays_the_guarded_job(snap, trigger):
    """Capacity is checked independently (and no decision falls back, which would hide a
    bad fill). When the fill started jobs and the guarded job waits, the guarded job
    still fits, beside every started job still running then, at the earliest time it
    fits beside the plan's own starts (the fill's starts come last)."""
    durations = limits_as_durations(snap)
    dispatcher = hcp3(ALWAYS_GUARD) if trigger == "slowdown" else site_ordered(LONGEST_WAITING)
    decision = dispatcher.decide(snap, durations)
    check_decision(snap, decision)
    notes = decision.diagnostics.notes
    assert not decision.diagnostics.fallback, notes
    guarded = next((m.group(1) for n in notes if (m := PROTECTED.match(n))), None)
    filled = filled_starts(decision)
    started = list(decision.starts)
    if guarded is None or not filled or guarded in {s.job_id for s in started}:
        return
    jobs = {j.id: j for j in snap.queued}
    by_plan = earliest_fit(snap, durations, jobs, started[: -len(filled)], jobs[guarded])
    assert by_plan is not None
    assert fits_at(by_plan, snap, durations, jobs, started, jobs[guarded])


PROTECTED = re.compile(r"job (\S+) is protected: start by \d+$")


def fits_at(time, snap, durations, jobs, starts, job) -> bool:
    """Whether ``job``'s units fit at ``time`` beside what is still running then."""
    free = FreeCapacity.of(snapshot(time, snap.nodes, resources=snap.resource_names))
    for rj in snap.running:
        if expected_end(rj, durations[rj.job.id], snap.time) > time:
            free.take(rj.allocation, rj.job)
    for start in starts:
        if snap.time + durations[start.job_id] > time:
            free.take(start.allocation, jobs[start.job_id])
    return placeable_units(distinct_rows(free), job) >= job.units


def earliest_fit(snap: Snapshot, durations, jobs, starts, job) -> int | None:
    """The first time (now, or a running or started job's end) ``job`` fits."""
    ends = {expected_end(rj, durations[rj.job.id], snap.time) for rj in snap.running}
    ends |= {snap.time + durations[s.job_id] for s in starts}
    for time in sorted({snap.time, *ends}):
        if fits_at(time, snap, durations, jobs, starts, job):
            return time
    return None


def test_without_time_for_another_fallback_call_nothing_is_filled(monkeypatch):
    """The instance of ``test_what_a_postponed_job_leaves_idle_is_filled_by_easy``, with
    a clock that runs out during the extract: the plan's start stands, z is not added."""
    now = [0.0]
    dispatcher = hcp3(search=replace(DETERMINISTIC, deadline=2.0, clock=lambda: now[0]))
    extract = dispatcher._extract

    def slow_extract(*args):
        result = extract(*args)
        now[0] += 1.99  # the margin (30 ms) is left, not another fallback call
        return result

    monkeypatch.setattr(dispatcher, "_extract", slow_extract)
    busy = job("busy", units=4, limit=1000)
    queue = [job("x", unit=2, limit=10), job("y", unit=2, limit=10), job("z", limit=100)]
    snap = snapshot(0, nodes(4, 4), [running(busy, 0, [(0, 1), (1, 3)])], queue)
    decision = decide(snap, dispatcher=dispatcher)
    assert [s.job_id for s in decision.starts] == ["x"]
    assert "no time left to fill what the plan left idle" in decision.diagnostics.notes
    assert not decision.diagnostics.fallback
