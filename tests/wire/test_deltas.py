"""Snapshot deltas: what a client sends and what the service makes of it agree."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.wire.deltas import (
    DeltaError,
    HeldSnapshot,
    StaleBaseError,
    apply_delta,
    delta_between,
    snapshot_digest,
)
from cpsched.wire.schemas import DispatchRequest, SnapshotDeltaIn

NODES = [{"name": f"n{i}", "resources": {"cpu": 4}} for i in range(3)]


def wire_job(job_id: str, limit: int, running: bool) -> dict[str, object]:
    job: dict[str, object] = {
        "id": job_id,
        "submit": 0,
        "time_limit": limit,
        "units": 1,
        "per_unit": {"cpu": 1},
    }
    return {**job, "start": 5, "allocation": {"n0": 1}} if running else job


# A snapshot: each of 12 possible jobs absent, queued or running, with one of two limits.
jobs_state = st.lists(
    st.tuples(st.sampled_from(["absent", "queued", "running"]), st.sampled_from([60, 600])),
    min_size=12,
    max_size=12,
)


def request(
    time: int, states: list[tuple[str, int]], nodes: list[dict[str, object]]
) -> DispatchRequest:
    return DispatchRequest.model_validate(
        {
            "time": time,
            "nodes": nodes,
            "queued": [
                wire_job(f"j{k}", lim, False) for k, (s, lim) in enumerate(states) if s == "queued"
            ],
            "running": [
                wire_job(f"j{k}", lim, True) for k, (s, lim) in enumerate(states) if s == "running"
            ],
        }
    )


def jobs_of(r: DispatchRequest) -> tuple[dict[str, object], dict[str, object]]:
    return {j.id: j for j in r.queued}, {j.id: j for j in r.running}


@settings(max_examples=150, deadline=None)
@given(jobs_state, jobs_state, st.booleans())
def test_a_delta_applied_to_its_base_is_the_next_snapshot(before, after, new_nodes):
    base = request(100, before, NODES)
    held = HeldSnapshot.of(base, snapshot_digest(base))
    nodes = [*NODES, {"name": "n9", "resources": {"cpu": 8}}] if new_nodes else NODES
    target = request(110, after, nodes)
    delta = delta_between(held, target)
    # What goes over the wire: only the jobs that changed, and the nodes when they did.
    changed = sum(
        b != a and a[0] + b[0] != "absentabsent" for b, a in zip(before, after, strict=True)
    )
    assert len(delta.queued) + len(delta.running) + len(delta.gone) == changed
    assert (delta.nodes is not None) == new_nodes
    merged = apply_delta(held, SnapshotDeltaIn.model_validate_json(delta.model_dump_json()))
    made = merged.request
    # The same jobs in the same order (equal submit times keep the snapshot's order).
    assert (made.queued, made.running) == (target.queued, target.running)
    assert (made.time, made.nodes, made.partitions, made.reservations) == (
        target.time, target.nodes, target.partitions, target.reservations,
    )  # fmt: skip
    # The merged snapshot is a valid base in turn: the next delta applies to it.
    again = apply_delta(merged, delta_between(merged, base.model_copy(update={"time": 120})))
    assert jobs_of(again.request) == jobs_of(base)


def test_an_unchanged_snapshot_keeps_its_digest():
    base = request(100, [("queued", 60)] * 3, NODES)
    held = HeldSnapshot.of(base, snapshot_digest(base))
    assert apply_delta(held, delta_between(held, base)).digest == held.digest
    later = apply_delta(held, delta_between(held, base.model_copy(update={"time": 101})))
    assert later.digest != held.digest


def test_a_delta_on_another_base_or_contradicting_its_base_is_refused():
    base = request(100, [("queued", 60), ("running", 60)], NODES)
    held = HeldSnapshot.of(base, snapshot_digest(base))
    fields = {"time": 110}
    with pytest.raises(StaleBaseError, match="send the whole snapshot"):
        apply_delta(held, SnapshotDeltaIn(base="0" * 64, **fields))
    with pytest.raises(StaleBaseError):
        apply_delta(None, SnapshotDeltaIn(base=held.digest, **fields))
    with pytest.raises(DeltaError, match="'j7' is listed as gone but is not in the base"):
        apply_delta(held, SnapshotDeltaIn(base=held.digest, gone=["j7"], **fields))
    twice = DispatchRequest.model_validate(
        {"time": 1, "nodes": NODES, "queued": [wire_job("j0", 600, False)]}
    )
    with pytest.raises(DeltaError, match="'j0' is listed twice"):
        apply_delta(
            held, SnapshotDeltaIn(base=held.digest, gone=["j0"], queued=twice.queued, **fields)
        )


def test_a_requeued_job_keeps_its_place_in_the_order():
    # A and B were submitted at the same second; A ran and was requeued. Merged by id, A
    # would come after B; the whole snapshot lists A first, and FCFS would start B.
    def snap(time: int, queued: list[str], running: list[str]) -> DispatchRequest:
        jobs = {"queued": [wire_job(j, 60, False) for j in queued]}
        jobs["running"] = [wire_job(j, 60, True) for j in running]
        return DispatchRequest.model_validate({"time": time, "nodes": NODES, **jobs})

    first = snap(100, ["B"], ["A"])
    held = HeldSnapshot.of(first, snapshot_digest(first))
    requeued = snap(110, ["A", "B"], [])
    delta = delta_between(held, requeued)
    assert delta is not None and delta.order == ["A", "B"]
    assert [j.id for j in apply_delta(held, delta).request.queued] == ["A", "B"]
    # Without a change of order, no order is sent.
    assert delta_between(held, snap(110, ["B"], ["A"])).order is None
    with pytest.raises(DeltaError, match="does not name every job"):
        apply_delta(held, delta.model_copy(update={"order": ["A"]}))


def test_a_snapshot_listing_a_job_twice_is_sent_whole():
    base = request(100, [("queued", 60)], NODES)
    held = HeldSnapshot.of(base, snapshot_digest(base))
    whole = base.model_dump()
    twice = DispatchRequest.model_validate({**whole, "running": [wire_job("j0", 60, True)]})
    assert delta_between(held, twice) is None


@pytest.mark.parametrize(
    "order",
    [
        ["A", "A", "R"],  # A named twice, B left out: B would be lost
        ["A", "B", "A"],  # the running one left out
        ["A", "B", "R", "R"],  # too long
        ["R", "A", "B"],  # running first: the general order, still valid
    ],
)
def test_an_order_must_name_every_merged_job_exactly_once(order: list[str]) -> None:
    def jobs(queued: list[str], running: list[str]) -> dict[str, object]:
        return {
            "queued": [wire_job(j, 60, False) for j in queued],
            "running": [wire_job(j, 60, True) for j in running],
        }

    base = DispatchRequest.model_validate({"time": 100, "nodes": NODES, **jobs(["B"], ["R"])})
    held = HeldSnapshot.of(base, snapshot_digest(base))
    delta = SnapshotDeltaIn(base=held.digest, time=110, order=order, **jobs(["A"], []))
    if sorted(order) != ["A", "B", "R"]:
        with pytest.raises(DeltaError, match="does not name every job"):
            apply_delta(held, delta)
        return
    merged = apply_delta(held, delta).request
    assert [j.id for j in merged.queued] == ["A", "B"]
    assert [j.id for j in merged.running] == ["R"]
