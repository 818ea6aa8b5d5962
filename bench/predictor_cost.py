"""What a prediction costs, per predictor, and what a learned predictor's retrain costs.

    python bench/predictor_cost.py [TRACE]   (default: HPC2N from ../shared/data/traces)

Each predictor first observes the trace's first 100,000 jobs, then predicts the next
10,000 one by one (p50 and p99 of the per-call time, wall-clock and CPU: on a busy
machine a call the scheduler preempts costs milliseconds of wall time, not of CPU). The
learned predictors' retrain is timed on a history of 10,000 and of 100,000 jobs (their
window keeps the newest 40,000), in wall-clock and in CPU seconds (the CPU figure is the
one to compare on a shared machine).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from cpsched.predictor._windowed import WindowedLearner
from cpsched.predictor.base import FinishedJob
from cpsched.predictor.registry import LEARNED, make_predictor
from cpsched.replay.runner import resolve_system
from cpsched.replay.swf import read_swf

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO.parent / "shared/data/traces/HPC2N-2002-2.2-cln.swf.gz"


def finished(trace_jobs: list, count: int) -> list[FinishedJob]:
    done = [
        FinishedJob(tj.job, tj.job.submit + tj.wait, tj.job.submit + tj.wait + tj.run_time)
        for tj in trace_jobs[:count]
    ]
    return sorted(done, key=lambda f: f.end)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    jobs = read_swf(path, resolve_system(path, None), limit=110_000).jobs
    history, probes = finished(jobs, 100_000), [tj.job for tj in jobs[100_000:110_000]]
    t = probes[0].submit
    print("| predictor | p50 µs | p99 µs | CPU p50 µs | CPU p99 µs |")
    print("|---|---:|---:|---:|---:|")
    for name in ("wall-time", "last-two", "profile", *LEARNED):
        predictor = (
            make_predictor(name, retrain_every=len(history))
            if name in LEARNED
            else (make_predictor(name))
        )
        for f in history:
            predictor.observe(f)
        wall, cpu = np.empty(len(probes)), np.empty(len(probes))
        for i, job in enumerate(probes):
            began, began_cpu = time.perf_counter(), time.thread_time()
            predictor.predict(job, t)
            cpu[i] = time.thread_time() - began_cpu
            wall[i] = time.perf_counter() - began
        (p50, p99), (cpu50, cpu99) = (np.percentile(c * 1e6, [50, 99]) for c in (wall, cpu))
        print(f"| {name} | {p50:.1f} | {p99:.1f} | {cpu50:.1f} | {cpu99:.1f} |")
    print()
    print("| predictor | history | rows trained | retrain s | retrain CPU s |")
    print("|---|---:|---:|---:|---:|")
    for name in LEARNED:
        for size in (10_000, 100_000):
            model = make_predictor(name, retrain_every=10**9)
            assert isinstance(model, WindowedLearner)
            for f in history[:size]:
                model.observe(f)
            rows, targets = model._snapshot()  # the exact rows a scheduled retrain would use
            began, began_cpu = time.perf_counter(), time.process_time()
            model._fit(rows, targets, size)
            took, took_cpu = time.perf_counter() - began, time.process_time() - began_cpu
            print(f"| {name} | {size} | {len(rows)} | {took:.2f} | {took_cpu:.2f} |")


if __name__ == "__main__":
    main()
