"""What runs on each node, summed once and kept up to date (``NodeUse``), is what
``used_by`` sums from scratch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core import Job
from cpsched.core.problem import NodeUse, RunningJob, used_by
from cpsched.errors import SnapshotError

NODES = 6


@st.composite
def running_jobs(draw: st.DrawFn, prefix: str) -> list[RunningJob]:
    jobs = []
    for k in range(draw(st.integers(0, 6))):
        nodes = draw(st.lists(st.integers(0, NODES - 1), min_size=1, max_size=3, unique=True))
        request = (draw(st.integers(1, 4)), draw(st.integers(0, 8)))
        allocation = tuple((node, draw(st.integers(1, 3))) for node in nodes)
        job = Job(f"{prefix}{k}", 0, 60, sum(u for _, u in allocation), request)
        jobs.append(RunningJob(job, 0, 60, allocation))
    return jobs


@settings(max_examples=200)
@given(running_jobs("a"), running_jobs("b"), running_jobs("c"), st.data())
def test_kept_up_to_date_it_is_what_used_by_sums(first, second, third, data):
    use = NodeUse.of(first + second, NODES)
    assert use.used == used_by(first + second, NODES)
    before = {node: list(row) for node, row in use.used.items()}
    gone = data.draw(st.lists(st.sampled_from(first + second), unique_by=id)) if first else []
    still = [rj for rj in first + second if all(rj is not g for g in gone)]
    after = use.changed(gone, third, NODES)
    assert after.used == used_by(still + third, NODES)
    assert use.used == before  # the earlier use is left as it was
    assert after.jobs == NodeUse.of(still + third, NODES).jobs


def test_a_job_on_an_unknown_node_is_refused():
    job = RunningJob(Job("x", 0, 60, 1, (1, 0)), 0, 60, ((NODES, 1),))
    with pytest.raises(SnapshotError, match="unknown node"):
        NodeUse.of([], NODES).changed([], [job], NODES)
