"""EASY's decision on an idle machine, in process: the placement cost of many starts.

The machine of bench/service_scale.py (64 cores and 256,000 MiB per node, every eighth
node with 4 GPUs: 2 or 3 resource types) with nothing running, and Q queued jobs of 1 to
64 cores with 2,000 MiB a core, all startable: after a maintenance window each call can
start the whole queue. Prints, per size and allocator, the best and median wall time of
the decision (the dispatcher as the service builds it: site rules, steady blocks, EASY),
the starts it made and a digest of them (the same before and after a speed-up).

    python bench/easy_idle.py [--sizes 5000x200,20000x200,50000x200] [--repeat 3]
        [--allocators first-fit,best-fit]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time

from cpsched.core import Job, Node, Snapshot, make_dispatcher, make_snapshot

CORES, MEM = 64, 256_000


def idle_snapshot(nodes: int, queued: int, seed: int = 1) -> Snapshot:
    rng = random.Random(seed)
    machine = [Node(f"n{i:05d}", (CORES, MEM, 4 if i % 8 == 0 else 0)) for i in range(nodes)]
    jobs = [
        Job(f"q{k}", submit=k, time_limit=rng.choice([600, 3600, 86_400]),
            units=rng.randint(1, 64), unit_request=(1, 2000, 0))
        for k in range(queued)
    ]  # fmt: skip
    return make_snapshot(1_000_000, ("cpu", "mem", "gpu"), machine, (), jobs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="5000x200,20000x200,50000x200")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--allocators", default="first-fit,best-fit")
    args = parser.parse_args()
    print(f"{'nodes':>6} {'queued':>6} {'allocator':<10} {'best ms':>9} {'median ms':>9} "
          f"{'starts':>6}  digest")  # fmt: skip
    for size in args.sizes.split(","):
        nodes, queued = map(int, size.split("x"))
        snapshot = idle_snapshot(nodes, queued)
        durations = {job.id: job.time_limit for job in snapshot.queued}
        for allocator in args.allocators.split(","):
            walls = []
            for _ in range(args.repeat):
                dispatcher = make_dispatcher("easy", allocator)
                began = time.perf_counter()
                decision = dispatcher.decide(snapshot, durations)
                walls.append(time.perf_counter() - began)
            starts = repr([(s.job_id, s.allocation) for s in decision.starts]).encode()
            digest = hashlib.sha256(starts).hexdigest()[:16]
            print(
                f"{nodes:>6} {queued:>6} {allocator:<10} {min(walls) * 1000:>9.1f} "
                f"{statistics.median(walls) * 1000:>9.1f} {len(decision.starts):>6}  {digest}",
                flush=True,
            )


if __name__ == "__main__":
    main()
