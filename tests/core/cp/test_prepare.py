"""The prepare step: priorities, reductions, window, units, horizon, weights."""

import pytest

from cpsched.core.cp import ModelConfig
from cpsched.core.cp.prepare import objective_weights, priorities, priority_order, to_units
from cpsched.errors import ConfigError
from tests.core.cp._util import prepared_of
from tests.factories import job, limits_as_durations, nodes, running, snapshot


def test_priority_is_the_slowdown_if_started_now():
    queue = [job("a", submit=0, limit=10), job("b", submit=50, limit=100)]
    prios = priorities(queue, {"a": 10, "b": 100}, now=100)
    assert prios == {"a": pytest.approx(11.0), "b": pytest.approx(1.5)}


def test_priority_order_breaks_ties_by_smaller_duration_times_request():
    # Same submit and duration: same priority; the smaller request comes first even
    # though it is later in the queue.
    queue = [job("big", units=3), job("small", units=1)]
    durations = {"big": 100, "small": 100}
    order = priority_order(queue, priorities(queue, durations, 0), durations)
    assert [j.id for j in order] == ["small", "big"]


def test_jobs_that_cannot_start_now_are_dropped_node_by_node():
    # 2 + 2 cores free in total, but a 3-core unit fits no node: dropped although the
    # pooled total (4) would cover it.
    snap = snapshot(
        0,
        nodes(4, 4),
        [running(job("r", units=2, unit=2), 0, [(0, 1), (1, 1)])],
        [job("wide", unit=3), job("ok", units=2, unit=2), job("huge", units=9)],
    )
    prepared = prepared_of(snap)
    assert [j.job.id for j in prepared.jobs] == ["ok"]
    assert set(prepared.dropped) == {"wide", "huge"}


def test_unrequested_resource_types_are_not_modelled():
    machine = nodes((4, 8, 2), (4, 8, 0))
    snap = snapshot(0, machine, queue=[job("a", unit=(1, 2, 0))], resources=("cpu", "mem", "gpu"))
    prepared = prepared_of(snap)
    assert prepared.types == (0, 1)
    assert prepared.capacity == (8, 16)
    assert prepared.jobs[0].demand == (1, 2)


def test_horizon_is_remaining_plus_queued_durations():
    r1, r2 = job("r1", limit=100), job("r2", limit=30)
    snap = snapshot(
        50, nodes(4), [running(r1, 0, [(0, 1)]), running(r2, 0, [(0, 1)])], [job("q", limit=40)]
    )
    prepared = prepared_of(snap)
    # rem r1 = 50; r2 outlived its duration: the underestimation fix gives 1.
    assert prepared.horizon == 50 + 1 + 40
    assert [(load.length, load.demand) for load in prepared.running] == [(1, (1,)), (50, (1,))]


def test_running_jobs_ending_together_become_one_load():
    jobs = [job(f"r{i}", limit=100) for i in range(3)]
    snap = snapshot(0, nodes(4), [running(j, 0, [(0, 1)]) for j in jobs], [job("q")])
    assert [(load.length, load.demand) for load in prepared_of(snap).running] == [(100, (3,))]


def test_time_units_round_durations_up():
    assert [to_units(s, 60) for s in (1, 60, 61, 120)] == [1, 1, 2, 2]
    snap = snapshot(0, nodes(4), queue=[job("a", limit=61), job("b", limit=120)])
    prepared = prepared_of(
        snap, model=ModelConfig(time_unit=60, reserve_above=None, reserve_after=None)
    )
    assert {j.job.id: j.length for j in prepared.jobs} == {"a": 2, "b": 2}


def test_the_underestimation_fix_holds_one_time_unit():
    late = job("late", limit=60)  # started at 0, expected to end at 60; now is 100
    snap = snapshot(100, nodes(4), [running(late, 0, [(0, 1)])], [job("q", limit=120)])
    prepared = prepared_of(
        snap, model=ModelConfig(time_unit=60, reserve_above=None, reserve_after=None)
    )
    assert [load.length for load in prepared.running] == [1]
    assert prepared.horizon == 1 + 2


def test_weights_are_inverse_durations_scaled_to_the_shortest():
    assert objective_weights([10, 20, 30, 100_000], 1000) == [1000, 500, 333, 1]
    assert objective_weights([], 1000) == []


def test_window_keeps_the_highest_priorities():
    queue = [job(f"j{i}", submit=i, limit=10) for i in range(5)]
    snap = snapshot(100, nodes(8), queue=queue)
    prepared = prepared_of(
        snap, model=ModelConfig(window=2, reserve_above=None, reserve_after=None)
    )
    assert [j.job.id for j in prepared.jobs] == ["j0", "j1"]
    assert prepared.beyond_window == ("j2", "j3", "j4")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window": 0},
        {"time_unit": 0},
        {"weight_scale": 0},
        {"reserve_above": 0.5},
        {"reserve_after": 0},
    ],
)
def test_model_config_is_validated(kwargs):
    with pytest.raises(ConfigError):
        ModelConfig(**kwargs)


def test_durations_below_one_second_are_treated_as_one():
    snap = snapshot(0, nodes(2), queue=[job("a")])
    durations = {**limits_as_durations(snap), "a": 0}
    assert prepared_of(snap, durations).jobs[0].length == 1
