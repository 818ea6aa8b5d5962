"""Allocators for heterogeneous machines: orderings on hand-made clusters,
priority-weighted's counters, and properties every allocator keeps."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core import ALLOCATORS, check_decision, make_allocator, make_dispatcher
from cpsched.core.allocators_hetero import (
    PriorityCounters,
    PriorityWeighted,
    interleave_longest_first,
)
from cpsched.core.capacity import FreeCapacity, units_fitting
from cpsched.errors import ConfigError
from tests.factories import job, limits_as_durations, nodes, running, snapshot

EURORA = ("cpu", "mem", "gpu", "mic")
GPU_NODE = (16, 16000, 2, 0)
MIC_NODE = (16, 16000, 0, 2)
CPU_UNIT = (16, 1000, 0, 0)  # a whole node's cores
SMALL_CPU = (1, 1000, 0, 0)
SMALL_GPU = (1, 1000, 1, 0)
HETERO = ("balanced", "weighted", "hybrid", "priority-weighted")


def facsimile(gpu=4, mic=4):
    """Netti's Figure 5.2: an Eurora facsimile, GPU nodes first, then MIC nodes."""
    return nodes(*([GPU_NODE] * gpu + [MIC_NODE] * mic))


def placed(name, snap, j, durations=None):
    allocator = make_allocator(name)
    if hasattr(allocator, "observe"):
        allocator.observe(snap, durations or limits_as_durations(snap))
    return allocator.place(j, FreeCapacity.of(snap))


# -- balanced ---------------------------------------------------------------------------


def test_balanced_interleaves_gpu_and_mic_nodes_on_an_idle_machine():
    cpu_job = job("c", units=4, unit=CPU_UNIT)
    snap = snapshot(0, facsimile(), queue=[cpu_job], resources=EURORA)
    assert placed("first-fit", snap, cpu_job) == ((0, 1), (1, 1), (2, 1), (3, 1))
    # GPU node, MIC node, GPU node, MIC node: neither accelerator is used up first.
    assert placed("balanced", snap, cpu_job) == ((0, 1), (1, 1), (4, 1), (5, 1))


def test_balanced_puts_nodes_without_free_accelerators_first():
    # Node 1's GPUs are taken: its cores protect no accelerator, so a CPU job goes there.
    gpu_job = job("g", unit=(2, 1000, 2, 0))
    cpu_job = job("c", unit=SMALL_CPU)
    snap = snapshot(
        0, facsimile(2, 2), [running(gpu_job, 0, [(1, 1)])], [cpu_job], resources=EURORA
    )
    assert placed("first-fit", snap, cpu_job) == ((0, 1),)
    assert placed("balanced", snap, cpu_job) == ((1, 1),)


def test_balanced_takes_the_scarcest_type_last():
    # Three GPU nodes and one MIC node: the longest bin is drained first.
    cpu_job = job("c", units=3, unit=CPU_UNIT)
    snap = snapshot(
        0, nodes(MIC_NODE, GPU_NODE, GPU_NODE, GPU_NODE), queue=[cpu_job], resources=EURORA
    )
    assert placed("balanced", snap, cpu_job) == ((1, 1), (2, 1), (3, 1))


def test_interleaving_takes_from_the_longest_bin_ties_to_the_first():
    assert interleave_longest_first([[0, 1], [5, 6]]) == [0, 5, 1, 6]
    assert interleave_longest_first([[1], [2, 3, 4], [7, 8]]) == [2, 3, 7, 1, 4, 8]
    assert interleave_longest_first([]) == []


# -- weighted and hybrid -----------------------------------------------------------------


def gpu_busy_snapshot(queue):
    """Two GPU and two MIC nodes; a GPU job holds one GPU and one core of node 0."""
    holder = job("hold", unit=SMALL_GPU)
    return snapshot(0, facsimile(2, 2), [running(holder, 0, [(0, 1)])], queue, resources=EURORA)


def test_weighted_keeps_gpu_nodes_free_when_the_queue_wants_gpus():
    cpu_job = job("c", unit=SMALL_CPU)
    queue = [job(f"g{i}", unit=SMALL_GPU) for i in range(5)] + [cpu_job]
    snap = gpu_busy_snapshot(queue)
    assert placed("first-fit", snap, cpu_job) == ((0, 1),)
    # GPUs are wanted and in use, MICs are not: the CPU job goes to a MIC node.
    assert placed("weighted", snap, cpu_job) == ((2, 1),)


def test_weighted_packs_gpu_jobs_where_fewest_gpus_are_left():
    gpu_job = job("g", unit=SMALL_GPU)
    snap = gpu_busy_snapshot([gpu_job])
    # Node 0 has one GPU left, node 1 two: best fit by what remains.
    assert placed("weighted", snap, gpu_job) == ((0, 1),)


