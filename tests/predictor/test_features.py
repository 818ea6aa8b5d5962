"""AdaBoost's feature rows: known answers on hand-made histories, and "as of" a time."""

from __future__ import annotations

import math

import pytest

from cpsched.predictor._features import FEATURES, FeatureState
from tests.predictor._util import done, mk

HISTORY_FEATURES = (
    "last", "last_two", "recent_mean", "recent_median", "recent_min", "recent_max",
    "recent_ratio", "profile", "profile_rule",
)  # fmt: skip


def state(features=FEATURES, recent: int = 3) -> FeatureState:
    return FeatureState(features, recent=recent, profile_matches=3)


def features_of(s: FeatureState, job, before=None) -> dict[str, float]:
    return dict(zip(s.features, s.row(job, before), strict=True))


def test_a_user_without_history_gets_the_requested_time_and_rule_6():
    row = features_of(state(), mk("j", limit=700))
    assert {f: row[f] for f in HISTORY_FEATURES} == {
        **dict.fromkeys(HISTORY_FEATURES, 700),
        "profile_rule": 6,
    }


def test_recent_run_time_statistics():
    s = state(recent=3)
    # Ends 100..400; run times 50, 400, 10, 30 with requested 100, 800, 100, 300.
    for i, (run, limit) in enumerate([(50, 100), (400, 800), (10, 100), (30, 300)]):
        s.observe(done(mk(f"j{i}", limit=limit, name="a"), run, end=100 * (i + 1)), i)
    row = features_of(s, mk("n", limit=1000, name="b"))
    # The three newest are 30, 10, 400 (newest first); the oldest (50) is past ``recent``.
    assert row["last"] == 30
    assert row["last_two"] == 20
    assert row["recent_mean"] == pytest.approx(440 / 3)
    assert row["recent_median"] == 30
    assert row["recent_min"] == 10
    assert row["recent_max"] == 400
    # Ratios 0.1, 0.1 and 0.5: the user uses about 23% of what they ask.
    assert row["recent_ratio"] == pytest.approx(1000 * 0.7 / 3)
    # No job named "b": the profile feature falls back to last-two.
    assert (row["profile"], row["profile_rule"]) == (20, 6)


def test_profile_features_follow_the_rules():
    s = state()
    s.observe(done(mk("a", name="run_1", limit=500, cores=2), 40, end=100), 0)
    s.observe(done(mk("b", name="run_2", limit=500, cores=2), 60, end=200), 1)
    s.observe(done(mk("c", name="other", limit=500, cores=2), 999, end=300), 2)
    rule_1 = features_of(s, mk("n", name="run_1", limit=500, cores=2))
    assert (rule_1["profile"], rule_1["profile_rule"]) == (40, 1)
    rule_2 = features_of(s, mk("n", name="run_7", limit=500, cores=2))
    assert (rule_2["profile"], rule_2["profile_rule"]) == (50, 2)  # median of 40 and 60


def test_before_sees_only_jobs_that_had_ended():
    s = state()
    for i, run in enumerate([10, 20, 30]):
        s.observe(done(mk(f"j{i}", name="x"), run, end=100 * (i + 1)), i)
    job = mk("n", name="x", limit=1000)
    assert features_of(s, job, before=250)["last"] == 20
    assert features_of(s, job, before=250)["profile"] == 15
    assert features_of(s, job, before=50)["last"] == 1000  # nothing had ended yet
    assert features_of(s, job)["last"] == 30


def test_job_features():
    s = state()
    s.observe(done(mk("a", user="x", queue="q1", name="run_1"), 5), 0)
    job = mk("n", user="y", submit=3 * 86_400 + 5 * 3_600 + 7, limit=400, cores=8, mem=64)
    job_b = mk("m", user="x", queue="q1", name="run_9")
    row, row_b = features_of(s, job), features_of(s, job_b)
    # The request is the whole job's: 8 units of 64 memory each.
    assert (row["cores"], row["mem"], row["time_limit"]) == (8, 512, 400)
    assert row["log_time_limit"] == pytest.approx(math.log(400))
    assert (row["hour"], row["weekday"]) == (5, 3)
    # Codes in order of first appearance; unseen values get the next unused code.
    assert (row_b["user"], row_b["queue"], row_b["name"]) == (0, 0, 0)
    assert (row["user"], row["queue"], row["name"]) == (1, 1, 1)


@pytest.mark.parametrize(
    ("node", "per_unit", "cores", "mem"),
    [
        ({"cpu": 8, "gpu": 4}, {"cpu": 2, "gpu": 1}, 6, 0),  # no memory: not the GPU count
        ({"mem": 64000, "gpu": 4, "cpu": 16}, {"gpu": 1, "mem": 1000, "cpu": 4}, 12, 3000),
    ],
)
def test_cores_and_memory_are_read_by_name(node, per_unit, cores, mem):
    from cpsched.runtime.codec import to_snapshot
    from cpsched.wire.schemas import DispatchRequest

    wire = DispatchRequest.model_validate(
        {
            "time": 0,
            "nodes": [{"name": "n1", "resources": node}],
            "queued": [
                {"id": "j", "user": "u", "submit": 0, "time_limit": 60, "units": 3,
                 "per_unit": per_unit}
            ],
        }
    )  # fmt: skip
    (job,) = to_snapshot(wire).snapshot.queued
    row = features_of(state(features=("cores", "mem")), job)
    assert row == {"cores": cores, "mem": mem}
