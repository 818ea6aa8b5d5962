"""Where the last-two → oracle gap is: which jobs' predictions the default policy needs.

    python bench/prediction_gap.py --out bench-out/gap [--traces kth] [--cut 900] [--jobs N]

replays each trace with ``today``, the default policy (last-two) and the oracle (the
trace's real run times), and the default policy with the real run times given for part of
the jobs only, one replay at a time:

* ``queued-oracle``: queued jobs predicted by the oracle, running jobs planned with
  last-two (the order of the queue and what the plan assumes of the jobs not started);
* ``running-oracle``: the other way round (when the running jobs end);
* ``oracle-below-CUT``: queued jobs that really ran less than ``--cut`` seconds
  predicted by the oracle, the others and the running jobs by last-two (knowing which
  jobs are short);
* ``oracle-from-CUT``: the oracle for the other queued jobs, last-two for the short
  ones and the running jobs;
* ``known-below-CUT``: queued jobs that really ran less than ``--cut`` seconds predicted
  ``CUT / 2``, the others by last-two (which jobs are short, not how short);
* ``found-below-CUT``: the same for the short jobs last-two predicts at least ``CUT``
  only (the short jobs last-two misses);
* ``cleared-below-CUT``: queued jobs that ran at least ``CUT`` s but last-two predicts
  shorter are predicted ``CUT`` (last-two's false alarms taken away).

It prints rank_predictors.py's table per trace: mean bounded slowdown, p99 and max wait,
the ratios to today and the share of the last-two → oracle gap each run closes. The
split runs give the oracle to part of the policy only: they bound what a better
predictor of that part could gain, they are not predictors (the service never knows a
run time before the job ends). A run whose ``summary.json`` exists under ``--out`` with
the same policy and predictor is not replayed again.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from pathlib import Path

from rank_predictors import figures, replay, replay_settings, table
from value_over_today import TRACE_FILES, TRACES, made_with

from cpsched.core.problem import Job
from cpsched.predictor.base import FinishedJob, Memory, Predictor, clamp
from cpsched.predictor.registry import make_predictor
from cpsched.replay.runner import PredictorFactory, run_replay
from cpsched.runtime.policy import Policy


class Split:
    """Queued jobs predicted by ``queued``, running jobs planned with ``running``: the
    runtime plans a started job with a predictor's upper estimate where it has one
    (``cpsched.runtime.durations.DurationBook``), here ``running``'s prediction."""

    def __init__(self, name: str, queued: Predictor, running: Predictor) -> None:
        self.name = name
        self.queued, self.running = queued, running
        self.memory: Memory = queued.memory

    def observe(self, finished: FinishedJob) -> None:
        self.queued.observe(finished)
        if self.running is not self.queued:
            self.running.observe(finished)

    def predict(self, job: Job, t: int) -> int:
        return self.queued.predict(job, t)

    def upper(self, job: Job, t: int) -> int:
        return self.running.predict(job, t)

    def upper_basis(self, job: Job, t: int) -> str:
        return f"{self.running.name}'s prediction"


class LastTwoWhenRunning:
    """Running jobs planned with last-two (its prediction as the upper estimate, as
    :class:`Split`); queued jobs by what a subclass's ``predict`` makes of the jobs' real
    run times (``run_times``) and ``cut`` s."""

    def __init__(self, name: str, run_times: Mapping[str, int], cut: int) -> None:
        self.name = name
        self.running = make_predictor("last-two")
        self.run_times, self.cut = run_times, cut
        self.memory: Memory = self.running.memory

    def observe(self, finished: FinishedJob) -> None:
        self.running.observe(finished)

    def upper(self, job: Job, t: int) -> int:
        return self.running.predict(job, t)

    def upper_basis(self, job: Job, t: int) -> str:
        return f"{self.running.name}'s prediction"


class OracleFor(LastTwoWhenRunning):
    """Queued jobs: the oracle for those whose real run time is below ``cut`` s
    (``below``) or at least ``cut`` s (not ``below``), last-two for the others."""

    def __init__(self, name: str, run_times: Mapping[str, int], cut: int, below: bool) -> None:
        super().__init__(name, run_times, cut)
        self.oracle = make_predictor("oracle", run_times=run_times)
        self.below = below

    def predict(self, job: Job, t: int) -> int:
        known = (self.run_times[job.id] < self.cut) == self.below
        return (self.oracle if known else self.running).predict(job, t)


