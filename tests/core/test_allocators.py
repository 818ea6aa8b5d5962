import pytest

from cpsched.core import make_allocator
from cpsched.core.capacity import FreeCapacity
from cpsched.errors import UnknownPolicyError
from tests.factories import job, nodes, running, snapshot


def free_of(snap):
    return FreeCapacity.of(snap)


def test_first_fit_fills_nodes_in_configured_order():
    snap = snapshot(0, nodes(2, 2, 2))
    assert make_allocator("first-fit").place(job("a", units=3), free_of(snap)) == ((0, 2), (1, 1))


def test_best_fit_prefers_the_fullest_node_that_fits():
    machine = nodes(4, 4, 4)
    busy = job("busy", units=3)
    snap = snapshot(0, machine, [running(busy, 0, [(1, 3)])])
    # node 1 has one core left: best-fit consolidates there, first-fit does not.
    assert make_allocator("best-fit").place(job("a"), free_of(snap)) == ((1, 1),)
    assert make_allocator("first-fit").place(job("a"), free_of(snap)) == ((0, 1),)


def test_units_sit_wholly_on_one_node_for_every_type():
    # Two cpu free on each node but memory only on node 1: the unit needs both together.
    machine = nodes((2, 4), (2, 16))
    snap = snapshot(0, machine, resources=("cpu", "mem"))
    placed = make_allocator("first-fit").place(job("a", unit=(1, 8)), free_of(snap))
    assert placed == ((1, 1),)


def test_no_allocation_when_fragmented_even_if_totals_suffice():
    # 2 cores free in total, but a unit needs 2 cores on one node.
    machine = nodes(2, 2)
    snap = snapshot(0, machine, [running(job("x"), 0, [(0, 1)]), running(job("y"), 0, [(1, 1)])])
    free = free_of(snap)
    assert free.fits_total((2,))
    for name in ("first-fit", "best-fit"):
        assert make_allocator(name).place(job("a", unit=2), free) is None


def test_allocator_does_not_change_the_capacity_it_reads():
    snap = snapshot(0, nodes(2, 2))
    free = free_of(snap)
    make_allocator("best-fit").place(job("a", units=3), free)
    assert free.total == [4]
    assert list(free.rows()) == [(2,), (2,)]


def test_unknown_allocator_lists_the_valid_ones():
    with pytest.raises(UnknownPolicyError, match="best-fit, first-fit"):
        make_allocator("worst-fit")
