"""The set-up itself: ``./dev setup`` offline once installed, and the Slurm test bed's
install list against the commands its start.sh runs (a fresh Debian 12 lacked the
``mariadb`` client the test bed called)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
START = REPO / "tests" / "slurm_bridge" / "testbed" / "start.sh"
SLURM_COMMANDS = (
    "slurmctld",
    "slurmd",
    "slurmdbd",
    "slurmrestd",
    "sinfo",
    "squeue",
    "scontrol",
    "sacctmgr",
    "munged",
    "munge",
    "unmunge",
    "mariadb",
)
"""Commands of Debian's Slurm, munge and MariaDB client packages; the others start.sh
runs (bash, coreutils, flock, awk, ...) are on every Debian."""


def test_the_test_beds_install_list_covers_every_command_it_runs() -> None:
    script = START.read_text()
    body = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))
    used = {c for c in SLURM_COMMANDS if re.search(rf"(?<![\w/-]){c}(?![\w-])", body)}
    assert {"slurmctld", "slurmd", "mariadb", "munged"} <= used
    guarded = set(re.findall(r"command -v (\S+) >/dev/null", body))
    install = re.search(r"install -y -qq --no-install-recommends (.*?) >/dev/null", body, re.S)
    assert install is not None
    packages = set(install.group(1).replace("\\", " ").split())
    # a missing command triggers the install, for every daemon and client it starts first
    assert {"slurmctld", "slurmd", "sinfo", "munged", "slurmdbd", "mariadb"} <= guarded
    assert {"slurmctld", "slurmd", "slurm-client", "munge", "slurmdbd", "mariadb-client"} <= (
        packages
    )
    if shutil.which("dpkg") is None:
        return
    provided = packages | _dependencies(packages)
    for command in sorted(used):
        found = shutil.which(command) or shutil.which(command, path="/usr/sbin:/sbin")
        if found is None:
            continue  # not installed yet here: the guard above installs it
        owner = subprocess.run(
            ["dpkg", "-S", os.path.realpath(found)], capture_output=True, text=True, check=False
        ).stdout.split(":")[0]
        assert owner in provided, (command, owner, packages)


def _dependencies(packages: set[str]) -> set[str]:
    """The packages the installed ones among ``packages`` depend on (one level)."""
    found: set[str] = set()
    for package in packages:
        depends = subprocess.run(
            ["dpkg-query", "-W", "-f=${Depends}", package],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        found |= {re.split(r"[\s:(]", part.strip())[0] for part in re.split(r"[,|]", depends)}
    return found


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_dev_setup_needs_no_network_once_installed() -> None:
    """``./dev setup`` with no network at all (a new network namespace): the stamp of the
    installed .venv matches, nothing is fetched."""
    if not (REPO / ".venv" / ".cpsched-setup").exists():
        pytest.skip("no .venv installed by ./dev setup here")
    argv = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-r", "-n"]
    done = subprocess.run(
        [*argv, "./dev", "setup"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "setting up" not in done.stderr and "updating" not in done.stderr