def test_weighted_on_an_idle_machine_is_first_fit():
    # load_k = 0 makes every weight 0: the thesis' noted weakness at low load.
    cpu_job = job("c", units=2, unit=CPU_UNIT)
    snap = snapshot(0, facsimile(), queue=[cpu_job], resources=EURORA)
    assert placed("weighted", snap, cpu_job) == placed("first-fit", snap, cpu_job)


def test_hybrid_interleaves_bins_each_ranked_by_weight():
    cpu_job = job("c", units=2, unit=CPU_UNIT)
    queue = [job(f"g{i}", unit=SMALL_GPU) for i in range(5)] + [cpu_job]
    snap = gpu_busy_snapshot(queue)
    # Node 0 cannot hold a whole-node unit any more; bins: gpu [1], mic [2, 3] (ranked).
    # The longest bin, MIC, gives first, then GPU: MIC node 2 and GPU node 1.
    assert placed("hybrid", snap, cpu_job) == ((1, 1), (2, 1))
    assert placed("weighted", snap, cpu_job) == ((2, 1), (3, 1))


# -- priority-weighted ---------------------------------------------------------------------


def two_node_case():
    """A GPU node with one core and one GPU free, a CPU node with 16 free cores; the
    queue is mostly CPU work, so GPU demand (and its weight) is low."""
    machine = nodes((16, 2), (16, 0))
    holder = job("hold", unit=(15, 1))
    cpu_job = job("c", unit=(1, 0))
    queue = [job(f"q{i}", unit=(1, 0)) for i in range(19)] + [job("g", unit=(1, 1)), cpu_job]
    snap = snapshot(0, machine, [running(holder, 0, [(0, 1)])], queue, ("cpu", "gpu"))
    return snap, cpu_job


def test_priority_weighted_with_counters_at_one_is_weighted():
    snap, cpu_job = two_node_case()
    # Weighted: best fit on the GPU node (1 core left is less than 15).
    assert placed("weighted", snap, cpu_job) == ((0, 1),)
    assert placed("priority-weighted", snap, cpu_job) == ((0, 1),)


def test_priority_weighted_protects_a_type_whose_jobs_failed():
    snap, cpu_job = two_node_case()
    allocator = PriorityWeighted(counters=PriorityCounters(values={"gpu": 10}))
    allocator.observe(snap, limits_as_durations(snap))
    assert allocator.place(cpu_job, FreeCapacity.of(snap)) == ((1, 1),)


def test_priority_counters_move_once_per_job_per_call_and_stay_in_range():
    machine = nodes((4, 1), (4, 0))
    gpu_job = job("g", unit=(1, 2))  # two GPUs per unit: never fits
    small = job("s", unit=(1, 1))
    cpu_job = job("c", unit=(1, 0))
    snap = snapshot(0, machine, queue=[gpu_job, small, cpu_job], resources=("cpu", "gpu"))
    free = FreeCapacity.of(snap)
    durations = limits_as_durations(snap)
    allocator = PriorityWeighted()
    counters = allocator.counters
    allocator.observe(snap, durations)
    assert allocator.place(gpu_job, free) is None
    assert counters.get("gpu") == 2
    allocator.place(gpu_job, free)  # a second probe in the same call: no move
    assert counters.get("gpu") == 2
    allocator.place(cpu_job, free)  # needs no critical type
    assert counters.get("gpu") == 2
    for _ in range(20):  # a failure per call, capped at 10
        allocator.observe(snap, durations)
        allocator.place(gpu_job, free)
    assert counters.get("gpu") == 10
    allocator.observe(snap, durations)
    assert allocator.place(small, free) == ((0, 1),)
    assert counters.get("gpu") == 9
    for _ in range(20):  # a success per call, floored at 1
        allocator.observe(snap, durations)
        allocator.place(small, free)
    assert counters.get("gpu") == 1


def test_priority_counters_reject_a_bad_range():
    with pytest.raises(ConfigError, match="low <= high"):
        PriorityCounters(low=5, high=2)


# -- construction ---------------------------------------------------------------------------


def test_every_allocator_is_registered():
    assert set(ALLOCATORS) == {"first-fit", "best-fit", *HETERO}
    for name in ALLOCATORS:
        assert make_allocator(name).name == name


def test_critical_types_are_configurable_by_name():
    cpu_job = job("c", units=2, unit=CPU_UNIT)
    snap = snapshot(0, facsimile(), queue=[cpu_job], resources=EURORA)
    # With only mic critical, GPU nodes count as plain: they come first.
    assert placed("balanced:mic", snap, cpu_job) == ((0, 1), (1, 1))
    allocator = make_allocator("balanced", critical=["gpu"])
    allocator.observe(snap, {})
    assert allocator.context.shape.critical == (2,)


