"""Properties every predictor must have: no future leaks, clamped answers, rebuildable."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.core.problem import Job
from cpsched.predictor.accuracy import evaluate
from cpsched.predictor.adaboost import FEATURES, AdaBoost
from cpsched.predictor.base import Bounding, FinishedJob, Predictor
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.oracle import Oracle
from cpsched.predictor.profile import JobProfile
from cpsched.predictor.quantile_boost import QuantileBoost
from cpsched.predictor.rebuild import rebuild
from cpsched.predictor.short_jobs import ShortJobs
from cpsched.predictor.upper import UpperQuantile
from cpsched.predictor.walltime import WallTime
from tests.predictor._util import mk

FACTORIES: dict[str, Callable[[dict[str, int]], Predictor]] = {
    "wall-time": lambda _: WallTime(),
    "last-two": lambda _: LastTwo(),
    "profile": lambda _: JobProfile(),
    "profile, paper rule": lambda _: JobProfile(matches=1),
    "profile, last-two fallback": lambda _: JobProfile(fallback="last-two"),
    "oracle": Oracle,
    "adaboost": lambda _: AdaBoost(n_estimators=3, max_depth=3, retrain_every=4),
    "adaboost, every feature, ratio": lambda _: AdaBoost(
        features=FEATURES, target="ratio", n_estimators=3, max_depth=3, retrain_every=4
    ),
    "quantile-boost": lambda _: QuantileBoost(max_iter=3, min_samples_leaf=2, retrain_every=4),
    "short-jobs": lambda _: ShortJobs(max_iter=3, min_samples_leaf=2, retrain_every=4),
    "last-two, upper 0.9": lambda _: UpperQuantile(LastTwo(), 0.9, per_user=4, min_user=2),
    "quantile-boost, upper 0.8": lambda _: UpperQuantile(
        QuantileBoost(max_iter=3, min_samples_leaf=2, retrain_every=4), 0.8, recent=5
    ),
}
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class TJ:
    job: Job
    run_time: int
    wait: int = 0


@st.composite
def traces(draw: st.DrawFn) -> list[TJ]:
    n = draw(st.integers(1, 25))
    out = []
    for i in range(n):
        limit = draw(st.integers(1, 5000))
        out.append(
            TJ(
                mk(
                    f"j{i}",
                    user=draw(st.sampled_from("abc")),
                    submit=draw(st.integers(0, 3000)),
                    limit=limit,
                    cores=draw(st.integers(1, 4)),
                    name=draw(st.sampled_from(["", "run_1", "run_2", "7", "x"])),
                    queue=draw(st.sampled_from(["", "q"])),
                ),
                draw(st.integers(1, 6000)),
            )
        )
    return out


def finished(tj: TJ) -> FinishedJob:
    return FinishedJob(tj.job, tj.job.submit, tj.job.submit + tj.run_time)


def run_times(trace: list[TJ]) -> dict[str, int]:
    return {tj.job.id: tj.run_time for tj in trace}


@FAST
@given(trace=traces(), name=st.sampled_from(sorted(FACTORIES)))
def test_predictions_are_within_one_second_and_the_limit(trace, name):
    result = evaluate(trace, FACTORIES[name](run_times(trace)))
    for tj, p in zip(trace, result["predictions"].tolist(), strict=True):
        assert 1 <= p <= tj.job.time_limit


@FAST
@given(trace=traces(), name=st.sampled_from(sorted(FACTORIES)))
def test_an_upper_estimate_lies_between_the_central_one_and_the_limit(trace, name):
    p = FACTORIES[name](run_times(trace))
    for tj in sorted(trace, key=lambda tj: tj.job.submit + tj.run_time):
        if isinstance(p, Bounding):
            assert p.predict(tj.job, 0) <= p.upper(tj.job, 0) <= tj.job.time_limit
            assert p.upper_basis(tj.job, 0)
        p.observe(finished(tj))


@FAST
@given(trace=traces(), name=st.sampled_from(sorted(FACTORIES)), data=st.data())
def test_removing_jobs_that_end_after_t_changes_no_prediction_at_t(trace, name, data):
    chosen = data.draw(st.sampled_from(trace))
    t = data.draw(st.integers(chosen.job.submit, 9000))
    # The chosen job is predicted at its submit time, at or before t; every other job that
    # ends after t goes: it may have run, been predicted or queued, but not finished by t.
    reduced = [tj for tj in trace if tj.job.submit + tj.run_time <= t or tj is chosen]
    full = evaluate(trace, FACTORIES[name](run_times(trace)))
    part = evaluate(reduced, FACTORIES[name](run_times(trace)))
    assert part["predictions"][reduced.index(chosen)] == full["predictions"][trace.index(chosen)]


@FAST
@given(trace=traces(), name=st.sampled_from(sorted(FACTORIES)), data=st.data())
def test_history_after_t_is_invisible_and_predict_and_basis_have_no_side_effects(trace, name, data):
    t = data.draw(st.integers(0, 9000))
    target = mk("target", user="a", submit=t, limit=4000, name="run_3", queue="q")
    past = sorted(
        (finished(tj) for tj in trace if tj.job.submit + tj.run_time <= t), key=lambda f: f.end
    )
    future = [tj.job for tj in trace if tj.job.submit + tj.run_time > t]
    answers = []
    for noisy in (False, True):
        p = FACTORIES[name]({**run_times(trace), "target": 100})
        for f in past:
            p.observe(f)
            if noisy:  # predicting (or explaining) other jobs must not change anything
                for job in future:
                    p.predict(job, f.end)
                    assert p.basis(job, f.end)  # type: ignore[attr-defined]
        answers.append(p.predict(target, t))
    assert answers[0] == answers[1]


@FAST
@given(trace=traces(), name=st.sampled_from(sorted(FACTORIES)), data=st.data())
def test_rebuild_equals_incremental_observe(trace, name, data):
    # Distinct end times: rebuild's order is then the incremental order whatever the input order.
    hist = [FinishedJob(tj.job, i, i + tj.run_time * 100 + 1) for i, tj in enumerate(trace)]
    incremental = FACTORIES[name](run_times(trace))
    for f in sorted(hist, key=lambda f: f.end):
        incremental.observe(f)
    shuffled = data.draw(st.permutations(hist))
    rebuilt = rebuild(FACTORIES[name](run_times(trace)), shuffled)
    for tj in trace:
        assert incremental.predict(tj.job, 10**9) == rebuilt.predict(tj.job, 10**9)
        if isinstance(incremental, Bounding):
            assert incremental.upper(tj.job, 10**9) == rebuilt.upper(tj.job, 10**9)  # type: ignore[attr-defined]
