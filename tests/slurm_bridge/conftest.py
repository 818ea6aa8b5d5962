"""Fixtures of the bridge tests: a real Slurm test bed and a real cpsched service.

The test bed runs the Slurm found on the machine: Debian 12's 22.05, or, inside the Debian
13 root of ``testbed/debian13-run.sh`` (``./dev test-slurm-24.11``), Debian 13's 24.11.

The test bed is started once per session by ``testbed/start.sh`` (which installs the
Debian packages when missing) and stopped by ``testbed/stop.sh`` using its pid files.
If it cannot start, ``slurm`` tests fail when ``CI`` is set and are skipped otherwise.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cpsched.cli.local_service import LocalService, write_config
from cpsched.slurm_bridge.loop import Bridge, CycleReport
from cpsched.slurm_bridge.runner import SubprocessRunner
from tests.dbservers import MariadbServer
from tests.slurm_bridge.pbs_cluster import PbsCluster, start_pbs

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TESTBED = HERE / "testbed"
KIT = REPO / "slurm_bridge" / "kit"
FIXTURES = HERE / "fixtures"
TOKEN = "bridge-test-token-0123"


def pytest_report_header() -> str:
    """Which Slurm the ``slurm`` tests meet (the machine's, or the Debian 13 root's)."""
    found = shutil.which("slurmctld")
    if found is None:
        return "slurm test bed: Slurm not installed yet (start.sh installs Debian's)"
    version = subprocess.run([found, "-V"], capture_output=True, text=True, check=False)
    return f"slurm test bed: {version.stdout.strip() or version.stderr.strip()}"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Slurm test bed unavailable in CI: {reason}")
    pytest.skip(f"Slurm test bed unavailable: {reason}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_block(size: int) -> int:
    """A first port such that ``size`` consecutive ports are free (slurmd ports).

    Each xdist worker scans its own range: two workers' test beds start at once, and a
    block both found free before either bound it was taken twice (seen in CI). Within it
    the scan starts at a random block: two test runs on one machine (a second clone's
    CI) share the workers' names, and took the same block at once (seen)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = 17100 + 2000 * (int(worker) if worker.isdigit() else 0)
    blocks = list(range(first, first + 2000 - size, 37))
    offset = random.randrange(len(blocks))
    for base in blocks[offset:] + blocks[:offset]:
        ok = True
        for port in range(base, base + size):
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no block of free ports")


@dataclass
class AsUser:
    """A runner that runs each command as ``user`` (``runuser``, environment kept): the
    bridge under a site's least-privileged account."""

    user: str
    inner: SubprocessRunner = field(default_factory=lambda: SubprocessRunner(timeout_s=30))

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> str:
        return self.inner.run(["runuser", "-u", self.user, "--", *argv], env=env)


@dataclass
class Testbed:
    __test__ = False  # not a test class, despite the name

    root: Path
    env: dict[str, str]
    wake: Path = Path("/nonexistent")
    nodes: list[str] = field(default_factory=lambda: ["node1", "node2", "gpu1", "gpu2"])

    @property
    def slurm_version(self) -> tuple[int, int]:
        """(major, minor) of the test bed's Slurm (``scontrol --version``)."""
        words = self.run("scontrol", "--version").split()
        major, minor = words[-1].split(".")[:2]
        return int(major), int(minor)

    @property
    def pins_splits(self) -> bool:
        """Whether a decided split can be pinned by a core reservation (22.05); 24.11
        takes no per-node core counts: task jobs start on Slurm's own split there."""
        return self.slurm_version < (24, 11)

    def run(self, *argv: str, check: bool = True) -> str:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, env=self.env, check=False, timeout=60
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{argv} failed: {done.stderr}")
        return done.stdout

    def sbatch(self, *options: str, script: str = "sleep 30") -> str:
        out = self.run(
            "sbatch",
            "--parsable",
            "-o",
            "/dev/null",
            "-D",
            str(self.root / "jobs"),
            *options,
            "--wrap",
            script,
        )
        return out.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """One job's fields from ``squeue`` (state, nodes, limit in minutes, priority)."""
        out = self.run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%i|%T|%N|%l|%Q|%r|%M")
        for line in out.splitlines():
            jid, state, nodes, limit, prio, reason, elapsed = line.split("|")
            if jid == job_id:
                return {
                    "state": state,
                    "nodes": nodes,
                    "limit": limit,
                    "priority": prio,
                    "reason": reason,
                    "elapsed": elapsed,
                }
        return {
            "state": "GONE",
            "nodes": "",
            "limit": "",
            "priority": "",
            "reason": "",
            "elapsed": "",
        }

    def wait_state(self, job_id: str, states: set[str], timeout_s: float = 30) -> dict[str, str]:
        end = time.monotonic() + timeout_s
        info = self.job(job_id)
        while info["state"] not in states and time.monotonic() < end:
            time.sleep(0.25)
            info = self.job(job_id)
        return info

    def wait_visible(self, job_ids: list[str], timeout_s: float = 15) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if all(self.job(j)["state"] != "GONE" for j in job_ids):
                return
            time.sleep(0.2)

    def cancel_all(self) -> None:
        ids = self.run("squeue", "-h", "-o", "%i", check=False).split()
        if ids:
            self.run("scancel", *ids, check=False)
            end = time.monotonic() + 20
            while (
                time.monotonic() < end
                and self.run(
                    "squeue", "-h", "-t", "running,completing", "-o", "%i", check=False
                ).strip()
            ):
                time.sleep(0.25)


