"""Last-two with a learned test for the very short jobs (a failed start, a quick test).

Most of a trace's bounded slowdown is in jobs that run under a minute, and most of what
the default policy would gain from perfect predictions is in knowing which queued jobs
those are (docs/results/predictors.md, "Where the gap is"). Last-two calls a job short
when the user's last two were: it finds about 60% of them on KTH, and a quarter of the
jobs it calls short are not. A classifier reading the same history as the learned
predictors (the request, the user's recent run times, the job-profile answer) finds more
of them: on KTH, each job judged at its submission from the trace's history, this
predictor calls 70% of them short against last-two's 58%, and 69% of the jobs it calls
short are, against 73%.

:class:`ShortJobs` fits a gradient-boosted classifier of "ran under ``short`` seconds" on
the window of finished jobs (the machinery of
:class:`~cpsched.predictor._windowed.WindowedLearner`) and answers last-two's prediction,
except for a job the classifier gives a chance of at least ``threshold`` of being short
and that last-two predicts longer: it is predicted to run as long as the user's recent
short jobs did (their median), or half of ``short`` when none of them was short.

Its upper estimate (:class:`~cpsched.predictor.base.Bounding`), which the running jobs
are planned with from their start, is last-two's (never shorter than the prediction): a
job the classifier wrongly took for short does not make plans count on an end that will
not come.

Measured under the default policy it does not beat last-two yet: it finds more of the
short jobs, but more long jobs taken for short compete for the same holes
(docs/results/predictors.md, "Short jobs told apart").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cpsched.core.problem import Job
from cpsched.errors import ConfigError
from cpsched.predictor._forest import AdditiveForest
from cpsched.predictor._hist_boosted import HistBoosted
from cpsched.predictor.adaboost import DEFAULT_FEATURES
from cpsched.predictor.base import clamp

if TYPE_CHECKING:
    from sklearn.ensemble import HistGradientBoostingClassifier

__all__ = ["ShortJobs"]


class ShortJobs(HistBoosted):
    name = "short-jobs"

    def __init__(
        self,
        *,
        short: int = 60,
        threshold: float = 0.5,
        features: Sequence[str] = DEFAULT_FEATURES,
        max_iter: int = 100,
        max_leaf_nodes: int = 31,
        min_samples_leaf: int = 20,
        learning_rate: float = 0.1,
        window: int = 40_000,
        retrain_every: int = 1_000,
        recent: int = 5,
        profile_matches: int = 11,
        half_life: float | None = 5_000,
        background: bool = False,
    ) -> None:
        if short < 2 or not 0 < threshold < 1:
            raise ConfigError(
                f"short-jobs short must be >= 2 s and threshold in (0, 1), got {short} "
                f"and {threshold}"
            )
        super().__init__(
            features=features,
            max_iter=max_iter,
            max_leaf_nodes=max_leaf_nodes,
            min_samples_leaf=min_samples_leaf,
            learning_rate=learning_rate,
            window=window,
            retrain_every=retrain_every,
            recent=recent,
            profile_matches=profile_matches,
            half_life=half_life,
            background=background,
        )
        self.short = short
        self.threshold = threshold
        self._log_odds = math.log(threshold / (1 - threshold))
        """The threshold on the model's raw answer (the log-odds of "short")."""

    # -- the classifier -----------------------------------------------------------------

    def _estimator(self, trees: Mapping[str, Any]) -> HistGradientBoostingClassifier:
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(**trees)

    def _fit(self, rows: np.ndarray, targets: np.ndarray, trained_on: int) -> AdditiveForest:
        if targets.min() == targets.max():
            # One class only (no job, or every job, was short): a constant log-odds.
            return AdditiveForest.constant(20.0 if targets[0] else -20.0, trained_on)
        return super()._fit(rows, targets, trained_on)

    def _target(self, run_time: int, time_limit: int) -> float:
        return 1.0 if run_time < self.short else 0.0

    def _hyperparameters(self) -> dict[str, Any]:
        return {"short": self.short, **super()._hyperparameters()}

    def chance_short(self, job: Job) -> float | None:
        """The classifier's chance that ``job`` runs under ``short`` seconds (None before
        its first fit)."""
        return _chance(self._answer(job)[2])

    # -- predicting -----------------------------------------------------------------------

    def _last_two(self, job: Job) -> float:
        mean = self.fallback_.mean(job.user)
        return float(job.time_limit) if mean is None else mean

    def _short_guess(self, job: Job) -> float:
        """How long the user's recent short jobs ran (their median), else ``short / 2``."""
        runs = [run for run in self.state_.recent_runs(job.user) if run < self.short]
        return statistics.median(runs) if runs else self.short / 2

    def _answer(self, job: Job) -> tuple[float, bool, float | None]:
        """The prediction before the clamp, whether the classifier's call changed it, and
        the classifier's log-odds of "short" (None before its first fit)."""
        last_two = self._last_two(job)
        model = self.model_  # read once: a background swap may happen meanwhile
        if model is None:
            return last_two, False, None
        log_odds = model.predict_row(self.state_.row(job))
        if log_odds >= self._log_odds and last_two >= self.short:
            return min(last_two, self._short_guess(job)), True, log_odds
        return last_two, False, log_odds

    def predict(self, job: Job, t: int) -> int:
        return clamp(self._answer(job)[0], job)

    def upper(self, job: Job, t: int) -> int:
        return clamp(self._last_two(job), job)  # never below predict: that is at most it

    def basis(self, job: Job, t: int) -> str:
        value, called_short, log_odds = self._answer(job)
        last_two = self.fallback_.basis(job, t)
        chance = _chance(log_odds)
        if chance is None:
            return f"before {self.name}'s first fit, {last_two}"
        said = f"a classifier gives it a {chance:.0%} chance of running under {self.short} s"
        if called_short:
            return f"{said}: the user's recent short jobs' run time ({round(value)} s)"
        return f"{said}, so {last_two}"

    def upper_basis(self, job: Job, t: int) -> str:
        return f"once it runs, {self.fallback_.basis(job, t)}"


def _chance(log_odds: float | None) -> float | None:
    """The probability a log-odds stands for (None stays None)."""
    return None if log_odds is None else 1 / (1 + math.exp(-log_odds))
