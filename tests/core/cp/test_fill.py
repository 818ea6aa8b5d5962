"""Filling what a pooled plan leaves idle (``core/cp/fill.py``): capacity and the guarded
job's reservation are never given away."""

import re
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core.capacity import FreeCapacity, placeable_units
from cpsched.core.cp import ModelConfig
from cpsched.core.cp.fill import after_starts, holds
from cpsched.core.durations import expected_end
from cpsched.core.problem import Start
from cpsched.core.site import Constraints
from tests.core.cp._util import NOW, decide, hcp3
from tests.factories import job, limits_as_durations, nodes, running, snapshot

ALWAYS_GUARD = ModelConfig(reserve_above=1.0)
"""Every call protects its highest-priority job that fits an idle machine."""


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


@st.composite
def fragmented(draw):
    """Four-core nodes partly used by one-core running jobs, and a queue of jobs whose
    units take 2 or 3 cores beside one-core jobs: the pool often holds a unit the nodes
    cannot, which is when HCP3 postpones and fills."""
    count = draw(st.integers(2, 4))
    run = []
    for node in range(count):
        for k in range(draw(st.integers(0, 3))):
            rj = job(f"r{node}.{k}", limit=draw(st.integers(1, 30)))
            run.append(running(rj, draw(st.integers(0, NOW)), [(node, 1)]))
    queue = [
        job(
            f"q{i}",
            submit=draw(st.integers(-40, NOW)),
            units=draw(st.integers(1, 3)),
            unit=draw(st.sampled_from((1, 2, 3))),
            limit=draw(st.integers(1, 40)),
        )
        for i in range(draw(st.integers(2, 6)))
    ]
    return snapshot(NOW, nodes(*[4] * count), run, queue)


@settings(max_examples=300, deadline=None)
@given(fragmented())
def test_hcp3_with_the_fill_keeps_capacity_and_the_guarded_reservation(snap):
    """``decide`` checks capacity independently; here also: a guarded job waiting for its
    reservation still fits at its time beside every job started now that outlasts it."""
    durations = limits_as_durations(snap)
    decision = decide(snap, durations, dispatcher=hcp3(ALWAYS_GUARD))
    protected = [
        m
        for note in decision.diagnostics.notes
        if (m := re.match(r"job (\S+) is protected: start by (\d+)$", note))
    ]
    if not protected:
        return
    guarded, start_by = protected[0].group(1), int(protected[0].group(2))
    started = {s.job_id: s.allocation for s in decision.starts}
    if guarded in started or start_by == snap.time:
        return
    jobs = {j.id: j for j in snap.queued}
    later = snapshot(start_by, snap.nodes, resources=snap.resource_names)
    free = FreeCapacity.of(later)
    for rj in snap.running:
        if expected_end(rj, durations[rj.job.id], snap.time) > start_by:
            free.take(rj.allocation, rj.job)
    for job_id, allocation in started.items():
        if snap.time + durations[job_id] > start_by:
            free.take(allocation, jobs[job_id])
    assert placeable_units(free, jobs[guarded]) >= jobs[guarded].units
