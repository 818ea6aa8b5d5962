"""Predictor names → predictors."""

from __future__ import annotations

from collections.abc import Callable

from cpsched.errors import UnknownPolicyError
from predictor.base import Predictor
from predictor.walltime import WallTime

PREDICTORS: dict[str, Callable[[], Predictor]] = {"wall-time": WallTime}


def make_predictor(name: str) -> Predictor:
    try:
        return PREDICTORS[name]()
    except KeyError:
        raise UnknownPolicyError("predictor", name, PREDICTORS) from None
