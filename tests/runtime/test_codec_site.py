"""The site's rules survive the wire both ways (the replay over HTTP relies on it)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from cpsched.core.problem import Snapshot
from cpsched.runtime.codec import snapshot_to_wire, to_snapshot
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
