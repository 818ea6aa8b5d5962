"""Bridge figures on a real Slurm test bed: cycle cost for 50 pending jobs, and a shadow run.

Needs a running test bed (``tests/slurm_bridge/testbed/start.sh DIR`` with the kit's
job_submit.lua and ``shadowq`` left to Slurm, then ``export SLURM_CONF=DIR/etc/slurm.conf``)
and a running ``cpsched serve``. Prints figures; asserts nothing.

    python bench/bridge_cycle.py cycle  --service-url http://127.0.0.1:8480 --token T
    python bench/bridge_cycle.py shadow --service-url http://127.0.0.1:8480 --token T
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from cpsched.slurm_bridge import shadow
from cpsched.slurm_bridge.config import BridgeSettings
from cpsched.slurm_bridge.factory import make_backend
from cpsched.slurm_bridge.loop import Bridge
from cpsched.slurm_bridge.runner import SubprocessRunner
from cpsched.slurm_bridge.snapshot import dispatch_request
from cpsched.wire.client import ServiceClient


def sbatch(*options: str, script: str) -> str:
    out = subprocess.run(
        ["sbatch", "--parsable", "-o", "/dev/null", "-D", "/tmp", *options, "--wrap", script],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip().split(";")[0]


def mixed_job(rng: random.Random, partition: str, i: int, sleep_range: tuple[int, int]) -> str:
    kind = rng.random()
    sleep = rng.randint(*sleep_range)
    limit = str(rng.randint(1, 5))
    base = ["-p", partition, "-J", f"mix {i}", "-t", limit]
    if kind < 0.15:
        return sbatch(
            *base,
            "-c",
            str(rng.choice([1, 2])),
            f"--gres=gpu:{rng.choice([1, 2])}",
            script=f"sleep {sleep}",
        )
    if kind < 0.25:
        return sbatch(
            *base, "-N", "2", "-n", "2", "-c", str(rng.choice([1, 2])), script=f"sleep {sleep}"
        )
    return sbatch(*base, "-c", str(rng.choice([1, 1, 2, 4])), script=f"sleep {sleep}")


def cancel(job_ids: list[str]) -> None:
    if job_ids:
        subprocess.run(["scancel", *job_ids], check=False)


def wait_visible(count: int, partition: str) -> None:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        out = subprocess.run(
            ["squeue", "-h", "-p", partition, "-o", "%i"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        if len(out.split()) >= count:
            return
        time.sleep(0.2)


def settings(args: argparse.Namespace, state: Path, **extra: object) -> BridgeSettings:
    values: dict[str, object] = {
        "service_url": args.service_url,
        "token": args.token,
        "cluster": args.cluster,
        "state_file": state / "state.json",
        "deadline_s": 10,
        **extra,
    }
    return BridgeSettings(**values)


def bench_cycle(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    jobs = [mixed_job(rng, args.held_partition, i, (60, 120)) for i in range(args.jobs)]
    wait_visible(len(jobs), args.held_partition)
    state_dir = Path(tempfile.mkdtemp(prefix="bridge-bench-"))
    try:
        conf = settings(args, state_dir, partitions=[args.held_partition])
        runner = SubprocessRunner()
        backend = make_backend(conf, runner)
        client = ServiceClient(conf.service_url, conf.token, conf.cluster, timeout_s=10)
        reads, posts = [], []
        for _ in range(args.repeat):  # read + post a dry run: nothing changes between rounds
            t0 = time.perf_counter()
            state = backend.read_state()
            t1 = time.perf_counter()
            request, _ = dispatch_request(
                state,
                shadow=False,
                extensions={},
                splits_tasks=backend.splits_tasks,
                pins_splits=backend.pins_splits,
            )
            client.dispatch(request.model_copy(update={"dry_run": True}))
            reads.append(t1 - t0)
            posts.append(time.perf_counter() - t1)
        held = len(state.held)
        runner.timings.clear()
        report = Bridge(conf, backend, client).cycle()
        applied = report.applied
        started = len(applied.started) if applied else 0
        per_cmd: dict[str, list[float]] = {}
        for name, seconds in runner.timings:
            per_cmd.setdefault(name, []).append(seconds)
        print(
            f"bridge cycle on a real Slurm 22.05 test bed, {held} held jobs, "
            f"{len(state.nodes)} nodes, {len(state.running)} running"
        )
        print(
            f"  read state   median {statistics.median(reads) * 1000:7.1f} ms "
            f"(min {min(reads) * 1000:.1f}, max {max(reads) * 1000:.1f}, n={len(reads)})"
        )
        print(
            f"  post (dispatch, {held} queued) median {statistics.median(posts) * 1000:7.1f} ms "
            f"(min {min(posts) * 1000:.1f}, max {max(posts) * 1000:.1f})"
        )
        ms = {phase: seconds * 1000 for phase, seconds in report.timings.items()}
        print(
            f"  active cycle: read {ms['read_s']:.1f} ms, post {ms['post_s']:.1f} ms, "
            f"apply {ms['apply_s']:.1f} ms for {started} starts "
            f"({ms['apply_s'] / max(started, 1):.1f} ms per start: scontrol update + release)"
        )
        for name, values in sorted(per_cmd.items()):
            print(f"    {name:9} x{len(values):3}  mean {statistics.mean(values) * 1000:6.1f} ms")
    finally:
        cancel(jobs)


def bench_shadow(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    state_dir = Path(tempfile.mkdtemp(prefix="bridge-shadow-"))
    conf = settings(args, state_dir, mode="shadow", partitions=[args.shadow_partition])
    runner = SubprocessRunner()
    bridge = Bridge(
        conf,
        make_backend(conf, runner),
        ServiceClient(conf.service_url, conf.token, conf.cluster, timeout_s=10),
    )
    bridge.cycle()  # a first record before the burst: every start after it is compared
    jobs = [mixed_job(rng, args.shadow_partition, i, (3, 20)) for i in range(args.jobs)]
    wait_visible(1, args.shadow_partition)
    cycles = 1
    end = time.monotonic() + args.max_wait
    try:
        while time.monotonic() < end:
            report = bridge.cycle()
            cycles += 1
            if cycles > 1 and report.pending == 0 and report.running == 0:
                break
            time.sleep(args.interval)
    finally:
        cancel(jobs)
    acting = [a for a in runner.history if a[0] == "scontrol" and a[1] != "-o"]
    rows = shadow.compare(conf.shadow_log_path)
    summary = shadow.summary(rows, tolerance_s=int(args.interval) + 1)
    print(
        f"shadow run: {len(jobs)} mixed jobs in {args.shadow_partition}, {cycles} dry-run cycles "
        f"every {args.interval:g} s; scontrol actions by the bridge: {len(acting)}"
    )
    print(f"{'job':>6} {'cpsched':>8} {'slurm':>8} {'delta':>6}  nodes cpsched | slurm")
    times = [t for r in rows for t in (r.cpsched_start, r.slurm_start) if t is not None]
    t0 = min(times) if times else 0
    for r in rows:
        cp = "-" if r.cpsched_start is None else f"+{r.cpsched_start - t0}"
        sl = "-" if r.slurm_start is None else f"+{r.slurm_start - t0}"
        delta = "-" if r.delta_s is None else str(r.delta_s)
        print(
            f"{r.job_id:>6} {cp:>8} {sl:>8} {delta:>6}  {','.join(r.cpsched_nodes) or '-'} | "
            f"{','.join(r.slurm_nodes) or '-'}"
        )
    print("summary (tolerance one cycle): " + ", ".join(f"{k}={v}" for k, v in summary.items()))
    print(f"shadow log: {conf.shadow_log_path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["cycle", "shadow"])
    parser.add_argument("--service-url", default="http://127.0.0.1:8480")
    parser.add_argument("--token", required=True)
    parser.add_argument("--cluster", default="testbed")
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--held-partition", default="batch")
    parser.add_argument("--shadow-partition", default="shadowq")
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--max-wait", type=float, default=240.0)
    args = parser.parse_args()
    bench_cycle(args) if args.what == "cycle" else bench_shadow(args)


if __name__ == "__main__":
    main()