def start_testbed(root: Path, db: MariadbServer | None = None, **options: str) -> Iterator[Testbed]:
    """A test bed started by ``start.sh`` under ``root`` (``options``: its environment
    settings, e.g. ``THREADS``), stopped when the generator is closed. ``db``: the tests'
    own MariaDB, where slurmdbd stores (needed unless ``WITH_DBD="0"``)."""
    if sys.platform != "linux":
        _unavailable("needs Linux")
    if os.geteuid() != 0:
        _unavailable("needs root (slurmd and apt-get)")
    if shutil.which("bash") is None:
        _unavailable("bash missing")
    # munge refuses group/world-writable parents; pytest's temp dirs are 0700, fine.
    # start.sh installs the kit (job_submit.lua, cpsched-wake) with shadowq left to Slurm
    # for shadow-mode tests and the wake file at root/wake.
    wake = root / "wake"
    env = {
        **os.environ,
        "CTLD_PORT": str(free_port()),
        "SLURMD_BASE_PORT": str(free_port_block(4)),
        "DBD_PORT": str(free_port()),
        "KIT_DIR": str(KIT),
        "SLURM_CONF": f"{root}/etc/slurm.conf",
        **(db.env if db is not None else {}),
        **options,
    }
    if db is None and env.get("WITH_DBD", "1") != "0":
        raise ValueError("a test bed with slurmdbd needs the tests' MariaDB (db=...)")
    started = subprocess.run(
        ["bash", str(TESTBED / "start.sh"), str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    bed = Testbed(root=root, env={**os.environ, "SLURM_CONF": env["SLURM_CONF"]}, wake=wake)
    try:
        if started.returncode != 0:
            # The whole of what start.sh printed on failing: the tails of every daemon's
            # log (a bed whose nodes never came up was seen once in CI, its cause cut off).
            _unavailable(f"start.sh failed: {started.stderr.strip()[-6000:]}")
        yield bed
    finally:
        subprocess.run(
            ["bash", str(TESTBED / "stop.sh"), str(root)],
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )


def emptied(bed: Testbed, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Around one test: Slurm's commands aimed at ``bed``, and no job left before or after."""
    monkeypatch.setenv("SLURM_CONF", bed.env["SLURM_CONF"])
    bed.cancel_all()
    yield
    bed.cancel_all()


@pytest.fixture(scope="session")
def slurm_testbed(
    tmp_path_factory: pytest.TempPathFactory, mariadb_server: MariadbServer
) -> Iterator[Testbed]:
    """Two 4-CPU nodes and two 8-CPU GPU nodes, with slurmdbd and slurmrestd."""
    yield from start_testbed(tmp_path_factory.mktemp("slurmtb"), mariadb_server)


@pytest.fixture(scope="module")
def two_thread_testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """Two nodes of 2 cores × 2 hardware threads (4 CPUs), ``CR_Core_Memory``: Slurm
    gives each job whole cores. Small and quick: no GPUs, slurmdbd or slurmrestd."""
    root = tmp_path_factory.mktemp("slurmtb_ht")
    yield from start_testbed(
        root, THREADS="2", CPU_NODES="2", GPU_NODES="0", WITH_DBD="0", WITH_RESTD="0"
    )


def serve(root: Path, defaults: dict[str, object]) -> Iterator[LocalService]:
    """A real ``cpsched serve`` process with the policy ``defaults`` (SQLite under
    ``root``), stoppable to exercise the bridge's fallbacks; stopped at the end."""
    config = write_config(root / "service.toml", f"sqlite:///{root}/cpsched.db", TOKEN, defaults)
    service = LocalService(config, free_port(), root / "service.log")
    service.start()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="module")
def cpsched_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalService]:
    defaults = {
        "dispatcher": "easy",
        "allocator": "best-fit",
        "predictor": "last-two",
        "correction": "simple",
        "correction_step": 600,
        "correction_lead": 60,
        "deadline": 2.0,
    }
    yield from serve(tmp_path_factory.mktemp("service"), defaults)


TRIAL_S = 20
"""The trial runs' seconds in the live tests (test_slurm_trials, test_pbs_trials)."""


@pytest.fixture(scope="module")
def trial_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalService]:
    """A real ``cpsched serve`` whose policy tries jobs for TRIAL_S seconds; FCFS, so that
    a wide job at the head of the queue leaves cores idle behind it."""
    defaults = {
        "dispatcher": "fcfs",
        "allocator": "best-fit",
        "predictor": "last-two",
        "trial_run": TRIAL_S,
        "deadline": 2.0,
    }
    yield from serve(tmp_path_factory.mktemp("trial_service"), defaults)


