"""Live benchmark: Slurm's own backfill, then cpsched active, on one real Slurm test bed.

Starts a Slurm 22.05 test bed (8 CPU nodes of 4 CPUs, 2 GPU nodes of 8 CPUs and 2 GPUs;
tests/slurm_bridge/testbed/start.sh, root needed) and replays the same window of a real
trace (KTH SP2 by default: 150 jobs of 1-16 CPUs, times scaled so that the submissions
span ten minutes) three times, one run after the other:

* ``slurm``: jobs go to a partition left to Slurm (not held): Slurm's backfill runs them;
* ``easy`` and ``default``: jobs are held by the kit's job_submit.lua and started by
  ``cpsched serve`` + the bridge in active mode (EASY with last-two, then the policy the
  service recommends, its default), with the service stopped for 60 s two thirds
  through the submissions (fallback "release" after 20 s).

Every 10th trace job also asks for a GPU, jobs over 8 CPUs are task jobs Slurm spreads
(``-n``), every 7th even-sized one is a two-node job (``-N 2``), and each trace user is
mapped to one of four local users (created when missing). Prints one table and writes
the per-run figures as JSON (``--out``). Asserts nothing.

    python bench/live_slurm.py --out /tmp/live.json [--keep DIR] [--threads 2] [--slurm-scaled]
    tests/slurm_bridge/testbed/debian13-run.sh python bench/live_slurm.py ...   # on 24.11
    python bench/live_slurm.py --analyse DIR   # the figures of runs kept in DIR, again
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cpsched.cli.local_service import LocalService, free_port, write_config
from cpsched.core.registry import make_dispatcher
from cpsched.runtime.codec import to_snapshot
from cpsched.slurm_bridge.apply import DRIFT
from cpsched.slurm_bridge.config import BridgeSettings
from cpsched.slurm_bridge.factory import make_backend
from cpsched.slurm_bridge.loop import Bridge
from cpsched.slurm_bridge.runner import SubprocessRunner
from cpsched.wire.client import ServiceClient
from cpsched.wire.schemas import DispatchRequest

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / "slurm_bridge" / "kit"
TESTBED = REPO / "tests" / "slurm_bridge" / "testbed"
TRACE = REPO.parent / "shared" / "data" / "traces" / "KTH-SP2-1996-2.1-cln.swf.gz"
USERS = [f"cpsbench{i}" for i in range(1, 5)]
TOKEN = "live-bench-token-0123"
TAU = 10  # bounded-slowdown threshold, seconds (of the scaled times)
ANSWERED_S = 5  # a job end the service decided on this soon after was not in the outage


@dataclass
class BenchJob:
    index: int
    submit: float  # seconds after the run's start
    run: int
    limit_min: int
    cpus: int
    gpu: bool
    two_nodes: bool
    user: str


def workload(path: Path, start: int, count: int, span_s: float) -> list[BenchJob]:
    rows = []
    with gzip.open(path, "rt") as handle:
        for line in handle:
            if line.startswith(";") or not line.strip():
                continue
            f = line.split()
            rows.append((int(f[0]), int(f[1]), int(f[3]), int(f[4]), int(f[8]), int(f[11])))
    chosen = [r for r in rows[start:] if 1 <= r[3] <= 16 and r[2] > 0][:count]
    first, last = chosen[0][1], chosen[-1][1]
    scale = span_s / max(1, last - first)
    users = sorted({r[5] for r in chosen})
    jobs = []
    for i, (number, submit, run, procs, requested, user) in enumerate(chosen):
        gpu = number % 10 == 0
        cpus = min(procs, 8) if gpu else procs
        jobs.append(
            BenchJob(
                index=i,
                submit=(submit - first) * scale,
                run=max(2, min(180, round(run * scale))),
                limit_min=max(1, math.ceil(max(requested, run) * scale / 60)),
                cpus=cpus,
                gpu=gpu,
                two_nodes=not gpu and number % 7 == 0 and cpus % 2 == 0 and cpus >= 2,
                user=USERS[users.index(user) % len(USERS)],
            )
        )
    return jobs


def sh(*argv: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{argv}: {done.stderr.strip()}")
    return done.stdout


def start_testbed(root: Path, threads: int = 1, sched_scaled: bool = False) -> dict[str, str]:
    root.chmod(0o755)
    for directory in root.parents:  # users must reach slurm.conf and munge's socket
        if directory == Path("/tmp") or directory == directory.parent:
            break
        directory.chmod(directory.stat().st_mode | 0o001)
    env = {
        **os.environ,
        "CPU_NODES": "8",
        "GPU_NODES": "2",
        "CTLD_PORT": str(free_port()),
        "SLURMD_BASE_PORT": "27100",
        "KIT_DIR": str(KIT),  # job_submit.lua and cpsched-wake, touching root/wake
        "WITH_RESTD": "0",
        # as in the runs of docs/bridge.md: no accounting, Slurm's FIFO priority
        "WITH_DBD": "0",
        "PRIORITY": "basic",
        "THREADS": str(threads),  # hardware threads per core (2: Slurm allocates whole cores)
        # Slurm's own scheduling at the workload's compressed pace (a fair baseline), or
        # at its defaults (backfill every 30 s at 60 s resolution)
        "SCHED_SCALE": "1" if sched_scaled else "0",
    }
    sh("bash", str(TESTBED / "start.sh"), str(root), env=env)
    conf = root / "etc" / "slurm.conf"
    conf.chmod(0o644)
    os.environ["SLURM_CONF"] = str(conf)
    return env


def ensure_users() -> None:
    for user in USERS:
        if subprocess.run(["id", user], capture_output=True, check=False).returncode != 0:
            sh("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user)


def submit(job: BenchJob, partition: str) -> str:
    options = ["-p", partition, "-J", f"kth{job.index}", "-t", str(job.limit_min)]
    if job.two_nodes:
        options += ["-N", "2", "-n", str(job.cpus)]
    else:
        options += ["-n", str(job.cpus)]
    if job.gpu:
        options += ["--gres=gpu:1"]
    out = sh(
        "runuser", "-u", job.user, "--", "env", f"SLURM_CONF={os.environ['SLURM_CONF']}",
        "sbatch", "--parsable", "-D", "/tmp", "-o", "/dev/null", *options,
        "--wrap", f"sleep {job.run}",
    )  # fmt: skip
    return out.strip().split(";")[0]


def submit_paced(
    name: str,
    jobs: list[BenchJob],
    submit_one: Callable[[BenchJob], str],
    service: LocalService | None,
    outage_s: float,
) -> dict[str, BenchJob]:
    """Submit each job at its time (seconds from now), stopping ``service`` for
    ``outage_s`` two thirds through the submissions; the jobs by the ids they got."""
    t0 = time.monotonic()
    ids: dict[str, BenchJob] = {}
    outage_at = jobs[-1].submit * 2 / 3
    outage_done = service is None
    for job in jobs:
        while time.monotonic() - t0 < job.submit:
            if not outage_done and time.monotonic() - t0 >= outage_at:
                assert service is not None
                print(f"  [{name}] service stopped for {outage_s:g} s", file=sys.stderr)
                service.stop()
                time.sleep(outage_s)
                service.start()
                outage_done = True
            time.sleep(0.05)
        ids[submit_one(job)] = job
    print(f"  [{name}] {len(ids)} jobs submitted", file=sys.stderr)
    return ids


def rpc_counts() -> dict[str, int]:
    """slurmctld's RPC counts by message type since the last ``sdiag -r``."""
    out = sh("sdiag")
    block = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    block = block.split("Remote Procedure Call statistics by user", 1)[0]
    return {kind: int(n) for kind, n in re.findall(r"(\w+)\s+\(\s*\d+\)\s+count:(\d+)", block)}


