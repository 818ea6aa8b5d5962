"""The upper estimate: the central prediction times a quantile of its own errors."""

from __future__ import annotations

import pytest

from cpsched.errors import ConfigError
from cpsched.predictor.base import Bounding, Explaining
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.margin import Margin
from cpsched.predictor.oracle import Oracle
from cpsched.predictor.upper import UpperQuantile
from cpsched.predictor.walltime import WallTime
from cpsched.runtime.policy import Policy
from tests.predictor._util import done, mk


def test_the_central_estimate_is_the_inner_prediction_and_the_upper_its_error_quantile():
    p = UpperQuantile(WallTime(), 0.9, min_user=2)
    # The request is 1000 s; the user's jobs ran 100, 200, ..., 1000 s: ratios 0.1 ... 1.
    for i in range(1, 11):
        p.observe(done(mk(f"a{i}", limit=1000, submit=i * 10_000), i * 100))
    job = mk("x", limit=1000)
    assert p.predict(job, 0) == 1000
    assert p.upper(job, 0) == 1000  # no ratio above 1: never below the central estimate


def test_a_user_whose_jobs_outrun_their_predictions_gets_a_longer_upper_estimate():
    p = UpperQuantile(LastTwo(), 0.5, min_user=3)
    # Each job runs twice the mean of the two before it: the ratios are 2.
    runs = [100, 100, 200, 300, 500]
    for i, run in enumerate(runs):
        p.observe(done(mk(f"a{i}", limit=100_000, submit=i * 10_000), run))
    job = mk("x", limit=100_000)
    assert p.predict(job, 0) == 400  # (300 + 500) / 2
    ratios = sorted(p.users_["u"].ordered)
    assert ratios == [0.001, 1.0, 2.0, 2.0, 2.0]  # the first job: no history, the request
    assert p.upper(job, 0) == 800  # the median ratio, 2
    assert p.upper(mk("y", limit=600), 0) == 600  # never past the request


def test_a_user_with_few_jobs_gets_everyone_s_ratios():
    p = UpperQuantile(LastTwo(), 0.9, min_user=3)
    for i in range(4):  # user a: ratios 0.001 (no history: the request), 1, 3, 3
        p.observe(done(mk(f"a{i}", limit=100_000, submit=i * 10_000), [100, 100, 300, 600][i]))
    p.observe(done(mk("b0", user="b", limit=50_000, submit=50_000), 1000))
    newcomer = mk("y", user="b", limit=100_000)
    # b has one finished job (ratio 1000 / 50,000 = 0.02): everyone's 0.9 quantile, 3.
    assert p.predict(newcomer, 0) == 1000
    assert p.upper(newcomer, 0) == 3000
    assert "all users' 5 latest (the user has 1)" in p.upper_basis(newcomer, 0)


def test_old_ratios_leave_the_window():
    p = UpperQuantile(LastTwo(), 0.99, per_user=3, min_user=1)
    for i, run in enumerate([100, 100, 1000, 100, 100, 100, 100]):
        p.observe(done(mk(f"a{i}", limit=100_000, submit=i * 10_000), run))
    assert len(p.users_["u"]) == 3
    assert max(p.users_["u"].ordered) == 1  # the tenfold outlier is out of the user's window
    assert len(p.overall_.ordered) == 7


def test_it_explains_both_estimates_and_names_itself():
    p = UpperQuantile(Margin(LastTwo(), 2), 0.8)
    p.observe(done(mk("a"), 100))
    assert isinstance(p, Bounding) and isinstance(p, Explaining)
    assert p.name == "last-twox2+upper0.8"
    job = mk("x")
    assert p.basis(job, 0).startswith("2 times the run time of the user's one finished job")
    assert p.upper_basis(job, 0).startswith("1.00 times 2 times")
    assert "0.8 quantile" in p.upper_basis(job, 0)


def test_its_memory_covers_the_inner_predictor_and_its_own_windows():
    p = UpperQuantile(LastTwo(), 0.9, per_user=20, recent=2000)
    # Last-two's two jobs before each of the user's 20 latest, for its prediction then.
    assert (p.memory.per_user, p.memory.recent, p.memory.exact) == (22, 2000, False)


@pytest.mark.parametrize(
    "kwargs", [{"quantile": 0}, {"quantile": 1}, {"quantile": 0.9, "min_user": 30}]
)
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ConfigError, match="upper estimate"):
        UpperQuantile(LastTwo(), **kwargs)


def test_the_policy_adds_an_upper_estimate_only_when_asked_and_never_to_the_oracle():
    assert isinstance(Policy(prediction_upper_quantile=0.9).make_predictor(), UpperQuantile)
    assert not isinstance(Policy().make_predictor(), Bounding)
    oracle = Policy(predictor="oracle", prediction_upper_quantile=0.9)
    assert isinstance(oracle.make_predictor(run_times={"j": 5}), Oracle)


def test_a_rebuild_told_each_users_count_keeps_the_same_ratios_and_predicts_only_those():
    import random
    from collections import Counter

    rng = random.Random(3)
    users = [f"u{k}" for k in range(12)]
    jobs = []
    for i in range(600):
        job = mk(f"j{i}", user=rng.choice(users), limit=100_000, submit=i * 100)
        jobs.append(done(job, rng.randrange(50, 5_000), end=i * 100 + 10_000))

    class Counting(LastTwo):
        calls = 0

        def predict(self, job, t):
            Counting.calls += 1
            return super().predict(job, t)

    def rebuilt(told: bool) -> tuple[UpperQuantile, int]:
        Counting.calls = 0
        p = UpperQuantile(Counting(), 0.9, per_user=10, recent=50)
        counts = Counter(f.job.user for f in jobs) if told else None
        with p.rebuilding(len(jobs), counts):
            for f in jobs:
                p.observe(f)
        return p, Counting.calls

    (told, asked), (plain, all_asked) = rebuilt(True), rebuilt(False)
    assert all_asked == 600
    assert asked < 200  # the 50 latest and each user's 10 latest, overlapping
    assert list(told.overall_.arrived) == list(plain.overall_.arrived)
    assert {u: list(r.arrived) for u, r in told.users_.items()} == {
        u: list(r.arrived) for u, r in plain.users_.items()
    }
    probe = mk("x", user="u1", limit=100_000)
    assert told.upper(probe, 70_000) == plain.upper(probe, 70_000)
    # Outside a rebuild every job's ratio is worked out again.
    Counting.calls = 0
    told.observe(done(mk("late", user="u1", limit=100_000, submit=70_000), 99, end=80_000))
    assert Counting.calls == 1
