"""Where a replay's time goes: reading, simulating (dispatcher vs the rest), writing.

python bench/replay_breakdown.py TRACE [--dispatcher easy] [--system FILE]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from cpsched.core import make_dispatcher
from cpsched.predictor.registry import make_predictor
from cpsched.replay.outputs import write_outputs
from cpsched.replay.runner import resolve_system
from cpsched.replay.simulator import Simulator
from cpsched.replay.swf import read_swf


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace", type=Path)
    parser.add_argument("--dispatcher", default="easy")
    parser.add_argument("--allocator", default="first-fit")
    parser.add_argument("--system", type=Path)
    parser.add_argument("--jobs", type=int)
    args = parser.parse_args()

    t0 = time.perf_counter()
    system = resolve_system(args.trace, args.system)
    trace = read_swf(args.trace, system, limit=args.jobs)
    t1 = time.perf_counter()
    dispatcher = make_dispatcher(args.dispatcher, args.allocator, plan=False)
    result = Simulator(system, trace.jobs, dispatcher, make_predictor("wall-time")).run()
    t2 = time.perf_counter()
    with TemporaryDirectory() as out:
        write_outputs(result, Path(out))
    t3 = time.perf_counter()
    dispatch_s = result.dispatch.wall_ms.sum() / 1000
    print(f"trace        {args.trace.name}: {len(trace.jobs)} jobs, {len(system.nodes)} nodes")
    print(f"read         {t1 - t0:7.2f} s")
    print(
        f"simulate     {t2 - t1:7.2f} s  (dispatcher {dispatch_s:.2f} s in "
        f"{len(result.dispatch.wall_ms)} calls, simulator {t2 - t1 - dispatch_s:.2f} s)"
    )
    print(f"write        {t3 - t2:7.2f} s  (summary, parquet, csv, plots)")
    print(f"total        {t3 - t0:7.2f} s")


if __name__ == "__main__":
    main()
