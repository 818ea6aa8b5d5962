"""What work outside the snapshot holds on a node: not offered now, still the node's own.

A bridge leaves out jobs it does not carry (completing ones, partitions left to the
workload manager) and sends what they hold as ``held_outside``. A job that needs those
nodes waits; it is never refused as larger than the idle machine.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cpsched.runtime.codec import to_snapshot
from cpsched.wire.schemas import DispatchRequest, JobIn, NodeIn


def _two_gpu_nodes(held_on_b: dict[str, int]) -> DispatchRequest:
    return DispatchRequest(
        time=1000,
        nodes=[
            NodeIn(name="a", resources={"cpu": 4, "gpu": 1}),
            NodeIn(name="b", resources={"cpu": 4, "gpu": 1}, held_outside=held_on_b),
        ],
        queued=[
            JobIn(id="wide", submit=900, time_limit=600, units=2, per_unit={"cpu": 1, "gpu": 1})
        ],
    )


def test_a_job_needing_a_node_held_outside_waits_and_is_not_refused() -> None:
    translated = to_snapshot(_two_gpu_nodes({"cpu": 2, "gpu": 1}))
    assert translated.rejected == []
    assert [job.id for job in translated.snapshot.queued] == ["wide"]
    # b offers only what is not held outside it.
    assert translated.snapshot.free == ((4, 1), (2, 0))


def test_nothing_held_outside_offers_the_whole_node() -> None:
    translated = to_snapshot(_two_gpu_nodes({}))
    assert translated.snapshot.free == ((4, 1), (4, 1))


def test_more_held_outside_than_the_capacity_is_refused_with_what_to_send() -> None:
    with pytest.raises(ValidationError, match="more than its capacity 1"):
        NodeIn(name="b", resources={"cpu": 4, "gpu": 1}, held_outside={"gpu": 2})
    with pytest.raises(ValidationError, match="more than its capacity 0"):
        NodeIn(name="b", resources={"cpu": 4}, held_outside={"fpga": 1})
