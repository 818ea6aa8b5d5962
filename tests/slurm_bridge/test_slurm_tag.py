"""The hold tag and the node range the kit records beside it (slurm_tag)."""

from __future__ import annotations

import pytest

from cpsched.slurm_bridge.slurm_tag import HoldTag, read_tag


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        ("extsched", HoldTag(tagged=True)),
        ("extsched,max_nodes=none", HoldTag(tagged=True, max_nodes=0)),
        ("extsched,max_nodes=2", HoldTag(tagged=True, max_nodes=2)),
        ("", HoldTag(tagged=False)),
        ("other", HoldTag(tagged=False)),
        ("extschedX", HoldTag(tagged=False)),
        ("extsched,max_nodes=2,more", HoldTag(tagged=False)),
        ("extsched,max_nodes=-1", HoldTag(tagged=False)),
    ],
)
def test_the_tag_and_its_record(comment: str, expected: HoldTag) -> None:
    assert read_tag(comment, "extsched") == expected


def test_a_recorded_maximum_replaces_the_one_slurm_shows() -> None:
    """24.11 shows a held ``-n 3`` job as ``NumNodes=1-1``: the record says none was asked."""
    assert read_tag("extsched,max_nodes=none", "extsched").node_limit(1) is None
    assert read_tag("extsched,max_nodes=1", "extsched").node_limit(1) == 1
    assert read_tag("extsched,max_nodes=2", "extsched").node_limit(None) == 2
    # an older kit records nothing: what Slurm shows stands
    assert read_tag("extsched", "extsched").node_limit(1) == 1
    assert read_tag("extsched", "extsched").node_limit(None) is None
