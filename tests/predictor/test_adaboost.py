"""AdaBoost: fallback, reproducible synchronous retraining, background swapping."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
from sklearn.ensemble import AdaBoostRegressor
from sklearn.tree import DecisionTreeRegressor

from cpsched.errors import ConfigError
from cpsched.predictor._forest import Forest
from cpsched.predictor.adaboost import BASIC_FEATURES, FEATURES, AdaBoost, recency_weights
from cpsched.predictor.base import FinishedJob
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.rebuild import rebuild
from tests.predictor._util import done, mk

SMALL = {"n_estimators": 5, "max_depth": 4, "retrain_every": 20}


def history(n: int, seed: int = 1) -> list[FinishedJob]:
    """Users whose run times depend on their core count; distinct end times."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        user = f"u{rng.randrange(4)}"
        cores = rng.choice([1, 2, 4, 8])
        run = 100 * cores * (1 + int(user[1:])) + rng.randrange(20)
        job = mk(f"j{i}", user=user, submit=10 * i, limit=20_000, cores=cores, mem=cores * 100)
        out.append(done(job, run, end=10 * i + run * 1000 + i))
    return sorted(out, key=lambda f: f.end)


def probes() -> list:
    return [
        mk(f"p{c}{u}", user=f"u{u}", submit=10**9, limit=20_000, cores=c, mem=c * 100)
        for c in (1, 2, 4, 8)
        for u in range(5)
    ]


def test_falls_back_to_last_two_before_the_first_model():
    p, ref = AdaBoost(**SMALL), LastTwo()
    for f in history(19):
        p.observe(f)
        ref.observe(f)
        assert p.model_ is None
        assert [p.predict(j, 0) for j in probes()] == [ref.predict(j, 0) for j in probes()]
    p.observe(history(20)[-1])
    assert p.model_ is not None


def test_deterministic_mode_is_reproducible_and_learns():
    runs = []
    for _ in range(2):
        p = AdaBoost(**SMALL)
        for f in history(200):
            p.observe(f)
        runs.append([p.predict(j, 0) for j in probes()])
    assert runs[0] == runs[1]
    assert p.model_ is not None and p.model_.trained_on == 200
    # Learned: more cores, longer runs, for a known user.
    small, big = (mk("q", user="u1", limit=20_000, cores=c, mem=c * 100) for c in (1, 8))
    assert p.predict(small, 0) < p.predict(big, 0)


def test_rebuild_gives_the_same_predictions_as_incremental_observe():
    live = AdaBoost(**SMALL)
    for f in history(150):
        live.observe(f)
    shuffled = history(150)
    random.Random(7).shuffle(shuffled)
    rebuilt = rebuild(AdaBoost(**SMALL), shuffled)
    assert [live.predict(j, 0) for j in probes()] == [rebuilt.predict(j, 0) for j in probes()]


def test_window_bounds_the_training_rows():
    p = AdaBoost(**SMALL, window=50, features=FEATURES)
    for f in history(130):
        p.observe(f)
    rows, targets = p._snapshot()
    assert rows.shape == (50, len(FEATURES))
    # Oldest first: the last row is the newest observation.
    assert targets[-1] == history(130)[-1].run_time


@pytest.mark.parametrize("target", ["log", "ratio"])
def test_other_targets_predict_seconds(target):
    p = AdaBoost(**SMALL, target=target, criterion="squared_error")
    for f in history(100):
        p.observe(f)
    answers = p.predict_many(probes(), 0)
    assert answers == [p.predict(j, 0) for j in probes()]
    assert all(1 <= a <= j.time_limit for a, j in zip(answers, probes(), strict=True))
    assert p.predict(probes()[0], 0) < p.predict(probes()[-1], 0)  # 1 core vs 8 cores


