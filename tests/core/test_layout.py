"""Block layout: the per-node split Slurm reproduces, applied to every dispatcher's starts."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core import Decision, Start, check_decision, make_dispatcher
from cpsched.core.allocators import BestFit
from cpsched.core.capacity import FreeCapacity, units_fitting
from cpsched.core.layout import block_layout, lay_out
from tests.factories import job, limits_as_durations, nodes, running, snapshot


def block(j):
    return replace(j, layout="block")


def test_block_layout_gives_every_node_one_then_fills_in_node_order():
    # Slurm's split on the test bed: -n 5 over node1 (3 free) and node2 (4 free) ran 3 + 2.
    assert block_layout(5, [(1, 4), (0, 3)]) == ((0, 3), (1, 2))
    # -n 10 over four nodes with 7, 1, 1, 1 free ran 7, 1, 1, 1.
    assert block_layout(10, [(0, 7), (1, 1), (2, 1), (3, 1)]) == ((0, 7), (1, 1), (2, 1), (3, 1))
    # Room to spare on the last node: it takes only what is left.
    assert block_layout(6, [(0, 4), (1, 4), (2, 4)]) == ((0, 4), (1, 1), (2, 1))


def test_block_layout_refuses_nodes_that_cannot_hold_the_job():
    with pytest.raises(ValueError):
        block_layout(9, [(0, 4), (1, 4)])
    with pytest.raises(ValueError):
        block_layout(2, [(0, 2), (1, 0)])


def test_a_block_job_is_re_split_on_the_nodes_its_allocator_chose():
    # best-fit fills the fuller node n1 first (3 of its 3 free), then n0 gets 2: Slurm
    # would give n0 (first in node order) 4 and n1 1, so the start is re-split that way.
    busy = job("busy", units=1)
    snap = snapshot(0, nodes(4, 4), [running(busy, 0, [(1, 1)])], [block(job("b", units=5))])
    assert BestFit().place(snap.queued[0], FreeCapacity.of(snap)) == ((0, 2), (1, 3))
    start = Start("b", ((0, 2), (1, 3)))
    assert lay_out(snap, Decision((start,))).starts[0].allocation == ((0, 4), (1, 1))
    # The dispatchers' placer gives that split itself (it is steady: n1's end would not
    # change it), so that the decision's later starts leave it its room.
    decision = make_dispatcher("easy", "best-fit").decide(snap, limits_as_durations(snap))
    check_decision(snap, decision)
    assert decision.starts[0].allocation == ((0, 4), (1, 1))
    plain = make_dispatcher("easy", "best-fit").inner.inner  # without the layout step
    assert plain.decide(snap, limits_as_durations(snap)).starts == decision.starts


def test_other_jobs_keep_their_split_and_their_room():
    # "any" jobs are left as their allocator placed them; a block job never takes room
    # another start of the same decision uses.
    queue = [job("a", units=3), block(job("b", submit=1, units=4)), job("c", submit=2, units=2)]
    snap = snapshot(0, nodes(4, 4, 4), queue=queue)
    decision = make_dispatcher("fcfs", "first-fit").decide(snap, limits_as_durations(snap))
    check_decision(snap, decision)
    by_id = {s.job_id: s.allocation for s in decision.starts}
    assert by_id["a"] == ((0, 3),)
    assert by_id["b"] == ((0, 1), (1, 3))  # n0 has 1 left after a: one unit, then n1
    assert by_id["c"] == ((1, 1), (2, 1))


@st.composite
def clusters(draw):
    sizes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=6))
    machine = nodes(*sizes)
    run = []
    for i, size in enumerate(sizes):
        used = draw(st.integers(0, size - 1))
        if used:
            run.append(running(job(f"r{i}", units=used, limit=50), 0, [(i, used)]))
    queue = []
    for i in range(draw(st.integers(1, 8))):
        j = job(f"q{i}", submit=i, units=draw(st.integers(1, sum(sizes))), limit=10 + 7 * i)
        queue.append(block(j) if draw(st.booleans()) else j)
    return snapshot(5, machine, run, queue)


@settings(max_examples=150, deadline=None)
@given(
    snap=clusters(),
    name=st.sampled_from(["fcfs", "easy", "sjf"]),
    allocator=st.sampled_from(["first-fit", "best-fit"]),
)
def test_every_block_start_is_the_split_slurm_makes_once_the_others_hold_theirs(
    snap, name, allocator
):
    decision = make_dispatcher(name, allocator).decide(snap, limits_as_durations(snap))
    check_decision(snap, decision)  # still feasible: capacity never exceeded
    jobs = {j.id: j for j in snap.queued}
    free = FreeCapacity.of(snap)
    for start in decision.starts:
        free.take(start.allocation, jobs[start.job_id])
    for start in decision.starts:
        j = jobs[start.job_id]
        if j.layout != "block":
            continue
        free.give(start.allocation, j)
        fits = [(n, units_fitting(free.row(n), j.wanted)) for n, _ in start.allocation]
        assert start.allocation == block_layout(j.units, fits)
        free.take(start.allocation, j)
