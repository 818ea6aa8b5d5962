"""sha256 of the replay's jobs.csv for the schedules that must not change when only speed
does (issue 43): EASY on first-fit with the requests and ``--policy today`` on KTH, CTC,
HPC2N and Curie's first 50,000 jobs, and ``--policy unbounded`` (CP, limited by solver
work, so deterministic; the default without its wait bound and with the first restart's
work limit as the digests were first taken) on the first 2,000 jobs of KTH and CTC.

    python bench/schedule_digests.py [--traces DIR] [--only SUBSTRING] [--check FILE]

Prints one line per replay: its name, the digest and the replay's wall seconds. With
``--check FILE`` (a former output) it also says, per replay, whether the digest is the
same, and exits 1 if one differs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from cpsched.replay.runner import ReplaySettings, run_replay
from cpsched.runtime.policy import NO_WAIT_BOUND, Policy

EASY_FIRST_FIT: dict[str, Any] = {
    "dispatcher": "easy",
    "allocator": "first-fit",
    "predictor": "wall-time",
    **NO_WAIT_BOUND,
}
"""bench/accasim_vs_cpsched.sh's replay: the default policy with these changed (plain
EASY, as AccaSim's: no start guarantees)."""

TRACES: dict[str, tuple[str, str | None, int | None]] = {
    "KTH": ("KTH-SP2-1996-2.1-cln.swf.gz", None, None),
    "CTC": ("CTC-SP2-1996-3.1-cln.swf.gz", None, None),
    "HPC2N": ("HPC2N-2002-2.2-cln.swf.gz", None, None),
    "Curie": ("CEA-Curie-2011-2.1-cln.swf.gz", "curie.toml", 50_000),
}
"""Trace file, system file under systems/ (None: the SWF header's machine), jobs."""

SYSTEMS = Path(__file__).resolve().parent.parent / "systems"

FIRST_DIGESTS_WORK: dict[str, Any] = {"cp_work_limit": 0.005}
"""The CP search's first restart as the digests were first taken (the default's is
smaller now), so that a former output still checks the same schedules."""

RUNS: list[tuple[str, str, str, dict[str, Any], int | None]] = [
    *((f"{t} easy-ff", t, "default", EASY_FIRST_FIT, None) for t in TRACES),
    *((f"{t} today", t, "today", {}, None) for t in TRACES),
    *((f"{t} default-2000", t, "unbounded", FIRST_DIGESTS_WORK, 2000) for t in ("KTH", "CTC")),
]
"""(name, trace, named policy, changes, jobs): ``jobs`` None is the trace's own limit."""


def digest(traces: Path, trace: str, policy: Policy, jobs: int | None) -> tuple[str, float]:
    file, system, limit = TRACES[trace]
    with TemporaryDirectory() as out:
        settings = ReplaySettings(
            trace=traces / file,
            out=Path(out),
            policy=policy,
            system=None if system is None else SYSTEMS / system,
            jobs=jobs if jobs is not None else limit,
            plots=False,
            timings=False,
        )
        began = time.perf_counter()
        run_replay(settings)
        took = time.perf_counter() - began
        return hashlib.sha256((Path(out) / "jobs.csv").read_bytes()).hexdigest(), took


def main() -> None:
    here = Path(__file__).resolve().parent
    default = os.environ.get("CPSCHED_TRACES", str(here.parent.parent / "shared/data/traces"))
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=Path, default=Path(default))
    parser.add_argument("--only", default="", help="Only the replays whose name has this.")
    parser.add_argument("--check", type=Path, help="A former output to compare with.")
    args = parser.parse_args()
    expected: dict[str, str] = {}
    if args.check is not None:
        for line in args.check.read_text().splitlines():
            name, _, rest = line.partition("  ")
            if rest:
                expected[name.strip()] = rest.split()[0]
    differ = 0
    for name, trace, named, changes, jobs in RUNS:
        if args.only not in name:
            continue
        sha, took = digest(args.traces, trace, Policy.named(named, **changes), jobs)
        verdict = ""
        if name in expected:
            same = expected[name] == sha
            differ += not same
            verdict = "  same" if same else "  DIFFERS"
        print(f"{name:<20}  {sha}  {took:7.1f} s{verdict}", flush=True)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
