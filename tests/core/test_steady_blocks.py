"""Block jobs go where Slurm's own split cannot drift: every node but the last idle."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core import check_decision, make_dispatcher
from cpsched.core.allocators import BestFit
from cpsched.core.capacity import FreeCapacity
from cpsched.core.steady_blocks import SteadyBlocks, steady_placement
from tests.factories import job, limits_as_durations, nodes, running, snapshot


def block(j):
    return replace(j, layout="block")


def test_a_block_job_leaves_a_busy_node_unless_it_is_its_last():
    # n0 runs a job (2 of 4 free), n1 and n2 are idle. Best-fit fills n0 first: if that
    # job ends before Slurm allocates, Slurm puts 4 tasks on n0, not 2 — so the block job
    # goes on n1 and n2 instead (n1 full, the rest on n2).
    busy = job("busy", units=2)
    snap = snapshot(0, nodes(4, 4, 4), [running(busy, 0, [(0, 2)])], [block(job("b", units=6))])
    placer = SteadyBlocks(BestFit())
    placer.observe(snap, limits_as_durations(snap))
    free = FreeCapacity.of(snap)
    assert BestFit().place(snap.queued[0], free) == ((0, 2), (1, 4))
    assert placer.place(snap.queued[0], free) == ((1, 4), (2, 2))
    decision = make_dispatcher("easy", "best-fit").decide(snap, limits_as_durations(snap))
    check_decision(snap, decision)
    assert decision.starts[0].allocation == ((1, 4), (2, 2))


def test_a_busy_node_may_be_the_last_and_other_jobs_are_left_alone():
    busy = job("busy", units=1)
    snap = snapshot(0, nodes(4, 4), [running(busy, 0, [(1, 1)])], [])
    free = FreeCapacity.of(snap)
    # idle n0 then busy n1 last: steady as it is
    assert steady_placement(block(job("b", units=5)), free, frozenset({0})) == ((0, 4), (1, 1))
    placer = SteadyBlocks(BestFit())
    placer.observe(snap, limits_as_durations(snap))
    plain = job("p", units=5)  # not a block job: best-fit's own choice
    assert placer.place(plain, free) == BestFit().place(plain, free)


def test_without_a_steady_placement_the_inner_one_is_kept():
    runs = [running(job(f"r{n}", units=2), 0, [(n, 2)]) for n in range(3)]
    snap = snapshot(0, nodes(4, 4, 4), runs, [block(job("b", units=5))])
    placer = SteadyBlocks(BestFit())
    placer.observe(snap, limits_as_durations(snap))
    free = FreeCapacity.of(snap)
    assert steady_placement(snap.queued[0], free, frozenset()) is None  # no idle node
    assert placer.place(snap.queued[0], free) == BestFit().place(snap.queued[0], free)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 4), min_size=2, max_size=6),
    st.integers(1, 12),
    st.sampled_from(["easy", "fcfs"]),
)
def test_block_starts_are_steady_whenever_one_is_possible(used, units, dispatcher):
    """Every decision stays valid; a block start is steady (every node but the last in
    node order idle) whenever the free capacity holds a steady placement at all."""
    runs = [running(job(f"r{n}", units=u), 0, [(n, u)]) for n, u in enumerate(used) if u > 0]
    snap = snapshot(0, nodes(*[4] * len(used)), runs, [block(job("b", units=units))])
    decision = make_dispatcher(dispatcher, "best-fit").decide(snap, limits_as_durations(snap))
    check_decision(snap, decision)
    idle = frozenset(n for n, u in enumerate(used) if u == 0)
    for start in decision.starts:
        possible = steady_placement(snap.queued[0], FreeCapacity.of(snap), idle) is not None
        if possible:
            assert all(n in idle for n, _ in sorted(start.allocation)[:-1]), start
