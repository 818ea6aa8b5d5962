"""Does a replay give the same answer on an idle machine and on a busy one (issue 39)?

    python bench/load_independence.py TRACE --system systems/T.toml --out DIR \
        [--jobs N] [--policy default] [--busy 2] [--only idle|busy]

replays TRACE with the policy twice through ``cpsched replay ... --no-timings
--no-plots``: first with nothing of this command's beside it (``idle``: say what else ran
on the machine), then with ``--busy`` processes spinning on the CPU beside it (``busy``).
Prints one line per run: the sha256 of its ``summary.json`` and ``jobs.csv``, the
replay's user CPU seconds and wall seconds, and the mean and highest 1-minute load average
sampled every 10 s while it ran (how busy the machine was, whatever made it so); then whether
the two runs' files are the same byte for byte. ``--only`` runs one of the two (a run
already under ``DIR`` is read, not run again, so the two can be made at different times).
Exits 1 when both runs exist and differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

RUNS = ("idle", "busy")
FILES = ("summary.json", "jobs.csv")
SPIN = "while True:\n    pass\n"
LOAD_EVERY_S = 10.0


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _replay(args: argparse.Namespace, out: Path) -> dict[str, float]:
    """Run the replay into ``out``; its user CPU and wall seconds and the load averages."""
    command = [
        sys.executable,
        "-m",
        "cpsched.cli",
        "replay",
        str(args.trace),
        "--system",
        str(args.system),
        "--policy",
        args.policy,
        "--no-timings",
        "--no-plots",
        "--out",
        str(out),
    ]
    if args.jobs is not None:
        command += ["--jobs", str(args.jobs)]
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(LOAD_EVERY_S):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    done.set()
    sampler.join()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"the replay failed (exit {code}): {' '.join(command)}")
    loads = loads or [os.getloadavg()[0]]
    return {
        "cpu_s": usage.ru_utime,
        "wall_s": time.perf_counter() - began,
        "load_mean": sum(loads) / len(loads),
        "load_max": max(loads),
    }


def _run(args: argparse.Namespace, name: str) -> dict[str, object]:
    """One run's record, read from ``DIR/name/run.json`` when it was made before."""
    out = args.out / name
    record = out / "run.json"
    if record.exists():
        return dict(json.loads(record.read_text()))
    spinners = []
    if name == "busy":
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)]
    try:
        figures = _replay(args, out)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    run: dict[str, object] = {
        **figures,
        "busy": len(spinners),
        **{f: _sha256(out / f) for f in FILES},
    }
    record.write_text(json.dumps(run, indent=1))
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--system", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--policy", default="default")
    parser.add_argument("--busy", type=int, default=2, help="processes spinning beside")
    parser.add_argument("--only", choices=RUNS, default=None)
    args = parser.parse_args()
    runs = {}
    for name in RUNS:
        if args.only in (None, name) or (args.out / name / "run.json").exists():
            runs[name] = _run(args, name)
    print(
        "| run | spinning beside | summary.json | jobs.csv | user CPU s | wall s | load mean, max |"
    )
    print("|---|---:|---|---|---:|---:|---|")
    for name, run in runs.items():
        print(
            f"| {name} | {run['busy']} | {str(run['summary.json'])[:16]}… "
            f"| {str(run['jobs.csv'])[:16]}… | {run['cpu_s']:,.0f} | {run['wall_s']:,.0f} "
            f"| {run['load_mean']:.1f}, {run['load_max']:.1f} |"
        )
    if len(runs) < 2:
        return 0
    same = all(runs["idle"][f] == runs["busy"][f] for f in FILES)
    print(f"\nidle and busy: {'the same' if same else 'DIFFERENT'} {' and '.join(FILES)}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