@pytest.fixture(scope="module")
def hooked_pbs(pbs: PbsCluster) -> Iterator[PbsCluster]:
    """The real PBS with the kit's hook installed (every new job held for cpsched) for
    one module's tests; every job deleted and the hook removed after them."""
    pbs.install_hook()
    try:
        yield pbs
    finally:
        pbs.delete_all()
        pbs.remove_hook()


def decided_cycle(bridge: Bridge) -> CycleReport:
    """One bridge cycle, which must have got the service's decision."""
    report = bridge.cycle()
    assert report.service_error is None and report.decision is not None, report
    return report


def tried_first(bridge: Bridge, blocker: str, short: str, long: str) -> dict[str, int]:
    """The first cycle of the trial tests: FCFS starts ``blocker`` and stops at the wide
    job behind it; the cores left idle go for a trial to ``short`` and ``long`` and to no
    other job. ``long``'s allocation."""
    first = decided_cycle(bridge)
    assert first.decision is not None
    trials = {s.job_id: s.trial_s for s in first.decision.starts}
    assert trials == {blocker: None, short: TRIAL_S, long: TRIAL_S}, first.decision
    assert first.applied is not None and set(first.applied.started) == set(trials)
    return first.applied.started[long]


def trial_ends(bridge: Bridge) -> list[str]:
    """Cycle until a running trial is over: the jobs put back then ([] if none was)."""
    deadline = time.monotonic() + TRIAL_S + 30
    while time.monotonic() < deadline:
        time.sleep(2)
        ended = decided_cycle(bridge).trials_ended
        if ended:
            return ended
    return []


def started_again(bridge: Bridge, job_id: str, timeout_s: float = 240) -> dict[str, int]:
    """Cycle until the bridge starts ``job_id`` (put back by a trial) again, for good
    (never as a second trial): the allocation it started it on ({} if it did not)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(3)
        report = decided_cycle(bridge)
        assert report.decision is not None
        assert all(s.trial_s is None for s in report.decision.starts if s.job_id == job_id)
        if report.applied is not None and job_id in report.applied.started:
            return report.applied.started[job_id]
    return {}


def audited(bridge: Bridge) -> list[tuple[str, str]]:
    """The bridge's audit trail as (event, job) pairs, for the entries about a job."""
    lines = bridge.settings.audit_log_path.read_text().splitlines()
    return [(e["event"], e["job"]) for e in map(json.loads, lines) if "job" in e]


@pytest.fixture(scope="session")
def pbs() -> Iterator[PbsCluster]:
    """A real OpenPBS for the session (``pbs`` tests, inside the OpenPBS root)."""
    yield from start_pbs()
