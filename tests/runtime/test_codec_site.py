"""The site's rules survive the wire both ways (the replay over HTTP relies on it)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from cpsched.core.problem import Snapshot
from cpsched.runtime.codec import to_snapshot
from cpsched.runtime.codec_client import snapshot_to_wire
from tests.core.test_site import ruled_clusters


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=ruled_clusters())
def test_rules_round_trip(snap: Snapshot):
    translated = to_snapshot(snapshot_to_wire(snap))
    back = translated.snapshot
    assert back.site == snap.site
    assert [n.features for n in back.nodes] == [n.features for n in snap.nodes]
    # Only jobs larger than the whole idle machine are left out, each with why.
    assert all("never start" in r.reason for r in translated.rejected)
    kept = {j.id for j in back.queued}
    assert kept | {r.job_id for r in translated.rejected} == {j.id for j in snap.queued}
    expected = [j.constraints for j in snap.queued if j.id in kept]
    assert [j.constraints for j in back.queued] == expected
    assert [rj.job.exclusive for rj in back.running] == [rj.job.exclusive for rj in snap.running]
    assert back.free == snap.free


def test_jobs_whose_node_counts_no_idle_machine_meets_are_rejected_with_why():
    from cpsched.wire.schemas import SnapshotIn

    nodes = [{"name": f"n{i}", "resources": {"cpu": 4}} for i in range(2)]

    def queued(job_id: str, units: int, **counts: int) -> dict[str, object]:
        return {
            "id": job_id,
            "submit": 0,
            "time_limit": 60,
            "units": units,
            "per_unit": {"cpu": 1},
            **counts,
        }

    wire = SnapshotIn.model_validate(
        {
            "time": 10,
            "nodes": nodes,
            "queued": [
                queued("three-nodes", 3, min_nodes=3),  # 2 nodes only
                queued("two-per-node", 6, tasks_per_node=2),  # 2 x 2 < 6
                queued("one-node", 6, max_nodes=1),  # 4 cpus on a node < 6
                queued("fits", 6, min_nodes=2, tasks_per_node=3),
            ],
        }
    )
    translated = to_snapshot(wire)
    reasons = {r.job_id: r.reason for r in translated.rejected}
    assert set(reasons) == {"three-nodes", "two-per-node", "one-node"}
    assert "at least 3 nodes" in reasons["three-nodes"] and "never start" in reasons["three-nodes"]
    assert "at most 2 per node" in reasons["two-per-node"]
    assert [j.id for j in translated.snapshot.queued] == ["fits"]
