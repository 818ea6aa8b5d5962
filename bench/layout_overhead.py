"""What the block-layout step costs a replay whose jobs have no block layout (SWF traces).

Every dispatcher is wrapped by ``LayingOutDispatcher``; on a trace it finds no block job
and returns the decision as it is. This replays the trace with the wrapped dispatcher and
with the one inside it, alternately, and prints the ratio of the simulation times (and
checks the two schedules are the same).

    python bench/layout_overhead.py ../shared/data/traces/KTH-SP2-1996-2.1-cln.swf.gz
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from cpsched.core import make_dispatcher
from cpsched.core.dispatcher import Dispatcher
from cpsched.predictor.registry import make_predictor
from cpsched.replay.runner import resolve_system
from cpsched.replay.simulator import Simulator
from cpsched.replay.swf import read_swf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--dispatcher", default="easy")
    parser.add_argument("--allocator", default="best-fit")
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    system = resolve_system(args.trace, None)
    trace = read_swf(args.trace, system, limit=args.jobs)

    def replay(wrapped: bool) -> tuple[float, list[int]]:
        dispatcher: Dispatcher = make_dispatcher(args.dispatcher, args.allocator, plan=False)
        if not wrapped:
            dispatcher = dispatcher.inner  # type: ignore[attr-defined]
        began = time.perf_counter()
        result = Simulator(system, trace.jobs, dispatcher, make_predictor("last-two")).run()
        return time.perf_counter() - began, result.jobs.start.tolist()

    times: dict[bool, list[float]] = {True: [], False: []}
    starts: dict[bool, list[int]] = {}
    for _ in range(args.rounds):
        for wrapped in (False, True):
            seconds, starts[wrapped] = replay(wrapped)
            times[wrapped].append(seconds)
    bare, laid = statistics.median(times[False]), statistics.median(times[True])
    print(f"{args.trace.name}: {len(trace.jobs)} jobs, {args.dispatcher} + {args.allocator}")
    print(f"  without the layout step  median {bare:7.2f} s  {times[False]}")
    print(f"  with it                  median {laid:7.2f} s  {times[True]}")
    print(f"  ratio {laid / bare:.3f}; same schedule: {starts[True] == starts[False]}")


if __name__ == "__main__":
    main()