class KnownShort(LastTwoWhenRunning):
    """Queued jobs: last-two, corrected with which jobs really ran under ``cut`` s, by
    ``rule`` (``known``, ``found`` or ``cleared``: the module doc)."""

    def __init__(self, name: str, run_times: Mapping[str, int], cut: int, rule: str) -> None:
        super().__init__(name, run_times, cut)
        self.rule = rule

    def predict(self, job: Job, t: int) -> int:
        guess = self.running.predict(job, t)
        short, cut = self.run_times[job.id] < self.cut, self.cut
        if short and (self.rule == "known" or (self.rule == "found" and guess >= cut)):
            return clamp(cut / 2, job)
        if not short and self.rule == "cleared" and guess < cut:
            return clamp(cut, job)
        return guess


def split_runs(cut: int) -> dict[str, PredictorFactory]:
    """The split runs by name, each building its predictor from the real run times."""

    def oracle(run_times: Mapping[str, int]) -> Predictor:
        return make_predictor("oracle", run_times=run_times)

    def last_two(_: Mapping[str, int]) -> Predictor:
        return make_predictor("last-two")

    def split(name: str, queued: PredictorFactory, running: PredictorFactory) -> PredictorFactory:
        return lambda run_times: Split(name, queued(run_times), running(run_times))

    def partial(name: str, below: bool) -> PredictorFactory:
        return lambda run_times: OracleFor(name, run_times, cut, below)

    runs: dict[str, PredictorFactory] = {
        "queued-oracle": split("queued-oracle", oracle, last_two),
        "running-oracle": split("running-oracle", last_two, oracle),
        f"oracle-below-{cut}": partial(f"oracle-below-{cut}", below=True),
        f"oracle-from-{cut}": partial(f"oracle-from-{cut}", below=False),
    }
    for rule in ("known", "found", "cleared"):
        name = f"{rule}-below-{cut}"
        runs[name] = lambda run_times, name=name, rule=rule: KnownShort(name, run_times, cut, rule)
    return runs


def replay_split(
    trace: str, run: str, factory: PredictorFactory, out: Path, traces: Path, jobs: int | None
) -> Path:
    """The directory of the default policy's replay of ``trace`` with ``factory``'s
    predictor, replayed unless it is there."""
    target = out / trace / run
    policy = Policy.named("default")
    if _made_with(target, policy, run):
        return target
    began = time.perf_counter()
    run_replay(replay_settings(trace, target, policy, traces, jobs), make_predictor=factory)
    print(f"  {trace} · {run}: {time.perf_counter() - began:.0f} s", flush=True)
    return target


def _made_with(directory: Path, policy: Policy, predictor: str) -> bool:
    """``value_over_today.made_with``, and with ``predictor`` named in the summary."""
    if not made_with(directory, policy):
        return False
    summary = json.loads((directory / "summary.json").read_text())
    return bool(summary["settings"]["predictor"] == predictor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--traces", default="kth")
    parser.add_argument("--cut", type=int, default=900, help="seconds: what a short job is")
    parser.add_argument("--jobs", type=int, default=None, help="each trace's first N jobs")
    parser.add_argument("--trace-dir", type=Path, default=TRACES)
    args = parser.parse_args()
    traces = [t for t in args.traces.split(",") if t]
    unknown = [t for t in traces if t not in TRACE_FILES]
    if unknown:
        raise SystemExit(f"unknown trace: {', '.join(unknown)}")
    for trace in traces:
        rows = {
            run: figures(replay(trace, run, args.out, args.trace_dir, args.jobs))
            for run in ("today", "last-two")
        }
        for name, factory in split_runs(args.cut).items():
            where = replay_split(trace, name, factory, args.out, args.trace_dir, args.jobs)
            rows[name] = figures(where)
        rows["oracle"] = figures(replay(trace, "oracle", args.out, args.trace_dir, args.jobs))
        print(table(trace, rows), flush=True)


if __name__ == "__main__":
    main()
