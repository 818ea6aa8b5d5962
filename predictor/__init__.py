"""Run-time predictors: learn from finished jobs, answer durations for the dispatch core.

Build one by name with :func:`predictor.registry.make_predictor`. This package imports
nothing heavy: the dispatch core imports the correction policies from here.
"""

from cpsched.predictor.base import FinishedJob, Predictor

__all__ = ["FinishedJob", "Predictor"]
