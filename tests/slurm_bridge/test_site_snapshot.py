"""The site's rules as the bridge sends them, and what it refuses to release."""

from __future__ import annotations

from dataclasses import replace

from cpsched.slurm_bridge.apply import apply_decision, check_start
from cpsched.slurm_bridge.model import (
    ClusterState,
    JobRules,
    JobShape,
    PartitionView,
    ReservationView,
)
from cpsched.slurm_bridge.snapshot import dispatch_request
from cpsched.wire.schemas import DecisionOut
from tests.slurm_bridge.fakes import FakeCluster, held, node


def site_state(*jobs: object) -> ClusterState:
    nodes = {
        "c1": replace(node("c1"), partitions=("cpu",), features=("skylake", "ib")),
        "c2": replace(node("c2"), partitions=("cpu",), features=("bad feature!",)),
        "g1": replace(node("g1", gpu=2), partitions=("gpu",)),
    }
    return ClusterState(
        time=1000,
        nodes=nodes,
        jobs=list(jobs),  # type: ignore[arg-type]
        partitions={
            "cpu": PartitionView("cpu", ("c1", "c2"), max_time_s=7200),
            "gpu": PartitionView("gpu", ("g1",), max_nodes=1, exclusive=True),
            "other": PartitionView("other", ("x9",)),  # none of its nodes is managed
        },
        reservations=(
            ReservationView("maint", ("c1", "x9"), 2000, 3000),
            ReservationView("past", ("c1",), 10, 20),
        ),
    )


def test_partitions_reservations_features_and_rules_are_sent():
    pair = JobShape(units=2, per_unit={"cpu": 2}, one_unit_per_node=True)
    state = site_state(
        replace(held("n2", shape=pair), partition="cpu,other"),
        replace(
            held("f", units=3, shape=JobShape(units=3, per_unit={"cpu": 1})),
            rules=JobRules(
                features="skylake&ib", tasks_per_node=2, reservation="maint", qos="high"
            ),
        ),
        replace(held("g"), partition="gpu"),
        replace(held("dep"), rules=JobRules(dependency="afterok:7(unfulfilled)")),
        replace(held("later"), rules=JobRules(begin=5000)),
    )
    request, notes = dispatch_request(state, shadow=False, extensions={})
    assert [p.name for p in request.partitions] == ["cpu", "gpu"]  # "other" has no node here
    assert [(r.name, r.nodes) for r in request.reservations] == [("maint", ["c1"])]  # past gone
    by_node = {n.name: n.features for n in request.nodes}
    assert by_node["c1"] == ["skylake", "ib"] and by_node["c2"] == []
    assert any("c2" in note for note in notes)
    jobs = {j.id: j for j in request.queued}
    assert jobs["n2"].partition == "cpu"  # only the partitions the snapshot declares
    assert (jobs["n2"].min_nodes, jobs["n2"].max_nodes, jobs["n2"].tasks_per_node) == (2, 2, 1)
    assert "node" not in jobs["n2"].per_unit  # no synthetic node slot any more
    assert jobs["f"].features == "skylake&ib" and jobs["f"].tasks_per_node == 2
    assert jobs["f"].reservation == "maint"
    assert jobs["f"].qos == "high" and jobs["g"].qos == ""  # the QOS, for the dashboard
    assert "qos" not in jobs["g"].model_dump()  # left out when empty: digests as before
    assert jobs["g"].exclusive  # its partition is OverSubscribe=EXCLUSIVE
    assert not jobs["dep"].eligible and "Dependency" in jobs["dep"].reason
    assert not jobs["later"].eligible and "BeginTime" in jobs["later"].reason
    assert jobs["f"].eligible and jobs["g"].eligible


def test_a_held_back_job_or_one_outside_its_partition_is_never_released():
    dep = replace(held("dep"), rules=JobRules(dependency="afterok:7(unfulfilled)"))
    blocked = replace(held("qos"), rules=JobRules(blocked="QOSMaxCpuPerUserLimit"))
    wrong = replace(held("gpu job"), partition="gpu")
    state = site_state(dep, blocked, wrong)
    assert "never released" in (check_start(dep, {"c1": 1}, state, {}) or "")
    assert "QOSMaxCpuPerUserLimit" in (check_start(blocked, {"c1": 1}, state, {}) or "")
    assert "partitions" in (check_start(wrong, {"c1": 1}, state, {}) or "")
    assert check_start(wrong, {"g1": 1}, state, {}) is None


def test_a_multi_partition_job_is_started_in_the_partition_holding_its_nodes():
    seen: dict[str, object] = {}

    class Recording(FakeCluster):
        def start(self, job_id, allocation, *, cpus_per_node=None, partition=None, exact=None):  # type: ignore[no-untyped-def]
            seen[job_id] = partition

    both, one = replace(held("both"), partition="cpu,gpu"), replace(held("one"), partition="cpu")
    state = site_state(both, one)
    decision = DecisionOut.model_validate(
        {
            "cluster": "c", "decision_id": 1, "time": 1000, "dry_run": False,
            "starts": [
                {"job_id": "both", "allocation": {"g1": 1}, "predicted_run_time": 60},
                {"job_id": "one", "allocation": {"c1": 1}, "predicted_run_time": 60},
            ],
            "extensions": [],
            "diagnostics": {
                "dispatcher": "easy", "solver_status": "heuristic", "fallback": False,
                "restarts": 0, "wall_ms": 1.0, "solve_ms": 1.0,
            },
        }
    )  # fmt: skip
    apply_decision(decision, state, Recording(state))
    assert seen == {"both": "gpu", "one": None}  # Slurm would try "cpu" first and wait


def test_long_or_odd_names_are_cut_and_cleaned_to_the_wires_bounds():
    odd = replace(held("j"), user="u" * 300, name="n\x1b[2J" + "x" * 2000)
    request, _ = dispatch_request(site_state(odd), shadow=False, extensions={})
    (job,) = request.queued
    assert len(job.user) == 256 and len(job.name) == 1024 and "\x1b" not in job.name
