"""Rebuilding a predictor's learned state from a stored history of finished jobs.

Predictors keep no files of their own (persistence lives outside the class): the service
stores finished jobs and, after a restart, feeds them back in the order they finished,
which is the order ``observe`` would have seen them on-line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from cpsched.predictor.base import FinishedJob, Predictor

P = TypeVar("P", bound=Predictor)


def rebuild(predictor: P, history: Iterable[FinishedJob]) -> P:
    """Observe ``history`` in end-time order (stable: equal ends keep their given order).

    Returns ``predictor`` for chaining. Give it a fresh predictor: observing a job twice
    counts it twice.
    """
    for finished in sorted(history, key=lambda f: f.end):
        predictor.observe(finished)
    return predictor
