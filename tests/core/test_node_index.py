"""The node index places exactly as the scans: same allocations, call after call."""

from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core import Job, make_allocator
from cpsched.core.capacity import FreeCapacity
from cpsched.core.node_index import NodeIndex

TYPES = 2

# A few distinct rows, as on a real machine (an over-filled node among them).
row = st.sampled_from([(0, 0), (4, 3), (2, 1), (1, 3), (4, 0), (-1, 2)])
unit = st.tuples(st.integers(0, 2), st.integers(0, 2)).filter(any)


def capacity(rows: list[tuple[int, int]]) -> FreeCapacity:
    total = [sum(r[t] for r in rows) for t in range(TYPES)]
    return FreeCapacity(rows, total, (4 * len(rows), 3 * len(rows)))


def unindexed(free: FreeCapacity) -> FreeCapacity:
    """A copy that scans (copies have no index; few nodes never build one)."""
    return free.copy()


def units_fitting(row, wanted):
    return min(row[r] // amount for r, amount in wanted)


def textbook(allocator, job, free):
    """The allocators as plain scans of every node (as they were before the index)."""
    if any(w > a for a, w in zip(free.total, job.request, strict=True)):
        return None
    rows, wanted, needed = free.rows(), job.wanted, job.units
    if allocator == "first-fit":
        order = [(n, f) for n, row in enumerate(rows) if (f := units_fitting(row, wanted))]
    else:
        weight = [1.0 / c if c else 0.0 for c in free.capacity_total]
        r0, a0 = wanted[0]
        ranked = []
        for n, row in enumerate(rows):
            f = units_fitting(row, wanted)
            if row[r0] >= a0 and f:
                ranked.append((sum(row[r] * weight[r] for r, _ in wanted), n, f))
        order = [(n, f) for _, n, f in sorted(ranked)]
    placed = []
    for node, fit in order:
        take = min(fit, needed)
        placed.append((node, take))
        needed -= take
        if not needed:
            return tuple(placed) if allocator == "first-fit" else tuple(sorted(placed))
    return None


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(row, min_size=48, max_size=96),
    jobs=st.lists(st.tuples(st.integers(1, 9), unit), min_size=2, max_size=12),
    allocator=st.sampled_from(["first-fit", "best-fit"]),
)
def test_indexed_placements_are_the_scans(rows, jobs, allocator):
    place = make_allocator(allocator).place
    indexed = capacity(rows)
    built = indexed.index() is not None  # built now: best-fit walks it from then on
    for k, (units, per_unit) in enumerate(jobs):
        job = Job(f"j{k}", 0, 10, units, per_unit)
        expected = textbook(allocator, job, indexed)
        assert place(job, unindexed(indexed)) == expected
        assert place(job, indexed) == expected
        if expected is not None:
            indexed.take(expected, job)
    assert built or len(set(rows)) > len(rows) // 8
    if built:  # the index followed every take
        grouped: dict[tuple[int, ...], list[int]] = {}
        for node, free_row in enumerate(indexed.rows()):
            grouped.setdefault(free_row, []).append(node)
        assert indexed.index().buckets == grouped


def test_no_index_for_nodes_that_all_differ():
    rows = [(n, 0) for n in range(64)]
    assert NodeIndex.of(rows) is None
    assert NodeIndex.of([(1, 0)] * 64) is not None


def test_a_copy_with_rows_replaced_keeps_its_own_index_in_step() -> None:
    """``FreeCapacity.with_rows``: the copy's index is that of its rows, and the original
    (its rows and its index) is left as it was, also after the copy takes a job."""
    from tests.factories import job

    rows = [(4, 1)] * 30 + [(2, 0)] * 10
    free = FreeCapacity(rows, [140, 30], (140, 30))
    index = free.index()
    assert index is not None
    copy = free.with_rows({0: (1, 0), 33: (4, 1), 5: (4, 1)}, [139, 30])
    assert copy.rows()[:2] == [(1, 0), (4, 1)] and copy.rows()[33] == (4, 1)
    assert copy.index(build=False).buckets == NodeIndex.of(copy.rows()).buckets
    copy.take(((1, 2),), job("j", units=2, unit=(1, 0)))
    assert copy.index(build=False).buckets == NodeIndex.of(copy.rows()).buckets
    assert free.rows() == rows and free.index(build=False).buckets == NodeIndex.of(rows).buckets


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(row, min_size=48, max_size=96),
    jobs=st.lists(st.tuples(st.integers(1, 3), unit), min_size=2, max_size=30),
)
def test_best_fit_builds_the_index_once_it_has_ranked_the_machine_and_places_the_same(rows, jobs):
    """Best-fit ranks the few nodes with room itself, and builds the index once this
    capacity's placements have ranked as many nodes as the machine has: a busy machine
    starting many jobs in one call. The allocations stay the scans'."""
    place = make_allocator("best-fit").place
    free = capacity(rows)
    ranked = 0
    for k, (units, per_unit) in enumerate(jobs):
        job = Job(f"j{k}", 0, 10, units, per_unit)
        expected = textbook("best-fit", job, free)
        crossing = False
        if free.index(build=False) is None and free.fits_total(job.request):
            r0, a0 = job.wanted[0]
            before = ranked
            ranked += sum(1 for r in free.rows() if r[r0] >= a0)
            # The first placement past the machine's count tries to build it (rows too
            # varied then: never again for this capacity).
            crossing = before <= len(rows) < ranked and NodeIndex.of(free.rows()) is not None
        assert place(job, free) == expected
        if crossing:
            assert free.index(build=False) is not None
        if expected is not None:
            free.take(expected, job)