def records(jobcomp: Path, job_ids: set[str]) -> dict[str, tuple[int, int, int]]:
    """submit, start, end of each finished job, from the jobcomp file (one line per job;
    ``sacct -c`` prints the start time as the submit time in 22.05, so it is read here)."""
    found = {}
    for line in jobcomp.read_text().splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("JobId") not in job_ids:
            continue
        try:
            times = [
                int(datetime.fromisoformat(fields[key]).timestamp())
                for key in ("SubmitTime", "StartTime", "EndTime")
            ]
        except (KeyError, ValueError):
            continue
        found[fields["JobId"]] = (times[0], times[1], times[2])
    return found


def _at(ordered: list[int], share: float) -> float:
    return ordered[int(len(ordered) * share)] if ordered else float("nan")


def figures(rows: dict[str, tuple[int, int, int]]) -> dict[str, float]:
    waits = [start - submit for submit, start, _ in rows.values()]
    bsld = [
        max(1.0, (start - submit + end - start) / max(TAU, end - start))
        for submit, start, end in rows.values()
    ]
    gaps = []
    starts = sorted(start for _, start, _ in rows.values())
    for _, _, end in rows.values():
        waiting = any(s <= end < st for s, st, _ in rows.values())
        later = [s for s in starts if s >= end]
        if waiting and later:
            gaps.append(later[0] - end)
    gaps.sort()
    # A job end leaves nothing to start when no waiting job fits what it freed (the
    # gaps above count those too). The reaction itself: for each job that waited while
    # some job ended, its start minus the last end before it.
    ends = sorted(end for *_, end in rows.values())
    reactions = []
    for submit, start, _ in rows.values():
        last = ends[bisect_right(ends, start) - 1] if ends and ends[0] <= start else None
        if start - submit > 2 and last is not None and last > submit:
            reactions.append(start - last)
    reactions.sort()
    return {
        "jobs": len(rows),  # ended after a start: the others never started
        "mean_wait_s": statistics.fmean(waits),
        "mean_bsld": statistics.fmean(bsld),
        "max_wait_s": max(waits),
        "end_to_start_p50_s": _at(gaps, 0.5),
        "end_to_start_p95_s": _at(gaps, 0.95),
        "freed_to_start_p50_s": _at(reactions, 0.5),
        "freed_to_start_p95_s": _at(reactions, 0.95),
        "makespan_s": max(e for *_, e in rows.values()) - min(s for s, *_ in rows.values()),
    }


