"""The replay's simulation against a bare FCFS loop over the same jobs: what the
simulator, the dispatch core's wrappers and EASY cost over the least a replay must do.

The bare loop keeps one number (free processors), a heap of ends and the queue, and
starts jobs in submission order while the head fits; no nodes, no predictions, no
outputs. The replay is bench/accasim_vs_cpsched.sh's (EASY, first-fit, the requests),
in process, without writing its outputs. Both read the trace first (timed apart).

    python bench/bare_fcfs.py TRACE [--system FILE] [--jobs N]

Prints wall and CPU seconds of each part and the ratio of the replay's simulation to the
bare loop (the machine may be shared: CPU seconds move less with its load).
"""

from __future__ import annotations

import argparse
import heapq
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from cpsched.replay.runner import ReplaySettings, resolve_system, simulate
from cpsched.replay.swf import TraceJob, read_swf
from cpsched.runtime.policy import NO_WAIT_BOUND, Policy

EASY_FIRST_FIT = {
    "dispatcher": "easy",
    "allocator": "first-fit",
    "predictor": "wall-time",
    **NO_WAIT_BOUND,
}


def bare_fcfs(trace: Sequence[TraceJob], processors: int) -> int:
    """Run FCFS over ``trace`` on ``processors`` interchangeable processors; the sum of
    the waits (so that the loop's work is used)."""
    free, ends, queue = processors, [], deque()  # type: ignore[var-annotated]
    waits, i, n = 0, 0, len(trace)
    while i < n or queue:
        now = min(trace[i].job.submit if i < n else 1 << 62, ends[0][0] if ends else 1 << 62)
        while ends and ends[0][0] <= now:
            free += heapq.heappop(ends)[1]
        while i < n and trace[i].job.submit <= now:
            queue.append(trace[i])
            i += 1
        while queue and queue[0].job.units <= free:
            tj = queue.popleft()
            free -= tj.job.units
            waits += now - tj.job.submit
            heapq.heappush(ends, (now + tj.run_time, tj.job.units))
    return waits


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace", type=Path)
    parser.add_argument("--system", type=Path)
    parser.add_argument("--jobs", type=int)
    args = parser.parse_args()
    system = resolve_system(args.trace, args.system)
    w0, c0 = clocks()
    trace = read_swf(args.trace, system, limit=args.jobs).jobs
    w1, c1 = clocks()
    bare_fcfs(
        trace, sum(node.capacity[system.resource_names.index("cpu")] for node in system.nodes)
    )
    w2, c2 = clocks()
    settings = ReplaySettings(
        trace=args.trace,
        out=Path("unused"),
        policy=Policy.named("default", **EASY_FIRST_FIT),
        system=args.system,
        jobs=args.jobs,
    )
    result = simulate(settings)
    replay_wall = result.dispatch.run_s
    c3 = time.process_time()
    # simulate() reads the trace again: its simulation is its run time (wall); its CPU
    # time is the whole call's less one reading.
    replay_cpu = (c3 - c2) - (c1 - c0)
    print(f"trace       {args.trace.name}: {len(trace)} jobs, {len(system.nodes)} nodes")
    print(f"read        wall {w1 - w0:7.2f} s   cpu {c1 - c0:7.2f} s")
    print(f"bare FCFS   wall {w2 - w1:7.2f} s   cpu {c2 - c1:7.2f} s")
    print(f"EASY replay wall {replay_wall:7.2f} s   cpu {replay_cpu:7.2f} s  (simulation only)")
    print(
        f"ratio       wall {replay_wall / (w2 - w1):7.1f}x   cpu {replay_cpu / (c2 - c1):7.1f}x"
        f"  (EASY replay / bare FCFS loop)"
    )


if __name__ == "__main__":
    main()
