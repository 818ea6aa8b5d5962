"""Invariants of the service's path from wire snapshot to decision, on random snapshots
with drained nodes, over-committed nodes and jobs asking for unknown types: no node is
ever over-filled, no running job is displaced, and no queued job is lost (each is
started, rejected with a reason, or still waiting)."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.core import Decision, Node, Start, decision_violations, make_snapshot
from cpsched.runtime.codec import TranslationMemo, to_snapshot
from cpsched.runtime.codec_client import decision_from_wire
from cpsched.runtime.codec_decision import to_decision_out
from cpsched.runtime.policy import Policy
from cpsched.service.cluster import ClusterRuntime
from cpsched.wire.deltas import (
    HeldSnapshot,
    apply_delta,
    delta_between,
    delta_digest,
    snapshot_digest,
)
from cpsched.wire.schemas import DecisionOut, DispatchRequest, JobIn, RunningJobIn

TYPES = ("cpu", "mem", "gpu")


@st.composite
def wire_snapshots(draw: st.DrawFn) -> DispatchRequest:
    n_nodes = draw(st.integers(1, 6))
    nodes = []
    for i in range(n_nodes):
        resources = {"cpu": draw(st.integers(1, 8)), "mem": draw(st.integers(0, 4)) * 1000}
        if draw(st.booleans()):
            resources["gpu"] = draw(st.integers(1, 2))
        state = draw(st.sampled_from(["up", "up", "up", "drain", "down"]))
        node = {"name": f"n{i}", "resources": resources, "state": state}
        if draw(st.integers(0, 3)) == 0:  # work outside the snapshot (slurmd's, another's)
            node["held_outside"] = {"cpu": draw(st.integers(1, resources["cpu"]))}
        nodes.append(node)
    running = []
    for j in range(draw(st.integers(0, 4))):
        node = draw(st.integers(0, n_nodes - 1))
        units = draw(st.integers(1, 3))
        # Not checked against capacity: real clusters over-commit, the service must cope.
        running.append(
            {
                "id": f"r{j}", "submit": 0, "start": draw(st.integers(0, 90)),
                "time_limit": draw(st.integers(1, 500)), "units": units,
                "per_unit": {"cpu": 1}, "allocation": {f"n{node}": units},
                "exclusive": draw(st.integers(0, 3)) == 0,
            }
        )  # fmt: skip
    queued = []
    for k in range(draw(st.integers(0, 8))):
        per_unit = {"cpu": draw(st.integers(1, 4))}
        extra = draw(st.sampled_from([None, "gpu", "mem", "fpga"]))
        if extra == "mem":
            per_unit["mem"] = 500
        elif extra is not None:
            per_unit[extra] = 1
        queued.append(
            {
                "id": f"q{k}", "user": f"u{k % 2}", "submit": draw(st.integers(0, 100)),
                "time_limit": draw(st.integers(1, 1000)), "units": draw(st.integers(1, 6)),
                "per_unit": per_unit,
            }
        )  # fmt: skip
    return DispatchRequest.model_validate(
        {"time": 100, "nodes": nodes, "running": running, "queued": queued}
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wire=wire_snapshots(), dispatcher=st.sampled_from(["fcfs", "sjf", "easy"]))
def test_no_overfill_and_nothing_lost(wire, dispatcher):
    translated = to_snapshot(wire)
    snapshot = translated.snapshot
    runtime = ClusterRuntime("c", 1, Policy(dispatcher=dispatcher))
    runtime.book.sync(snapshot, {})
    durations = runtime.book.durations
    decision = runtime.dispatcher.decide(snapshot, durations)
    assert decision_violations(snapshot, decision) == []

    started = {s.job_id for s in decision.starts}
    rejected = {r.job_id for r in translated.rejected}
    waiting = {job.id for job in snapshot.queued} - started
    assert started | rejected | waiting == {job["id"] for job in wire.model_dump()["queued"]}
    assert not started & rejected
    assert all(r.reason for r in translated.rejected)

    # New jobs only go to nodes that are up, and never past a node's capacity.
    names = snapshot.resource_names
    up = {n.name for n in wire.nodes if n.state == "up"}
    used = {n.name: dict.fromkeys(names, 0) for n in wire.nodes}
    for rj in wire.running:
        for node, units in rj.allocation.items():
            for r, amount in rj.per_unit.items():
                used[node][r] += units * amount
    by_id = {job.id: job for job in snapshot.queued}
    for start in decision.starts:
        job = by_id[start.job_id]
        for node_index, units in start.allocation:
            node = snapshot.nodes[node_index].name
            assert node in up
            for r, name in enumerate(names):
                used[node][name] += units * job.unit_request[r]
    receiving = {snapshot.nodes[i].name for s in decision.starts for i, _ in s.allocation}
    for node in wire.nodes:
        if node.name in receiving:
            # A node that receives a job was up and not over-committed: within capacity.
            for name in names:
                assert used[node.name][name] <= node.resources.get(name, 0)


def test_a_start_that_may_drift_says_so_on_the_wire_and_back():
    snapshot = make_snapshot(0, ("cpu",), (Node("a", (4,)), Node("b", (4,))), (), ())
    decision = Decision(starts=(Start("x", ((0, 3), (1, 2)), may_drift=True),))
    out = to_decision_out(
        cluster="c",
        snapshot=snapshot,
        decision=decision,
        predicted={"x": 60},
        rejected=[],
        notes=[],
        wall_ms=1.0,
        solve_ms=1.0,
        dry_run=False,
        decision_id=1,
    )
    assert out.starts[0].may_drift and out.starts[0].allocation == {"a": 3, "b": 2}
    back = decision_from_wire(DecisionOut.model_validate_json(out.model_dump_json()), snapshot)
    assert back.starts == decision.starts


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(wire_snapshots(), min_size=2, max_size=4), st.data())
def test_a_translation_memo_changes_nothing_but_the_work(wires, data):
    """Snapshots translated one after the other with a memo (as a cluster's are) give what
    each gives on its own: jobs the next snapshot repeats reuse their translation only
    while the nodes, partitions and reservations are the same."""
    memo = TranslationMemo()
    previous = None
    for wire in wires:
        # The next snapshot often repeats some of the previous one's jobs, on the same
        # machine or (a node added, drained...) on another.
        if previous is not None and previous.queued and data.draw(st.booleans()):
            kept = {job.id: job for job in data.draw(st.lists(st.sampled_from(previous.queued)))}
            new = [job for job in wire.queued if job.id not in kept]
            update: dict[str, object] = {"queued": [*kept.values(), *new]}
            if data.draw(st.booleans()):
                # The very same lists, as a delta's merged snapshot keeps them: the
                # machine's translation is reused, with some of its running jobs gone.
                still = [rj for rj in previous.running if data.draw(st.booleans())]
                update |= {
                    "nodes": previous.nodes,
                    "partitions": previous.partitions,
                    "reservations": previous.reservations,
                    "running": still,
                }
            wire = wire.model_copy(update=update)
        steps = [wire]
        if previous is not None and wire.nodes is previous.nodes:
            # ...and then the jobs gone come back: what runs on each node, kept from
            # call to call, must grow as it shrank.
            steps.append(wire.model_copy(update={"running": previous.running}))
        for step in steps:
            fresh, remembered = to_snapshot(step), to_snapshot(step, memo)
            assert remembered.snapshot == fresh.snapshot
            # The codec hands make_snapshot what runs on each node: the same free
            # capacity as make_snapshot sums from the allocations itself.
            s = fresh.snapshot
            summed = make_snapshot(s.time, s.resource_names, s.nodes, s.running, s.queued, s.site)
            assert summed == s
            assert remembered.rejected == fresh.rejected
            assert remembered.notes == fresh.notes
        previous = wire


def test_a_translation_memo_is_not_reused_when_the_resources_come_in_another_order():
    # Equal nodes (dicts compare without order) but another order of resource types: a
    # remembered job's amounts would be aligned with the old order (asking for an fpga).
    def request(resources: dict[str, int]) -> DispatchRequest:
        nodes = [{"name": "a", "resources": resources}, {"name": "b", "resources": {"cpu": 4}}]
        queued = [
            {"id": "j", "submit": 1, "time_limit": 60, "units": 1, "per_unit": {"cpu": 1, "gpu": 1}}
        ]
        return DispatchRequest.model_validate({"time": 1000, "nodes": nodes, "queued": queued})

    first, second = (
        request({"cpu": 4, "gpu": 1, "fpga": 1}),
        request({"cpu": 4, "fpga": 1, "gpu": 1}),
    )
    assert first.nodes == second.nodes
    memo = TranslationMemo()
    to_snapshot(first, memo)
    assert to_snapshot(second, memo).snapshot == to_snapshot(second).snapshot


def test_a_machine_translated_once_still_sees_what_runs_on_it_each_call():
    """The same node list in call after call (a delta's merged snapshot) reuses the
    nodes' translation, but a node that went over-committed is noted and full, and a
    drained node running a job offers nothing, in every call."""
    nodes = [
        {"name": "a", "resources": {"cpu": 4}},
        {"name": "b", "resources": {"cpu": 4}, "state": "drain"},
        {"name": "c", "resources": {"cpu": 4}},
    ]
    first = DispatchRequest.model_validate({"time": 100, "nodes": nodes})
    busy = [
        {"id": "r1", "submit": 0, "start": 50, "time_limit": 500, "units": 6,
         "per_unit": {"cpu": 1}, "allocation": {"a": 6}},
        {"id": "r2", "submit": 0, "start": 50, "time_limit": 500, "units": 1,
         "per_unit": {"cpu": 1}, "allocation": {"b": 1}},
    ]  # fmt: skip
    memo = TranslationMemo()
    assert to_snapshot(first, memo).snapshot.free == ((4,), (0,), (4,))
    for time in (110, 120):
        again = first.model_copy(
            update={"time": time, "running": [RunningJobIn.model_validate(r) for r in busy]}
        )
        assert again.nodes is first.nodes
        translated = to_snapshot(again, memo)
        assert translated.snapshot.free == ((0,), (0,), (4,))
        assert translated.notes == ["node a is over-committed; treated as full"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wire_snapshots(), st.randoms(use_true_random=False))
def test_a_merged_snapshot_translated_from_its_delta_is_the_whole_translation(first, rng):
    """The service translates a delta's merged snapshot from what the delta changed
    (:class:`~cpsched.wire.deltas.RunningDelta`): over any run of snapshots with jobs
    ending, extended, requeued and started, it gets the snapshot, rejections, notes and
    running changes a translation of every job gets."""
    node_names = [node.name for node in first.nodes]
    request = first
    held_here, held_there = (HeldSnapshot.of(request, snapshot_digest(request)),) * 2
    memo, plain = TranslationMemo(), TranslationMemo()
    to_snapshot(request, memo)
    to_snapshot(request, plain)
    fresh_ids = itertools.count()
    for _ in range(6):
        running: list[RunningJobIn] = []
        queued: list[JobIn] = list(request.queued)
        for rj in request.running:
            roll = rng.random()
            if roll < 0.2:
                continue  # ended
            if roll < 0.3:  # requeued
                queued.append(JobIn.model_validate(rj.model_dump(include=set(JobIn.model_fields))))
                continue
            if roll < 0.45:
                rj = rj.model_copy(
                    update={"time_limit": rj.time_limit + 60, "extensions": rj.extensions + 1}
                )
            running.append(rj)
        for job in list(queued):
            if rng.random() < 0.3:  # started
                queued.remove(job)
                fields = job.model_dump() | {"start": request.time + 10, "units": 1}
                fields["per_unit"] = {"cpu": 1}
                allocation = {rng.choice(node_names): 1}
                running.append(RunningJobIn.model_validate(fields | {"allocation": allocation}))
        queued += [
            JobIn.model_validate(
                {
                    "id": f"new{next(fresh_ids)}",
                    "submit": request.time,
                    "time_limit": 60,
                    "units": 1,
                    "per_unit": {"cpu": 1},
                }
            )
            for _ in range(rng.randrange(3))
        ]
        rng.shuffle(queued)
        request = request.model_copy(
            update={"time": request.time + 10, "running": running, "queued": queued}
        )
        delta = delta_between(held_there, request)
        assert delta is not None
        held_there = HeldSnapshot.of(request, delta_digest(delta))
        held_here = apply_delta(held_here, delta)
        merged = held_here.request
        from_delta = to_snapshot(merged, memo, held_here.changes)
        whole = to_snapshot(merged, plain)
        assert from_delta.snapshot == whole.snapshot == to_snapshot(merged).snapshot
        assert (from_delta.rejected, from_delta.notes) == (whole.rejected, whole.notes)
        assert from_delta.changes is not None and whole.changes is not None
        assert {rj.job.id for rj in from_delta.changes.added} == {
            rj.job.id for rj in whole.changes.added
        }
        assert from_delta.changes.gone == whole.changes.gone
