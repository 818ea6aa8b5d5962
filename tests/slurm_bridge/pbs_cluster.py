"""A real OpenPBS cluster for the ``pbs`` tests, inside the root of ``pbs_testbed/``.

``./dev test-pbs`` (and ``./dev test``) run ``pytest -m pbs`` through
``pbs_testbed/pbs-run.sh``: OpenPBS built from ``../shared/pbs/openpbs-src.tar.gz``, its
commands on PATH, a fresh PBS_HOME. The cluster is started once per session by
``pbs_testbed/start.sh`` and stopped by ``stop.sh``. Outside that root there is no PBS:
the tests fail under ``CI`` and are skipped otherwise, saying how to run them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
TESTBED = HERE / "pbs_testbed"
KIT = HERE.parents[1] / "slurm_bridge" / "kit"
USER = "pbstest"
NODES = ("cn01", "cn02", "cn03", "cn04", "gn01")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"OpenPBS test bed unavailable in CI: {reason}")
    pytest.skip(f"OpenPBS test bed unavailable: {reason} (run ./dev test-pbs)")


@dataclass
class PbsCluster:
    """The running test bed: PBS's commands, as a Manager (root) or as its user."""

    __test__ = False

    def run(self, *argv: str, check: bool = True) -> str:
        done = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=60)
        if check and done.returncode != 0:
            raise AssertionError(f"{argv} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def qsub(self, *options: str, script: str = "/bin/sleep 30", user: str = USER) -> str:
        """Submit as ``user`` (PBS refuses root's jobs unless allowed); the job id."""
        argv = ["/opt/pbs/bin/qsub", "-o", "/dev/null", "-e", "/dev/null", *options, "--"]
        command = " ".join([*argv, script])
        done = subprocess.run(
            ["su", "-", user, "-c", command],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if done.returncode != 0:
            raise AssertionError(f"qsub {options} refused: {done.stderr.strip()}")
        return done.stdout.strip()

    def rsub(self, *options: str, user: str = USER) -> str:
        """An advance reservation made by ``user`` (``pbs_rsub``), once PBS confirmed it:
        its id."""
        command = " ".join(["/opt/pbs/bin/pbs_rsub", *options])
        done = subprocess.run(
            ["su", "-", user, "-c", command], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise AssertionError(f"pbs_rsub {options} refused: {done.stderr.strip()}")
        resv_id = done.stdout.split()[0]  # "R12.pbshead UNCONFIRMED"
        end = time.monotonic() + 30
        while "RESV_CONFIRMED" not in self.run("pbs_rstat", "-f", resv_id):
            if time.monotonic() > end:
                raise AssertionError(f"reservation {resv_id} not confirmed in 30 s")
            time.sleep(0.25)
        return resv_id

    def job(self, job_id: str) -> dict[str, Any]:
        """The job's ``qstat -x -f -F json`` record ({} once PBS forgot it)."""
        out = self.run("qstat", "-x", "-f", "-F", "json", job_id, check=False)
        if not out.strip():
            return {}
        return dict(next(iter((json.loads(out).get("Jobs") or {}).values()), {}))

    def hosts(self) -> dict[str, str]:
        """Each vnode's host (``resources_available.host``), as ``pbsnodes`` says."""
        doc = json.loads(self.run("pbsnodes", "-av", "-F", "json"))
        return {
            name: str(raw.get("resources_available", {}).get("host", name))
            for name, raw in doc["nodes"].items()
        }

    def exec_vnodes(self, job_id: str) -> list[list[str]]:
        """The vnodes of each chunk of the job's ``exec_vnode``, in order."""
        text = str(self.job(job_id).get("exec_vnode", ""))
        return [
            [piece.split(":", 1)[0] for piece in chunk.split("+")]
            for chunk in re.findall(r"\(([^)]*)\)", text)
        ]

    def exec_hosts(self, job_id: str) -> list[str]:
        """The host of each chunk of the job (a chunk never spans hosts), in order."""
        hosts = self.hosts()
        return [hosts[vnodes[0]] for vnodes in self.exec_vnodes(job_id)]

    def wait_state(self, job_id: str, states: set[str], timeout_s: float = 30) -> dict[str, Any]:
        end = time.monotonic() + timeout_s
        info = self.job(job_id)
        while info.get("job_state") not in states and time.monotonic() < end:
            time.sleep(0.25)
            info = self.job(job_id)
        return info

    def install_hook(self) -> None:
        """The kit's queuejob hook, as docs/bridge.md tells a site to install it."""
        self.run("qmgr", "-c", "create hook cpsched_hold event=queuejob", check=False)
        self.run(
            "qmgr",
            "-c",
            f"import hook cpsched_hold application/x-python default {KIT / 'pbs_queuejob_hold.py'}",
        )

    def remove_hook(self) -> None:
        self.run("qmgr", "-c", "delete hook cpsched_hold", check=False)

    def delete_all(self) -> None:
        """Every job gone (running ones killed), history kept."""
        doc = json.loads(self.run("qstat", "-f", "-F", "json") or "{}")
        ids = list((doc.get("Jobs") or {}).keys())
        if ids:
            self.run("qdel", "-W", "force", *ids, check=False)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            doc = json.loads(self.run("qstat", "-f", "-F", "json") or "{}")
            if not doc.get("Jobs"):
                return
            time.sleep(0.25)


def start_pbs() -> Iterator[PbsCluster]:
    if os.geteuid() != 0:
        _unavailable("needs root")
    if shutil.which("qstat") is None or not Path("/opt/pbs/sbin/pbs_server").exists():
        _unavailable("no OpenPBS here: the tests run inside pbs_testbed/pbs-run.sh")
    started = subprocess.run(
        ["bash", str(TESTBED / "start.sh")], capture_output=True, text=True, check=False
    )
    if started.returncode != 0:
        subprocess.run(["bash", str(TESTBED / "stop.sh")], check=False)
        _unavailable(f"start.sh failed: {started.stderr.strip()[-2000:]}")
    try:
        yield PbsCluster()
    finally:
        subprocess.run(["bash", str(TESTBED / "stop.sh")], check=False)
