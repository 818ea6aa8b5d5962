"""The two representations of a profile (``core/dense_profile.py``, one step × node array,
and ``core/sparse_profile.py``, per-node releases and jobs taken): the same answers to
every question, whatever jobs are taken and given back."""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core.allocators import make_allocator
from cpsched.core.capacity import FreeCapacity
from cpsched.core.dense_profile import DenseProfile
from cpsched.core.problem import Job, RunningJob
from cpsched.core.profile import DENSE_CELLS, make_profile
from cpsched.core.site import Constraints
from cpsched.core.sparse_profile import SparseProfile
from cpsched.core.wait_bound import limit_releases
from tests.factories import nodes, snapshot

RESOURCES = ("cpu", "gpu")
NOW = 1_000


def a_job(id: str, units: int, cpu: int, gpu: int, limit: int, exclusive: bool) -> Job:
    return Job(
        id=id,
        submit=0,
        time_limit=limit,
        units=units,
        unit_request=(cpu, gpu),
        constraints=Constraints(exclusive=True) if exclusive else None,
    )


@st.composite
def cases(draw: Any) -> tuple[Any, list[Any]]:
    machine = nodes(*[(draw(st.integers(2, 8)), draw(st.integers(0, 2))) for _ in range(6)])
    used = [[0, 0] for _ in machine]
    running: list[RunningJob] = []
    for i in range(draw(st.integers(0, 8))):
        node = draw(st.integers(0, len(machine) - 1))
        free_cpu = machine[node].capacity[0] - used[node][0]
        if free_cpu < 1:
            continue
        exclusive = used[node] == [0, 0] and draw(st.booleans())
        cpu = machine[node].capacity[0] if exclusive else draw(st.integers(1, free_cpu))
        j = a_job(f"r{i}", 1, cpu, 0, draw(st.integers(50, 2_000)), exclusive)
        start = NOW - draw(st.integers(0, 3_000))  # ends by its limit, some before now
        if exclusive:
            used[node] = list(machine[node].capacity)
        else:
            used[node][0] += cpu
        running.append(RunningJob(j, start, j.time_limit, ((node, 1),)))
    ops = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["earliest", "now", "fits", "give"]),
                st.integers(1, 3),  # units
                st.integers(1, 4),  # cpu per unit
                st.integers(0, 1),  # gpu per unit
                st.integers(10, 3_000),  # duration
                st.booleans(),  # exclusive
                st.integers(0, 3_000),  # a time after now, for fits_at
                st.integers(0, 5),  # a node, for fits_at
            ),
            max_size=25,
        )
    )
    return snapshot(NOW, machine, running, resources=RESOURCES), ops


@settings(max_examples=300, deadline=None)
@given(cases(), st.sampled_from(["best-fit", "first-fit"]))
def test_the_sparse_profile_answers_as_the_dense_one(case: Any, allocator_name: str) -> None:
    snap, ops = case
    allocator = make_allocator(allocator_name)
    sparse = SparseProfile(NOW, FreeCapacity.of(snap), limit_releases(snap))
    dense = DenseProfile(NOW, FreeCapacity.of(snap), limit_releases(snap))
    taken: list[tuple[int, int, Any, Job]] = []
    for i, (kind, units, cpu, gpu, duration, exclusive, after, node) in enumerate(ops):
        j = a_job(f"q{i}", units if not exclusive else 1, cpu, gpu, duration, exclusive)
        if kind in ("earliest", "now"):
            now_only = kind == "now"
            assert sparse.fits_now_total(j.request) == dense.fits_now_total(j.request)
            found = sparse.earliest(j, duration, allocator, now_only=now_only)
            assert found == dense.earliest(j, duration, allocator, now_only=now_only)
            if found is not None:
                step, allocation = found
                if exclusive and not dense.fits_at(dense.times[step], duration, allocation, j):
                    continue  # a bare allocator ignores exclusivity; the site's placement
                    # (every product allocator) takes whole nodes only, as fits_at checks
                sparse.take(step, duration, allocation, j)
                dense.take(step, duration, allocation, j)
                taken.append((sparse.times[step], duration, allocation, j))
        elif kind == "fits":
            allocation = ((node, 1),)
            if not exclusive:
                allocation = ((node, units),)
            assert sparse.fits_at(NOW + after, duration, allocation, j) == dense.fits_at(
                NOW + after, duration, allocation, j
            )
        elif taken:
            time, held_for, allocation, held = taken.pop(after % len(taken))
            sparse.give(time, held_for, allocation, held)
            dense.give(time, held_for, allocation, held)
        assert sparse.times == dense.times
        assert sparse._total.tolist() == dense._total.tolist()
        for profile in (sparse, dense):
            assert_capacity_now_is_the_window(profile, duration)


def assert_capacity_now_is_the_window(profile: Any, duration: int) -> None:
    """What a placement from now sees (what was free when the profile was made, the
    nodes changed since replaced) is what the window from now has free, node by node."""
    last = bisect_left(profile.times, profile.times[0] + duration, lo=1)
    window = profile._window(0, last)
    total = window.sum(axis=0)
    now = profile._capacity_now(window, total)
    assert now.rows() == [tuple(row) for row in window.tolist()]
    assert now.total == total.tolist()


def test_a_machine_with_many_nodes_and_running_jobs_gets_the_sparse_profile() -> None:
    small = snapshot(NOW, nodes(*[(4, 0)] * 10), resources=RESOURCES)
    assert isinstance(make_profile(NOW, FreeCapacity.of(small), []), DenseProfile)
    # 5,000 nodes, each running a job ending at its own time: 5,001 steps x 5,000 nodes x
    # 2 types, far over the dense array's limit.
    machine = nodes(*[(4, 0)] * 5_000)
    running = [
        RunningJob(a_job(f"r{i}", 1, 4, 0, 100 + i, False), NOW, 100 + i, ((i, 1),))
        for i in range(5_000)
    ]
    big = snapshot(NOW, machine, running, resources=RESOURCES)
    assert DENSE_CELLS < 5_001 * 5_000 * 2
    assert isinstance(make_profile(NOW, FreeCapacity.of(big), limit_releases(big)), SparseProfile)


def test_placing_in_the_capacity_a_profile_was_made_from_does_not_change_the_profile() -> None:
    free = FreeCapacity.of(snapshot(NOW, nodes(*[(4, 0)] * 3), resources=RESOURCES))
    profile = make_profile(NOW, free, [])
    free.take(((0, 4),), a_job("j", 1, 4, 0, 100, False))  # the caller goes on placing
    window = profile._window(0, 1)
    assert profile._capacity_now(window, window.sum(axis=0)).rows() == [(4, 0)] * 3