def test_min_samples_leaf_reaches_the_trees():
    p = AdaBoost(**SMALL, min_samples_leaf=30)
    for f in history(100):
        p.observe(f)
    rows, targets = p._snapshot()
    model = p._fit(rows, targets, 100)
    leaves = [i for i, feature in enumerate(model.feature) if feature < 0]
    assert len(leaves) <= 5 * (100 // 30)  # five trees, each of at most 100 // 30 leaves


def test_flat_forest_equals_scikit_learn():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 50, size=(300, 4)).astype(float)
    y = np.log1p(x[:, 0] * 7 + x[:, 1] ** 2 + rng.random(300))
    model = AdaBoostRegressor(
        estimator=DecisionTreeRegressor(max_depth=5), n_estimators=12, random_state=0
    ).fit(x, y)
    forest = Forest.from_sklearn(model, 300)
    probe = np.vstack([x, rng.random((50, 4)) * 60])
    assert [forest.predict_row(r) for r in probe] == model.predict(probe).tolist()


def test_bad_hyperparameters_are_config_errors():
    with pytest.raises(ConfigError):
        AdaBoost(features=("user", "shoe_size"))
    with pytest.raises(ConfigError):
        AdaBoost(retrain_every=0)
    with pytest.raises(ConfigError):
        AdaBoost(recent=0)
    with pytest.raises(ConfigError):
        AdaBoost(min_samples_leaf=0)
    with pytest.raises(ConfigError):
        AdaBoost(target="minutes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        AdaBoost(half_life=0)


class GatedAdaBoost(AdaBoost):
    """Fits wait for ``gate``: lets a test hold a background fit "running"."""

    def __init__(self, gate: threading.Event, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    def _fit(self, rows, targets, trained_on):
        assert self.gate.wait(timeout=30)
        return super()._fit(rows, targets, trained_on)


def test_background_mode_swaps_in_a_model_and_runs_one_fit_at_a_time():
    gate = threading.Event()
    p = GatedAdaBoost(gate, **SMALL, background=True)
    jobs = history(60)
    try:
        for f in jobs[:20]:
            p.observe(f)
        first = p.training_
        assert first is not None and p.model_ is None
        # Held fit: predictions do not wait and still come from last-two.
        assert p.predict(probes()[0], 0) >= 1
        for f in jobs[20:40]:
            p.observe(f)
        assert p.training_ is first  # the refit due at 40 is owed, not started
        gate.set()
        assert first.result(timeout=30).trained_on == 20
        assert p.model_ is first.result()
        p.observe(jobs[40])  # the owed refit starts at the next observe, on newest rows
        second = p.training_
        assert second is not first
        assert second is not None and second.result(timeout=30).trained_on == 41
        assert p.model_ is second.result()
    finally:
        gate.set()
        p.close()


def test_background_and_deterministic_fits_agree_on_the_same_rows():
    sync, bg = AdaBoost(**SMALL), AdaBoost(**SMALL, background=True)
    try:
        for f in history(20):
            sync.observe(f)
            bg.observe(f)
        assert bg.training_ is not None
        bg.training_.result(timeout=30)
        assert [sync.predict(j, 0) for j in probes()] == [bg.predict(j, 0) for j in probes()]
    finally:
        bg.close()


def test_profile_features_let_it_tell_jobs_apart_by_name():
    """One user, one request; only the name says whether a job is short or long."""
    rng = random.Random(5)
    jobs = []
    for i in range(200):
        name = rng.choice(["short_1", "long_1"])
        run = 100 if name == "short_1" else 5000
        jobs.append(done(mk(f"j{i}", name=name, submit=10_000 * i, limit=9000), run))
    short, long = (mk(n, name=n, submit=10**7, limit=9000) for n in ("short_1", "long_1"))
    with_profile = AdaBoost(**SMALL, features=("user", "time_limit", "profile", "profile_rule"))
    without = AdaBoost(**SMALL, features=("user", "time_limit"))
    for f in jobs:
        with_profile.observe(f)
        without.observe(f)
    assert (with_profile.predict(short, 10**7), with_profile.predict(long, 10**7)) == (100, 5000)
    assert without.predict(short, 10**7) == without.predict(long, 10**7)


def test_training_rows_are_taken_as_of_each_jobs_submit_time():
    p = AdaBoost(**SMALL, features=("last", "profile", "profile_rule"))
    first = done(mk("a", name="x", submit=0, limit=900), 50, end=100)
    # Submitted before "a" ended: its row must not know "a".
    overlapping = done(mk("b", name="x", submit=90, limit=900), 300, end=400)
    after = done(mk("c", name="x", submit=500, limit=900), 70, end=600)
    for f in (first, overlapping, after):
        p.observe(f)
    rows, _ = p._snapshot()
    assert rows.tolist() == [[900, 900, 6], [900, 900, 6], [300, 175, 1]]


def test_ratio_target_scales_with_the_requested_time():
    """A user who always uses a tenth of the request: the ratio carries to new requests."""
    jobs = [
        done(mk(f"j{i}", submit=10_000 * i, limit=limit), limit // 10)
        for i, limit in enumerate([1000, 2000, 4000] * 20)
    ]
    # The request-only features (the user's history would tell the seconds model too).
    basic = {"features": BASIC_FEATURES, "min_samples_leaf": 1}
    ratio, seconds = (AdaBoost(**SMALL, **basic, target=t) for t in ("ratio", "seconds"))
    for f in jobs:
        ratio.observe(f)
        seconds.observe(f)
    unseen = mk("n", submit=10**7, limit=30_000)
    assert ratio.predict(unseen, 10**7) == 3000
    assert seconds.predict(unseen, 10**7) == 400  # trees cannot extrapolate seconds


def test_recency_weights_halve_every_half_life_rows_oldest_first():
    assert recency_weights(5, None) is None
    assert recency_weights(5, 2).tolist() == [0.25, 2**-1.5, 0.5, 2**-0.5, 1.0]


def test_recency_weights_let_a_change_of_habit_win_sooner():
    # A user whose jobs ran 1,000 s for 300 jobs, then 5,000 s for the last 100: with
    # equal weights the old habit still wins the trees' medians, a short half-life
    # follows the new one.
    def fitted(half_life):
        p = AdaBoost(
            features=("user", "cores"), retrain_every=400, half_life=half_life, n_estimators=3
        )
        for i in range(400):
            run = 1_000 if i < 300 else 5_000
            job = mk(f"j{i}", user="u", submit=10 * i, limit=20_000, cores=1)
            p.observe(done(job, run, end=10 * i + run))
        return p.predict(mk("next", user="u", submit=10**6, limit=20_000, cores=1), 10**6)

    assert fitted(None) == 1_000
    assert fitted(50) == 5_000


def test_a_rebuild_keeps_the_rows_one_by_one_observing_keeps_and_fits_once_at_its_end():
    jobs = history(130)
    live = AdaBoost(**SMALL, window=50, features=FEATURES)
    for f in jobs:
        live.observe(f)
    gate = threading.Event()
    rebuilt = GatedAdaBoost(gate, **SMALL, window=50, features=FEATURES, background=True)
    try:
        with rebuilt.rebuilding(len(jobs)):
            for f in jobs:
                rebuilt.observe(f)
                assert rebuilt.training_ is None  # no fit on the way (20 were due)
        # The rows of the 80 oldest jobs were never built, yet the window is the same.
        for kept, expected in zip(rebuilt._snapshot(), live._snapshot(), strict=True):
            assert np.array_equal(kept, expected)
        fit = rebuilt.training_
        assert fit is not None and not fit.done()
        # Until that one fit is done: last-two, as before any first fit.
        last_two = LastTwo()
        for f in jobs:
            last_two.observe(f)
        assert [rebuilt.predict(j, 0) for j in probes()] == [
            last_two.predict(j, 0) for j in probes()
        ]
        gate.set()
        assert fit.result(timeout=30).trained_on == 130
        rows, targets = live._snapshot()
        live._fit_and_swap(rows, targets, 130)  # the same rows, fitted once
        assert [rebuilt.predict(j, 0) for j in probes()] == [live.predict(j, 0) for j in probes()]
    finally:
        gate.set()
        rebuilt.close()


def test_a_rebuild_that_observes_fewer_jobs_than_it_announced_is_an_error():
    p = AdaBoost(**SMALL, window=50)
    with pytest.raises(RuntimeError, match="announced"), p.rebuilding(100):
        for f in history(90):
            p.observe(f)