def test_default_critical_types_are_those_not_all_nodes_have():
    snap = snapshot(0, facsimile(), resources=EURORA)
    allocator = make_allocator("hybrid")
    allocator.observe(snap, {})
    assert allocator.context.shape.critical == (2, 3)


def test_an_unknown_critical_type_is_a_clear_error():
    snap = snapshot(0, facsimile(), resources=EURORA)
    allocator = make_allocator("weighted:fpga")
    with pytest.raises(ConfigError, match="'fpga' are not resources of this machine"):
        allocator.observe(snap, {})


def test_plain_allocators_take_no_critical_types():
    with pytest.raises(ConfigError, match="no critical resource types"):
        make_allocator("first-fit:gpu")


def test_placing_before_observing_is_a_clear_error():
    snap = snapshot(0, facsimile(), resources=EURORA)
    with pytest.raises(ConfigError, match="observe"):
        make_allocator("balanced").place(job("c", unit=SMALL_CPU), FreeCapacity.of(snap))


# -- in the dispatchers ----------------------------------------------------------------------


def mixed_snapshot():
    queue = [
        job(f"j{i}", submit=i, units=1 + i % 3, unit=SMALL_GPU if i % 4 else CPU_UNIT)
        for i in range(12)
    ]
    holder = job("hold", unit=(8, 8000, 2, 0))
    return snapshot(5, facsimile(2, 2), [running(holder, 0, [(1, 1)])], queue, resources=EURORA)


@pytest.mark.parametrize("dispatcher", ["fcfs", "sjf", "ljf", "easy"])
@pytest.mark.parametrize("allocator", HETERO)
def test_heuristic_dispatchers_accept_every_allocator(dispatcher, allocator):
    snap = mixed_snapshot()
    decision = make_dispatcher(dispatcher, allocator).decide(snap, limits_as_durations(snap))
    check_decision(snap, decision)
    assert decision.starts
    by_id = {j.id: j for j in snap.queued}
    for start in decision.starts:
        if by_id[start.job_id].unit_request[2]:
            assert all(node < 2 for node, _ in start.allocation)  # GPU jobs on GPU nodes


@pytest.mark.parametrize("allocator", HETERO)
def test_hcp3_allocates_with_every_allocator(allocator):
    from cpsched.core.cp import SearchConfig

    snap = mixed_snapshot()
    search = SearchConfig(initial_limit=0.5, max_limit=1.0, deadline=5.0, deterministic=True)
    dispatcher = make_dispatcher("hcp3", allocator, search=search)
    decision = dispatcher.decide(snap, limits_as_durations(snap))
    check_decision(snap, decision)
    assert decision.starts
    assert dispatcher.allocator.name == allocator


# -- properties -------------------------------------------------------------------------------


@st.composite
def placements(draw):
    """A random machine of cpu/gpu/mic nodes, partly used, and a job to place."""
    caps = [
        draw(st.sampled_from([(4, 2, 0), (4, 0, 2), (8, 0, 0), (2, 1, 1)]))
        for _ in range(draw(st.integers(1, 6)))
    ]
    machine = nodes(*caps)
    used = []
    for i, cap in enumerate(caps):
        unit = tuple(draw(st.integers(0, c)) for c in cap)
        if any(unit):
            used.append(running(job(f"r{i}", unit=unit), 0, [(i, 1)]))
    unit = (draw(st.integers(1, 4)), draw(st.integers(0, 2)), draw(st.integers(0, 1)))
    target = job("x", units=draw(st.integers(1, 6)), unit=unit)
    others = [job(f"q{i}", unit=(1, i % 2, 0)) for i in range(draw(st.integers(0, 4)))]
    snap = snapshot(0, machine, used, [target, *others], ("cpu", "gpu", "mic"))
    return snap, target


@settings(max_examples=150, deadline=None)
@given(placements(), st.sampled_from(sorted(ALLOCATORS)))
def test_every_allocator_places_all_units_within_capacity_or_none(case, name):
    snap, target = case
    free = FreeCapacity.of(snap)
    rows_before, total_before = list(free.rows()), list(free.total)
    allocation = placed(name, snap, target)
    assert list(free.rows()) == rows_before and free.total == total_before
    room = sum(units_fitting(row, target.wanted) for row in snap.free)
    if allocation is None:
        # Every allocator walks every fitting node: it fails only when nothing would do.
        assert room < target.units
        return
    assert sum(units for _, units in allocation) == target.units
    assert len({node for node, _ in allocation}) == len(allocation)
    for node, units in allocation:
        assert units >= 1
        assert all(
            units * want <= have
            for want, have in zip(target.unit_request, snap.free[node], strict=True)
        )
