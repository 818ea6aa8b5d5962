"""What a cluster keeps across a restart: written only when it changed, read back
whatever a stored row holds."""

from __future__ import annotations

from cpsched.core.state import Guarantee
from cpsched.service.kept_state import KeptState
from cpsched.service.lease import WriterLease

PROMISES = {"j1": Guarantee(1100, 1100, (("n1", 4),), 1000)}


def held(by: str, renewed: float) -> WriterLease:
    return WriterLease(holder=by, renewed=renewed)


def test_the_same_guarantees_and_holder_are_written_again_only_as_the_lease_ages() -> None:
    stored = KeptState.of(PROMISES, held("a", 50.0), wall=1_000_000.0, mono=50.0)
    renewed = KeptState.of(PROMISES, held("a", 54.0), wall=1_000_004.0, mono=54.0)
    assert not renewed.differs(stored, lease_s=60)  # 4 s < a quarter of 60 s
    aged = KeptState.of(PROMISES, held("a", 66.0), wall=1_000_016.0, mono=66.0)
    assert aged.differs(stored, lease_s=60)
    moved = {"j1": Guarantee(1050, 1050, (("n1", 4),), 1000)}
    assert KeptState.of(moved, held("a", 51.0), 1_000_001.0, 51.0).differs(stored, 60)
    assert KeptState.of(PROMISES, held("b", 51.0), 1_000_001.0, 51.0).differs(stored, 60)
    assert KeptState.of(PROMISES, held("a", 50.0), 1_000_000.0, 50.0).differs(None, 60)


def test_a_stored_row_gives_back_the_guarantees_and_the_lease_time_left() -> None:
    kept = KeptState.of(PROMISES, held("a", 50.0), wall=1_000_000.0, mono=50.0)
    row = KeptState.from_row(kept.guarantee_dicts(), kept.writer, kept.writer_seen)
    assert row == kept
    guarantees: dict[str, Guarantee] = {}
    lease = WriterLease()
    row.restore(guarantees, lease, wall=1_000_010.0, mono=7.0)  # restarted: a new clock
    assert guarantees == PROMISES
    assert (lease.holder, lease.renewed) == ("a", -3.0)  # seen 10 s ago


def test_rows_that_do_not_read_as_guarantees_are_left_out() -> None:
    good = KeptState.of(PROMISES, WriterLease(), 0.0, 0.0).guarantee_dicts()
    junk = [
        {"job": "x"},
        {"job": "y", "start_by": "soon", "start": 1, "given": 1, "placement": []},
        "not a dict",
        {**good[0], "placement": [["n1"]]},
    ]
    row = KeptState.from_row([*junk, *good], None, None)
    assert [g[0] for g in row.guarantees] == ["j1"]
    lease = WriterLease()
    row.restore({}, lease, 0.0, 0.0)
    assert lease.holder is None
