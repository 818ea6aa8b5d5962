"""Run-time predictors: learn from finished jobs, answer durations for the dispatch core.

Build one by name with :func:`cpsched.predictor.registry.make_predictor`. Predictors build
on the core's job types only; they never read a clock.
"""

from cpsched.predictor.base import FinishedJob, Predictor

__all__ = ["FinishedJob", "Predictor"]
