import pytest

from cpsched.core import (
    Decision,
    Extension,
    Snapshot,
    Start,
    check_decision,
    check_snapshot,
    decision_violations,
)
from cpsched.errors import InvalidDecisionError, SnapshotError
from tests.factories import job, nodes, running, snapshot


def base():
    r = job("r", units=2)
    return snapshot(0, nodes(2, 2), [running(r, 0, [(0, 2)])], [job("a", units=2), job("b")])


def test_a_valid_decision_passes():
    check_decision(base(), Decision(starts=(Start("a", ((1, 2),)),)))


@pytest.mark.parametrize(
    ("starts", "expected"),
    [
        ((Start("a", ((0, 2),)),), "over capacity"),
        ((Start("a", ((1, 1),)),), "1 of 2 units"),
        ((Start("b", ((1, 1),)), Start("b", ((1, 1),))), "started twice"),
        ((Start("zzz", ((1, 1),)),), "not queued"),
        ((Start("b", ((7, 1),)),), "unknown node"),
        ((Start("a", ((1, 1), (1, 1))),), "names a node twice"),
    ],
)
def test_each_broken_rule_is_reported(starts, expected):
    violations = decision_violations(base(), Decision(starts=starts))
    assert any(expected in v for v in violations), violations
    with pytest.raises(InvalidDecisionError):
        check_decision(base(), Decision(starts=starts))


def test_an_extension_never_shortens_a_limit():
    decision = Decision(starts=(), extensions=(Extension("r", 50, "test"),))
    assert any("shorten" in v for v in decision_violations(base(), decision))


def test_snapshot_with_free_capacity_that_disagrees_is_refused():
    snap = base()
    wrong = Snapshot(
        snap.time,
        snap.resource_names,
        snap.nodes,
        snap.running,
        snap.queued,
        free=((2,), (2,)),
        free_total=(4,),
        capacity_total=(4,),
    )
    check_snapshot(snap)
    with pytest.raises(SnapshotError, match="disagrees"):
        check_snapshot(wrong)


def test_public_api_is_what_all_says():
    import cpsched.core as core

    for name in core.__all__:
        assert hasattr(core, name)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"units": 0}, "units must be >= 1"),
        ({"limit": 0}, "time limit"),
        ({"unit": -1}, "negative"),
        ({"unit": 0}, "no resource"),
    ],
)
def test_malformed_jobs_are_refused_with_the_reason(kwargs, message):
    with pytest.raises(SnapshotError, match=message):
        job("bad", **kwargs)