def split_holds(database: Path) -> dict[str, float | str]:
    """From the service's audit: starts its final check took out for a split that could
    drift, and queued task jobs waiting for a steady split, summed over the decisions."""
    with sqlite3.connect(database) as db:
        rows = [json.loads(d) for (d,) in db.execute("SELECT diagnostics FROM decisions")]
    return {
        "split_dropped": sum(d.get("split_dropped", 0) for d in rows),
        "split_waiting_sum": sum(d.get("split_waiting", 0) for d in rows),
    }


def end_to_cycle(database: Path, rows: dict[str, tuple[int, int, int]]) -> dict[str, float | str]:
    """Seconds from each job's end to the first decision on a snapshot taken at or after
    it (the event-driven cycle's reaction, whatever it then starts)."""
    with sqlite3.connect(database) as db:
        times = sorted(t for (t,) in db.execute("SELECT snapshot_time FROM decisions"))
    gaps = []
    for *_, end in rows.values():
        i = bisect_left(times, end)
        if i < len(times):
            gaps.append(times[i] - end)
    gaps.sort()
    return {"end_to_cycle_p50_s": _at(gaps, 0.5), "end_to_cycle_p95_s": _at(gaps, 0.95)}


def usable_ends(database: Path, rows: dict[str, tuple[int, int, int]]) -> dict[str, float | str]:
    """Job end → next start over the ends a scheduler can act on.

    An end is *usable* when EASY on the users' limits (what Slurm's backfill does), with
    the site's rules and priorities and no wait for a steady split, starts a job on the
    first snapshot the service got after it (the first not showing the job running). An
    end that frees too little for any waiting job is left out: no cycle can start a job
    there, by any policy. Needs the audit's snapshots (the service's
    ``audit_snapshots``); ``nan`` without them. *Answered* ends are the usable ends the
    service decided on within ``ANSWERED_S`` (outside the outage; an end in it may
    count as unusable when Slurm's fallback has used the room by then)."""
    with sqlite3.connect(database) as db:
        kept = [
            (at, snapshot)
            for at, snapshot in db.execute(
                "SELECT snapshot_time, snapshot FROM decisions ORDER BY snapshot_time, id"
            )
            if snapshot not in (None, "null")
        ]
    times = [t for t, _ in kept]
    starts = sorted(start for _, start, _ in rows.values())
    easy = make_dispatcher("easy", "best-fit", split_wait=0, queue_order="site")
    gaps, answered, unusable = [], [], 0
    for job_id, (_, _, end) in rows.items():
        i = bisect_left(times, end)
        later = bisect_left(starts, end)
        request = None
        while i < len(times):  # a snapshot of the same second may predate the end
            request = DispatchRequest.model_validate_json(kept[i][1])
            if all(r.id != job_id for r in request.running):
                break
            i += 1
        if i == len(times) or later == len(starts) or request is None:
            continue
        snapshot = to_snapshot(request).snapshot
        limits = {j.id: j.time_limit for j in snapshot.queued}
        limits.update({r.job.id: r.time_limit for r in snapshot.running})
        if not easy.decide(snapshot, limits).starts:
            unusable += 1
            continue
        gaps.append(starts[later] - end)
        if times[i] - end <= ANSWERED_S:
            answered.append(starts[later] - end)
    gaps.sort()
    answered.sort()
    return {
        "usable_ends": len(gaps),
        "unusable_ends": unusable,
        "usable_end_to_start_p50_s": _at(gaps, 0.5),
        "usable_end_to_start_p95_s": _at(gaps, 0.95),
        "usable_ends_over_2s": sum(g > 2 for g in gaps),
        "answered_ends": len(answered),
        "answered_end_to_start_p95_s": _at(answered, 0.95),
        "answered_ends_over_2s": sum(g > 2 for g in answered),
    }


