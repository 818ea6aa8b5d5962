"""Predictor names → predictors."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from cpsched.errors import ConfigError, UnknownPolicyError
from cpsched.predictor.adaboost import AdaBoost
from cpsched.predictor.base import Predictor
from cpsched.predictor.lasttwo import LastTwo
from cpsched.predictor.oracle import Oracle
from cpsched.predictor.profile import JobProfile
from cpsched.predictor.quantile_boost import QuantileBoost
from cpsched.predictor.short_jobs import ShortJobs
from cpsched.predictor.walltime import WallTime


def _oracle(run_times: Mapping[str, int] | None = None) -> Oracle:
    # The registry is how CLIs build predictors by name; only a replay knows the answers.
    if run_times is None:
        raise ConfigError(
            "predictor 'oracle' needs the real run times (replay only): "
            "pass run_times={job id: seconds}"
        )
    return Oracle(run_times)


PREDICTORS: dict[str, Callable[..., Predictor]] = {
    "wall-time": WallTime,
    "last-two": LastTwo,
    "profile": JobProfile,
    "adaboost": AdaBoost,
    "quantile-boost": QuantileBoost,
    "short-jobs": ShortJobs,
    "oracle": _oracle,
}


LEARNED = ("adaboost", "quantile-boost", "short-jobs")
"""The predictors that fit a model every ``retrain_every`` completions, in the background
in the service (:class:`~cpsched.predictor._windowed.WindowedLearner`)."""


def make_predictor(name: str, **options: Any) -> Predictor:
    """A fresh predictor by name; ``options`` are its constructor's keyword arguments."""
    try:
        factory = PREDICTORS[name]
    except KeyError:
        raise UnknownPolicyError("predictor", name, PREDICTORS) from None
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:
        raise ConfigError(f"predictor {name!r}: bad options {sorted(options)}: {exc}") from None
    return factory(**options)
