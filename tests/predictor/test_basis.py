"""What each predictor says its prediction rests on (the job page shows it)."""

from __future__ import annotations

from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.margin import Margin
from cpsched.predictor.oracle import Oracle
from cpsched.predictor.profile import JobProfile
from cpsched.predictor.quantile_boost import QuantileBoost
from cpsched.predictor.walltime import WallTime
from tests.predictor._util import done, mk
from tests.predictor.test_adaboost import history


def test_last_two_names_the_run_times_it_averages():
    p = LastTwo()
    job = mk("q", user="ann", limit=9000)
    assert p.basis(job, 0) == "the requested time: the user has no finished job yet"
    p.observe(done(mk("a", user="ann"), 300, end=400))
    assert p.basis(job, 0) == "the run time of the user's one finished job (300 s)"
    p.observe(done(mk("b", user="ann"), 500, end=900))
    assert p.basis(job, 0) == (
        "the mean run time of the user's two latest finished jobs (500 s and 300 s)"
    )
    assert p.predict(job, 0) == 400


def test_the_job_profile_names_its_rule_and_matches():
    p = JobProfile()
    job = mk("q", user="ann", name="run_3", limit=1000)
    assert p.basis(job, 0) == "no matching job: the requested time"
    for i, run in enumerate((100, 200, 300)):
        p.observe(done(mk(f"r{i}", user="ann", name=f"run_{i}", limit=1000), run, end=1000 + i))
    said = p.basis(job, 0)
    assert said.startswith("the median run time of the user's newest matching 3 jobs (rule 2")
    assert p.predict(job, 0) == 200


def test_a_learned_predictor_says_which_model_or_that_it_has_none_yet():
    p = QuantileBoost(max_iter=5, min_samples_leaf=2, retrain_every=20)
    probe = mk("q", user="u1", limit=20_000)
    jobs = history(30)
    for f in jobs[:19]:
        p.observe(f)
    assert p.basis(probe, 0).startswith("before quantile-boost's first fit, the mean run time")
    for f in jobs[19:]:
        p.observe(f)
    assert p.basis(probe, 0) == (
        "a quantile-boost model fitted on 20 finished jobs (of 20 seen), reading the request "
        "and the user's recent run times"
    )


def test_fixed_answers_and_a_margin_say_so():
    job = mk("q", limit=600)
    assert WallTime().basis(job, 0) == "the requested time"
    assert Oracle({"q": 60}).basis(job, 0) == "the trace's real run time"
    assert Margin(WallTime(), 2).basis(job, 0) == (
        "2 times the requested time, at most the requested time"
    )