def run_once(
    name: str, jobs: list[BenchJob], work: Path, outage_s: float
) -> dict[str, float | str]:
    sh("scancel", "-u", ",".join(USERS), check=False)
    time.sleep(3)
    sh("sdiag", "-r")
    partition = "shadowq" if name == "slurm" else "batch"
    service = bridge = None
    stop = threading.Event()
    runner = None
    state_dir = work / name
    state_dir.mkdir(parents=True, exist_ok=True)
    if name != "slurm":
        defaults: dict[str, object] = (
            {"dispatcher": "easy", "predictor": "last-two", "allocator": "best-fit"}
            if name == "easy"
            else {}
        )
        config = write_config(
            state_dir / "service.toml", f"sqlite:///{state_dir}/cpsched.db", TOKEN, defaults
        )
        # Every snapshot kept in the audit (--keep copies it): a decision can be re-run.
        config.write_text("audit_snapshots = true\n" + config.read_text())
        service = LocalService(config, free_port(), state_dir / "service.log")
        service.start()
        settings = BridgeSettings(
            service_url=service.url,
            token=TOKEN,
            cluster="testbed",
            state_file=state_dir / "state.json",
            partitions=["batch"],
            poll_interval_s=10,
            fallback="release",
            fallback_after_s=20,
            wake_file=Path(os.environ["SLURM_CONF"]).parents[1] / "wake",
        )
        client = ServiceClient(service.url, TOKEN, "testbed", timeout_s=settings.deadline_s)
        bridge = Bridge(settings, make_backend(settings, SubprocessRunner()), client)
        runner = threading.Thread(target=bridge.run, kwargs={"stop": stop.is_set}, daemon=True)
        runner.start()
    t0 = time.monotonic()
    ids = submit_paced(name, jobs, lambda job: submit(job, partition), service, outage_s)
    (state_dir / "jobs.json").write_text(json.dumps(sorted(ids)))  # for --analyse
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        if not sh("squeue", "-h", "-u", ",".join(USERS), "-o", "%i").split():
            break
        time.sleep(5)
    elapsed_min = (time.monotonic() - t0) / 60
    rpcs = rpc_counts()
    stop.set()
    if runner is not None:
        runner.join(timeout=30)
    time.sleep(2)
    rows = records(Path(os.environ["SLURM_CONF"]).parents[1] / "log" / "jobcomp.txt", set(ids))
    result: dict[str, float | str] = {"run": name, **figures(rows)}
    # The benchmark's own sbatch and squeue calls (every 5 s once all are submitted) are
    # in every run alike.
    result["rpc_per_min"] = sum(rpcs.values()) / elapsed_min
    result["job_info_per_min"] = rpcs.get("REQUEST_JOB_INFO", 0) / elapsed_min
    result["node_info_per_min"] = rpcs.get("REQUEST_NODE_INFO", 0) / elapsed_min
    result["rpcs"] = json.dumps(rpcs, sort_keys=True)
    if bridge is not None and service is not None:
        audit = [
            json.loads(line) for line in bridge.settings.audit_log_path.read_text().splitlines()
        ]
        mismatches = [e for e in audit if e["event"] == "placement_mismatch"]
        result["misplaced"] = len(mismatches)
        for e in mismatches:
            print(
                f"  [{name}] job {e['job']} decided {e['decided']}, ran {e['real']}",
                file=sys.stderr,
            )
        result["reheld"] = sum(e["event"] == "reheld" for e in audit)
        result["left_out"] = len({e["job"] for e in audit if e["event"] == "left_out"})
        result["deferred"] = sum(e["event"] == "deferred" for e in audit)
        result["deferred_for_drift"] = sum(
            e["event"] == "deferred" and e["why"].startswith(DRIFT) for e in audit
        )
        result["fallback_periods"] = sum(e["event"] == "fallback_ended" for e in audit)
        result["cycles"] = bridge.metrics.counters.get("cycles_total", 0)
        service.stop()
        result.update(from_audit(state_dir / "cpsched.db", rows))
    return result


