"""PCP'20's and PCP3's model size as the machine grows, on the same queue.

python bench/cp/model_size.py INSTANCES [--index N] [--scales 1,2,4,8,16] [--deadline 2]

Takes one dumped instance (the first with 40-100 queued jobs, or --index) and replicates
its machine ``s`` times; every copied node is held whole by a running "blocker" job that
ends after the horizon of every queued job, so the queue, the free capacity and the jobs
that can start are the same at every scale and only the node count changes. Prints, per
scale and dispatcher, the model's variables, constraints and intervals, the solver status
and the CPU time of the call (CPU, not wall: the machine these figures come from is
shared).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from cpsched.core import Job, Node, RunningJob, Snapshot, make_dispatcher, make_snapshot
from cpsched.core.cp import SearchConfig
from cpsched.replay.instances import Instance, instance_files, open_instances

BLOCKED_FOR = 10 * 86400
"""Seconds the blockers run: longer than any plan of the dumped queues."""


def scaled(instance: Instance, scale: int) -> tuple[Snapshot, dict[str, int]]:
    snapshot = instance.snapshot
    base = len(snapshot.nodes)
    nodes = [
        Node(n.name if copy == 0 else f"{n.name}.{copy}", n.capacity)
        for copy in range(scale)
        for n in snapshot.nodes
    ]
    durations = dict(instance.durations)
    running = list(snapshot.running)
    for i in range(base, len(nodes)):
        blocker = Job(f"blocker{i}", snapshot.time, BLOCKED_FOR, 1, nodes[i].capacity)
        running.append(RunningJob(blocker, snapshot.time, BLOCKED_FOR, ((i, 1),)))
        durations[blocker.id] = BLOCKED_FOR
    snap = make_snapshot(snapshot.time, snapshot.resource_names, nodes, running, snapshot.queued)
    return snap, durations


def pick(path: Path, index: int | None) -> Instance:
    for instance in open_instances(path).instances():
        if index is not None and instance.index == index:
            return instance
        if index is None and 40 <= len(instance.snapshot.queued) <= 100:
            return instance
    raise SystemExit(f"no instance with 40-100 queued jobs (or index {index}) in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instances", type=Path)
    parser.add_argument("--index", type=int)
    parser.add_argument("--scales", default="1,2,4,8,16")
    parser.add_argument("--deadline", type=float, default=2.0)
    parser.add_argument("--dispatchers", default="pcp20,pcp3")
    args = parser.parse_args()
    instance = pick(instance_files(args.instances)[0], args.index)
    search = SearchConfig(deadline=args.deadline)
    print(
        f"instance {instance.index}: {len(instance.snapshot.queued)} queued, "
        f"{len(instance.snapshot.running)} running, {len(instance.snapshot.nodes)} nodes"
    )
    print("| nodes | dispatcher | variables | constraints | intervals | status | cpu ms |")
    print("|---|---|---|---|---|---|---|")
    for scale in (int(s) for s in args.scales.split(",")):
        snap, durations = scaled(instance, scale)
        for name in args.dispatchers.split(","):
            dispatcher = make_dispatcher(name, "best-fit", search=replace(search))
            began = time.process_time()
            decision = dispatcher.decide(snap, durations)
            cpu_ms = (time.process_time() - began) * 1000
            d = decision.diagnostics
            status = d.solver_status + (" (fallback)" if d.fallback else "")
            print(
                f"| {len(snap.nodes)} | {name} | {d.model_variables} | {d.model_constraints} "
                f"| {d.model_intervals} | {status} | {cpu_ms:.0f} |"
            )


if __name__ == "__main__":
    main()
