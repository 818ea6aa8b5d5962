"""What the wrappers every dispatcher gets cost a replay with neither block-layout jobs nor
site rules (SWF traces).

``make_dispatcher`` wraps each heuristic: its allocator in ``SitePlacement`` and
``SteadyBlocks`` (observing each snapshot), the dispatcher in ``SteadyStarts`` (which lays
block starts out) and ``SiteRulesDispatcher``. On a plain trace they find nothing to do.
This replays the trace with the wrapped dispatcher and with the bare list dispatcher on
the bare allocator, alternately, and prints the ratio of the simulation times (and
checks the two schedules are the same).

    python bench/wrapper_overhead.py ../shared/data/traces/KTH-SP2-1996-2.1-cln.swf.gz
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from cpsched.core import make_allocator, make_dispatcher
from cpsched.core.dispatcher import Dispatcher
from cpsched.core.heuristics import ORDERS, ListDispatcher
from cpsched.core.registry import HEURISTICS
from cpsched.predictor.registry import make_predictor
from cpsched.replay.runner import resolve_system
from cpsched.replay.simulator import Simulator
from cpsched.replay.swf import read_swf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--dispatcher", default="easy", choices=sorted(HEURISTICS))
    parser.add_argument("--allocator", default="best-fit")
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    system = resolve_system(args.trace, None)
    trace = read_swf(args.trace, system, limit=args.jobs)

    def replay(wrapped: bool) -> tuple[float, list[int]]:
        dispatcher: Dispatcher
        if wrapped:
            dispatcher = make_dispatcher(args.dispatcher, args.allocator, plan=False)
        else:
            order, backfill = HEURISTICS[args.dispatcher]
            placer = make_allocator(args.allocator)
            dispatcher = ListDispatcher(
                args.dispatcher, ORDERS[order], placer, backfill=backfill, plan=False
            )
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
    print(f"  bare                     median {bare:7.2f} s  {times[False]}")
    print(f"  as make_dispatcher wraps median {laid:7.2f} s  {times[True]}")
    print(f"  ratio {laid / bare:.3f}; same schedule: {starts[True] == starts[False]}")


if __name__ == "__main__":
    main()
