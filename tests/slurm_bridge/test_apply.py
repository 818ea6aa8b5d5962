"""Each start is checked against the state just read before anything is run."""

from __future__ import annotations

from cpsched.slurm_bridge.apply import apply_decision
from cpsched.slurm_bridge.model import ClusterState, JobShape
from cpsched.wire.schemas import DecisionOut
from tests.slurm_bridge.fakes import FakeCluster, decision, held, node, running


def apply(state: ClusterState, **kw: object) -> tuple[FakeCluster, object]:
    cluster = FakeCluster(state)
    result = apply_decision(DecisionOut.model_validate(decision(**kw)), state, cluster)
    return cluster, result


def test_valid_starts_are_pinned_and_room_is_tracked_within_the_cycle() -> None:
    state = ClusterState(
        time=1000, nodes={"n1": node("n1", cpu=4)}, jobs=[held("a", cpu=3), held("b", cpu=2)]
    )
    cluster, result = apply(state, starts={"a": {"n1": 1}, "b": {"n1": 1}})
    assert cluster.calls == [("start", "a", "n1")]
    assert result.refused == {"b": "node n1 has 1 cpu free, needs 2"}


def test_refusals_leave_jobs_held() -> None:
    pinned_multi = held(
        "m", cpu=1, units=2, shape=JobShape(units=2, per_unit={"cpu": 1}, one_unit_per_node=True)
    )
    released = held("r")
    released = type(released)(
        **{**{s: getattr(released, s) for s in released.__slots__}, "held_for_us": False}
    )
    state = ClusterState(
        time=1000,
        nodes={"n1": node("n1"), "n2": node("n2", state="drain"), "n3": node("n3", used_cpu=4)},
        jobs=[held("a"), held("b"), held("c"), pinned_multi, released, held("s", units=1)],
    )
    cluster, result = apply(
        state,
        starts={
            "a": {"nx": 1},
            "b": {"n2": 1},
            "c": {"n3": 1},
            "m": {"n1": 2},
            "r": {"n1": 1},
            "gone": {"n1": 1},
            "s": {"n1": 1, "n3": 0},
        },
    )
    assert cluster.calls == []
    assert result.refused["a"] == "node nx unknown to the workload manager"
    assert result.refused["b"] == "node n2 is drain"
    assert result.refused["c"] == "node n3 has 0 cpu free, needs 1"
    assert "one unit per node" in result.refused["m"]
    assert result.refused["r"].endswith("not held for cpsched")
    assert result.refused["gone"] == "job no longer in the queue"
    assert "units" in result.refused["s"]


def test_extensions_only_raise_limits_of_running_jobs() -> None:
    state = ClusterState(
        time=1000,
        nodes={"n1": node("n1")},
        jobs=[running("x", {"n1": 1}, limit=600), running("y", {"n1": 1}, limit=600), held("z")],
    )
    cluster, result = apply(state, extensions={"x": 1200, "y": 300, "z": 900})
    assert cluster.calls == [("extend", "x", "1200")]
    assert result.extended == {"x": 1200}
    assert set(result.refused) == {"y", "z"}