def from_audit(database: Path, rows: dict[str, tuple[int, int, int]]) -> dict[str, float | str]:
    """The figures a cpsched run's service audit gives."""
    return {
        **split_holds(database),
        **end_to_cycle(database, rows),
        **usable_ends(database, rows),
    }


def analyse(kept: Path) -> list[dict[str, float | str]]:
    """The job and audit figures of runs kept with ``--keep`` (computed again, so that a
    new figure can be had for old runs; the bridge's and slurmctld's are not kept)."""
    results: list[dict[str, float | str]] = []
    for state_dir in sorted(p for p in (kept / "runs").iterdir() if (p / "jobs.json").exists()):
        rows = records(kept / "jobcomp.txt", set(json.loads((state_dir / "jobs.json").read_text())))
        result: dict[str, float | str] = {"run": state_dir.name, **figures(rows)}
        if (state_dir / "cpsched.db").exists():
            result.update(from_audit(state_dir / "cpsched.db", rows))
        results.append(result)
    return results


def print_table(results: list[dict[str, float | str]]) -> None:
    keys = [k for r in results for k in r if k not in {"run", "rpcs"}]
    keys = list(dict.fromkeys(keys))
    print(f"{'':26}" + "".join(f"{r['run']:>12}" for r in results))
    for key in keys:
        cells = []
        for r in results:
            value = r.get(key, "-")
            cells.append(f"{value:>12.2f}" if isinstance(value, float) else f"{value!s:>12}")
        print(f"{key:26}" + "".join(cells))


def workload_arguments(parser: argparse.ArgumentParser, runs: str) -> None:
    """The options every live benchmark shares: the workload, the runs, the outage."""
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--start", type=int, default=20000, help="first trace line used")
    parser.add_argument("--jobs", type=int, default=150)
    parser.add_argument("--span", type=float, default=600.0, help="submission span, seconds")
    parser.add_argument("--runs", default=runs)
    parser.add_argument("--outage", type=float, default=60.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workload_arguments(parser, "slurm,easy,default")
    parser.add_argument(
        "--threads", type=int, default=1, help="hardware threads per core of every node"
    )
    parser.add_argument(
        "--slurm-scaled",
        action="store_true",
        help="run Slurm's scheduling at the workload's pace (bf_interval=1, bf_resolution=1, "
        "sched_interval=1, sched_min_interval=0) instead of its defaults, for every run",
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--keep",
        type=Path,
        help="copy each run's audit trail and logs, and the jobcomp and slurmctld logs here",
    )
    parser.add_argument(
        "--analyse", type=Path, metavar="DIR", help="run nothing: the figures of runs kept in DIR"
    )
    args = parser.parse_args()
    if args.analyse is not None:
        print_table(analyse(args.analyse))
        return
    if args.out is None:
        parser.error("--out is required (unless --analyse)")
    if args.keep is not None and (args.keep / "runs").exists():
        # A new test bed numbers its jobs from 1 again: runs kept together would mix.
        parser.error(f"{args.keep}/runs exists: keep each sitting in a directory of its own")
    if os.geteuid() != 0:
        sys.exit("live_slurm.py starts slurmd and creates users: run it as root")
    jobs = workload(args.trace, args.start, args.jobs, args.span)
    print(
        f"{len(jobs)} KTH jobs from line {args.start}: {sum(j.cpus > 8 for j in jobs)} over "
        f"8 CPUs, {sum(j.gpu for j in jobs)} GPU, {sum(j.two_nodes for j in jobs)} two-node",
        file=sys.stderr,
    )
    ensure_users()
    root = Path(tempfile.mkdtemp(prefix="cpsched-live-"))
    env = start_testbed(root, args.threads, args.slurm_scaled)
    results = []
    try:
        for name in args.runs.split(","):
            results.append(run_once(name, jobs, root / "runs", args.outage))
            args.out.write_text(json.dumps(results, indent=1))
    finally:
        sh("bash", str(TESTBED / "stop.sh"), str(root), env=env, check=False)
        if args.keep is not None:
            shutil.copytree(root / "runs", args.keep / "runs", dirs_exist_ok=True)
            for log in ("jobcomp.txt", "slurmctld.log"):  # slurmctld's: why a job stayed pending
                if (root / "log" / log).exists():
                    shutil.copy(root / "log" / log, args.keep)
        shutil.rmtree(root, ignore_errors=True)
    print_table(results)


if __name__ == "__main__":
    main()
