"""Run-time predictors: learn from finished jobs, answer durations for the dispatch core."""

from predictor.base import FinishedJob, Predictor
from predictor.registry import PREDICTORS, make_predictor

__all__ = ["PREDICTORS", "FinishedJob", "Predictor", "make_predictor"]
