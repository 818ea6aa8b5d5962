"""A learned predictor's fitted model as the service stores it and loads it back after a
restart: the same answers, no fit owed, and anything else refused without harm."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.predictor.adaboost import AdaBoost
from cpsched.predictor.base import Persisting
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.margin import Margin
from cpsched.predictor.quantile_boost import QuantileBoost
from cpsched.predictor.short_jobs import ShortJobs
from cpsched.predictor.upper import UpperQuantile
from tests.predictor.test_adaboost import history, probes

QB = {"max_iter": 20, "min_samples_leaf": 5, "retrain_every": 50}
ADA = {"n_estimators": 10, "retrain_every": 50}


def trained(make, jobs: int = 200):
    predictor = make()
    for finished in history(jobs):
        predictor.observe(finished)
    assert predictor.fitted_model() is not None
    return predictor


LEARNERS = [
    pytest.param(lambda: QuantileBoost(**QB), id="quantile-boost"),
    pytest.param(lambda: AdaBoost(**ADA), id="adaboost"),
    pytest.param(lambda: ShortJobs(**QB), id="short-jobs"),
]


@pytest.mark.parametrize("make", LEARNERS)
def test_a_stored_model_loaded_after_a_rebuild_answers_as_before_the_restart(make):
    before = trained(make)
    data = before.dump_model(before.fitted_model())
    after = make()
    fits: list[int] = []
    after._fit = lambda rows, targets, trained_on: fits.append(trained_on)  # type: ignore[method-assign]
    jobs = history(200)
    with after.rebuilding(len(jobs)):
        for finished in jobs:
            after.observe(finished)
        assert after.load_model(data)
    assert fits == []  # the fit the rebuild owed is not run: the stored model stands in
    assert after.training_ is None
    assert [after.predict(j, 0) for j in probes()] == [before.predict(j, 0) for j in probes()]
    assert after.fitted_model().trained_on == before.fitted_model().trained_on


def test_a_model_fitted_under_other_settings_is_refused():
    before = trained(lambda: QuantileBoost(**QB))
    data = before.dump_model(before.fitted_model())
    for other in (
        QuantileBoost(**{**QB, "quantile": 0.7}),
        QuantileBoost(**{**QB, "features": ("time_limit", "cores")}),
        AdaBoost(**ADA),
    ):
        assert not other.load_model(data)
        assert other.fitted_model() is None
    # How often it refits changes no model: accepted.
    assert QuantileBoost(**{**QB, "retrain_every": 500}).load_model(data)


def test_wrappers_store_and_load_their_inner_model_under_its_name():
    inner = trained(lambda: QuantileBoost(**QB))
    data = inner.dump_model(inner.fitted_model())
    for wrapper in (Margin(QuantileBoost(**QB), 2.0), UpperQuantile(QuantileBoost(**QB), 0.9)):
        assert isinstance(wrapper, Persisting)
        assert wrapper.model_name == "quantile-boost"
        assert wrapper.load_model(data)
        assert wrapper.dump_model(wrapper.fitted_model()) == data
    plain = Margin(LastTwo(), 2.0)
    assert plain.fitted_model() is None and not plain.load_model(data)
    assert plain.model_name == "last-two"


def arrays_of(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as stored:
        return {name: stored[name] for name in stored.files}


def saved(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_a_malformed_model_is_refused_before_any_prediction_can_walk_it():
    predictor = trained(lambda: QuantileBoost(**QB))
    good = arrays_of(predictor.dump_model(predictor.fitted_model()))
    inner = int(np.flatnonzero(good["feature"] >= 0)[0])
    loops = {**good, "left": good["left"].copy()}
    loops["left"][inner] = inner  # a node that is its own child: a walk would never end
    beyond = {**good, "feature": good["feature"].copy()}
    beyond["feature"][inner] = 99  # a column no row has
    short = {**good, "value": good["value"][:-1]}
    floats = {**good, "roots": good["roots"].astype(float)}
    missing = {k: v for k, v in good.items() if k != "threshold"}
    pickled = io.BytesIO()
    np.savez(pickled, **{**good, "value": np.array([object()], dtype=object)})
    fresh = QuantileBoost(**QB)
    for bad in (loops, beyond, short, floats, missing):
        assert not fresh.load_model(saved(bad))
    assert not fresh.load_model(pickled.getvalue())
    assert fresh.fitted_model() is None
    assert fresh.load_model(saved(good))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_any_bytes_are_refused_or_loaded_never_raised(data: bytes):
    assert QuantileBoost(**QB).load_model(data) is False


def test_an_upper_estimate_rebuilt_after_its_model_is_loaded_rests_on_that_model():
    # On-line, the upper estimate's ratios are the central model's errors. A rebuild that
    # takes the stored model back first gives the ratios on-line learning with that model
    # gave; one that loaded it only at the end would keep last-two's errors.
    model = trained(lambda: QuantileBoost(**QB), 300)
    data = model.dump_model(model.fitted_model())
    jobs = history(200)
    probe = probes()[0]
    settings_ = {**QB, "retrain_every": 10_000}  # no fit of its own on the way

    online = UpperQuantile(QuantileBoost(**settings_), 0.9)
    assert online.load_model(data)
    for finished in jobs:
        online.observe(finished)

    def rebuilt(load_first: bool) -> UpperQuantile:
        upper = UpperQuantile(QuantileBoost(**settings_), 0.9)
        if load_first:
            assert upper.load_model(data)
        with upper.rebuilding(len(jobs)):
            for finished in jobs:
                upper.observe(finished)
            if not load_first:
                assert upper.load_model(data)
        assert upper.inner.training_ is None  # the model stood in for the owed fit
        return upper

    first, last = rebuilt(True), rebuilt(False)
    assert first.upper(probe, 0) == online.upper(probe, 0)
    assert first.overall_.quantile(0.9) == online.overall_.quantile(0.9)
    assert last.overall_.quantile(0.9) != online.overall_.quantile(0.9)
