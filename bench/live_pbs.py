"""Live benchmark: PBS's own scheduler, then cpsched active, on one real OpenPBS.

Runs inside the OpenPBS root (``tests/slurm_bridge/pbs_testbed/pbs-run.sh``): starts a
one-machine OpenPBS 23.06 (8 vnodes of 4 cpus, 2 of 8 cpus and 2 GPUs in queue gpuq;
``pbs_testbed/start.sh``) with PBS's scheduler cycling every second (``SCHED_SCALE=1``:
the workload's compressed time scale; PBS also cycles at each submission and end), and
replays the same window of a real trace as ``live_slurm.py`` does (150 KTH jobs, their
submissions spread over ten minutes) three times, one run after the other:

* ``pbs``: no hook: PBS's own scheduler runs the jobs;
* ``easy`` and ``default``: the kit's hooks hold every job (and wake the bridge at each
  submission and end); ``cpsched serve`` + the bridge start them with ``qrun -H`` (EASY
  with last-two, then the service's default policy), the service stopped for 60 s two
  thirds through (fallback "release" after 20 s).

Jobs of 1-4 cpus are one chunk, larger ones one chunk per cpu (PBS spreads them over
vnodes), every 7th even-sized one of 2-8 cpus two chunks on two vnodes
(``place=vscatter``; larger two-node jobs are spread like the others: a chunk must fit a
4-cpu vnode), every 10th a GPU job in gpuq. Three more jobs per run are held by their
users (``qsub -h``) and must never start. Prints one table and writes the figures as
JSON. Asserts nothing.

    tests/slurm_bridge/pbs_testbed/pbs-run.sh python bench/live_pbs.py --out /tmp/pbs.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from live_slurm import (
    TOKEN,
    BenchJob,
    figures,
    print_table,
    sh,
    submit_paced,
    workload,
    workload_arguments,
)
from live_slurm import USERS as SLURM_USERS

from cpsched.cli.local_service import LocalService, free_port, write_config
from cpsched.slurm_bridge.config import BridgeSettings
from cpsched.slurm_bridge.factory import make_backend
from cpsched.slurm_bridge.loop import Bridge
from cpsched.slurm_bridge.pbs import exec_vnode_chunks, parse_vnodes, pbs_time
from cpsched.slurm_bridge.pbs_hosts import HostLayout
from cpsched.slurm_bridge.runner import SubprocessRunner
from cpsched.wire.client import ServiceClient

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / "slurm_bridge" / "kit"
TESTBED = REPO / "tests" / "slurm_bridge" / "pbs_testbed"
USERS = [f"pbsbench{i}" for i in range(1, 5)]
USER_HELD = 3


def ensure_users() -> None:
    """Bench users with a home and a shell: PBS's mom runs each job in its user's home."""
    for user in USERS:
        if subprocess.run(["id", user], capture_output=True, check=False).returncode != 0:
            sh("useradd", "-m", "-s", "/bin/sh", user)


def qsub_options(job: BenchJob) -> list[str]:
    walltime = job.limit_min * 60
    options = ["-N", f"kth{job.index}", "-l", f"walltime={walltime}"]
    if job.gpu:
        return [*options, "-q", "gpuq", "-l", f"select=1:ncpus={job.cpus}:ngpus=1"]
    if job.two_nodes and job.cpus // 2 <= 4:
        half = job.cpus // 2
        return [*options, "-l", f"select=2:ncpus={half}", "-l", "place=vscatter"]
    if job.cpus <= 4:
        return [*options, "-l", f"select=1:ncpus={job.cpus}"]
    return [*options, "-l", f"select={job.cpus}:ncpus=1"]


def qsub(user: str, options: list[str], seconds: int) -> str:
    argv = ["runuser", "-u", user, "--", "/opt/pbs/bin/qsub", "-S", "/bin/sh"]
    argv += ["-o", "/dev/null", "-e", "/dev/null", *options, "--", "/bin/sleep", str(seconds)]
    return sh(*argv).strip()


def install_hooks(wake: Path) -> None:
    """The kit's hooks, their wake file set to the bridge's."""
    for name, source, event in (
        ("cpsched_hold", "pbs_queuejob_hold.py", "queuejob"),
        ("cpsched_wake", "pbs_wake.py", "jobobit"),
    ):
        text = (KIT / source).read_text()
        text = text.replace('Path("/var/lib/cpsched-bridge/wake")', f'Path("{wake}")')
        copy = wake.parent / source
        copy.write_text(text)
        sh("qmgr", "-c", f"create hook {name} event={event}")
        sh("qmgr", "-c", f"import hook {name} application/x-python default {copy}")


def remove_hooks() -> None:
    for name in ("cpsched_hold", "cpsched_wake"):
        sh("qmgr", "-c", f"delete hook {name}", check=False)


def all_jobs() -> dict[str, Any]:
    return dict(json.loads(sh("qstat", "-t", "-x", "-f", "-F", "json") or "{}").get("Jobs") or {})


def rows_of(jobs: dict[str, Any], ids: set[str]) -> dict[str, tuple[int, int, int]]:
    """submit, start, end of each bench job that ran and ended (PBS's own times)."""
    rows: dict[str, tuple[int, int, int]] = {}
    for job_id in ids:
        raw = jobs.get(job_id) or {}
        submit, start = pbs_time(raw.get("qtime")), pbs_time(raw.get("stime"))
        end = pbs_time(raw.get("obittime") or raw.get("mtime"))
        if raw.get("job_state") == "F" and submit and start and end:
            rows[job_id] = (submit, start, end)
    return rows


def run_once(name: str, jobs: list[BenchJob], work: Path, outage_s: float) -> dict[str, Any]:
    state_dir = work / name
    state_dir.mkdir(parents=True, exist_ok=True)
    wake = state_dir / "wake"
    service = bridge = thread = None
    stop = threading.Event()
    if name != "pbs":
        install_hooks(wake)
        defaults: dict[str, object] = (
            {"dispatcher": "easy", "predictor": "last-two", "allocator": "best-fit"}
            if name == "easy"
            else {}
        )
        config = write_config(
            state_dir / "service.toml", f"sqlite:///{state_dir}/cpsched.db", TOKEN, defaults
        )
        service = LocalService(config, free_port(), state_dir / "service.log")
        service.start()
        settings = BridgeSettings(
            backend="pbs",
            service_url=service.url,
            token=TOKEN,
            cluster="pbs-testbed",
            state_file=state_dir / "state.json",
            partitions=["workq", "gpuq"],
            poll_interval_s=10,
            fallback="release",
            fallback_after_s=20,
            wake_file=wake,
        )
        client = ServiceClient(service.url, TOKEN, "pbs-testbed", timeout_s=settings.deadline_s)
        bridge = Bridge(settings, make_backend(settings, SubprocessRunner()), client)
        thread = threading.Thread(target=bridge.run, kwargs={"stop": stop.is_set}, daemon=True)
        thread.start()
    held_by_users = [
        qsub(USERS[i % len(USERS)], ["-h", "-N", f"mine{i}", "-l", "select=1:ncpus=1"], 5)
        for i in range(USER_HELD)
    ]
    ids = set(
        submit_paced(
            name, jobs, lambda job: qsub(job.user, qsub_options(job), job.run), service, outage_s
        )
    )
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        states = all_jobs()
        if all((states.get(j) or {}).get("job_state") == "F" for j in ids):
            break
        time.sleep(5)
    stop.set()
    if thread is not None:
        thread.join(timeout=30)
    final = all_jobs()
    rows = rows_of(final, ids)
    result: dict[str, Any] = {"run": name, **figures(rows)}
    result["never_started"] = len(ids) - len(rows)
    result["user_held_started"] = sum(
        bool((final.get(j) or {}).get("stime")) for j in held_by_users
    )
    sh("qdel", *held_by_users, check=False)
    if bridge is not None and service is not None:
        audit = [
            json.loads(line) for line in bridge.settings.audit_log_path.read_text().splitlines()
        ]
        decided = {e["job"]: e["allocation"] for e in audit if e["event"] == "start"}
        # Decisions name hosts (the nodes the service knows); PBS reports vnodes.
        hosts = HostLayout.of(parse_vnodes(json.loads(sh("pbsnodes", "-av", "-F", "json")), []))
        elsewhere = []
        for job_id, allocation in decided.items():
            exec_vnode = str((final.get(job_id) or {}).get("exec_vnode", ""))
            real = hosts.chunks_per_node(exec_vnode_chunks(exec_vnode))
            if set(real) != set(allocation):
                elsewhere.append(job_id)
                print(f"  [{name}] job {job_id} decided {allocation}, ran {real}", file=sys.stderr)
        result["started_by_cpsched"] = len(decided)
        result["elsewhere_than_decided"] = len(elsewhere)
        result["started_by_pbs"] = len(rows) - len(set(decided) & set(rows))
        result["reheld"] = sum(e["event"] == "reheld" for e in audit)
        result["left_out"] = len({e["job"] for e in audit if e["event"] == "left_out"})
        result["fallback_periods"] = sum(e["event"] == "fallback_ended" for e in audit)
        result["cycles"] = bridge.metrics.counters.get("cycles_total", 0)
        service.stop()
        remove_hooks()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workload_arguments(parser, "pbs,easy,default")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("live_pbs.py starts PBS and creates users: run it as root, in the PBS root")
    jobs = workload(args.trace, args.start, args.jobs, args.span)
    for job in jobs:
        job.user = USERS[SLURM_USERS.index(job.user)]  # the same four users, PBS's own
    print(
        f"{len(jobs)} KTH jobs from line {args.start}: {sum(j.cpus > 4 for j in jobs)} over "
        f"4 cpus, {sum(j.gpu for j in jobs)} GPU, "
        f"{sum(j.two_nodes and j.cpus <= 8 for j in jobs)} two-vnode",
        file=sys.stderr,
    )
    ensure_users()
    env = {**os.environ, "CN_VNODES": "8", "GN_VNODES": "2", "SCHED_SCALE": "1"}
    subprocess.run(["bash", str(TESTBED / "start.sh")], env=env, check=True)
    work = Path(tempfile.mkdtemp(prefix="cpsched-live-pbs-"))
    work.chmod(0o755)
    results = []
    try:
        for name in args.runs.split(","):
            results.append(run_once(name, jobs, work, args.outage))
            args.out.write_text(json.dumps(results, indent=1))
    finally:
        subprocess.run(["bash", str(TESTBED / "stop.sh")], check=False)
    print_table(results)


if __name__ == "__main__":
    main()
