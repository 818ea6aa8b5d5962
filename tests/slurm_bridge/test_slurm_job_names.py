"""Job names are free text: Slurm 22.05 takes ``|``, line breaks and whole lines of other
commands' output in them, and prints them as they are. On a test bed of its own, since
the names stay in its jobcomp file, where they break ``sacct -c`` for good."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from cpsched.cli.local_service import LocalService
from cpsched.slurm_bridge.config import BridgeSettings
from cpsched.slurm_bridge.errors import CommandError
from cpsched.slurm_bridge.factory import make_backend
from cpsched.slurm_bridge.loop import Bridge
from cpsched.slurm_bridge.slurm_common import field_separator
from cpsched.slurm_bridge.slurm_text import job_extras, squeue_argv, squeue_free_text
from cpsched.wire.client import ServiceClient
from tests.dbservers import MariadbServer
from tests.slurm_bridge.conftest import TOKEN, Testbed, emptied, start_testbed

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def bed(
    tmp_path_factory: pytest.TempPathFactory, mariadb_server: MariadbServer
) -> Iterator[Testbed]:
    """One 4-CPU node, with slurmdbd and the jobcomp file."""
    root = tmp_path_factory.mktemp("slurmtb_names")
    yield from start_testbed(root, mariadb_server, CPU_NODES="1", GPU_NODES="0", WITH_RESTD="0")


@pytest.fixture(autouse=True)
def aimed(bed: Testbed, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from emptied(bed, monkeypatch)


def settings(tmp_path: Path, **values: object) -> BridgeSettings:
    return BridgeSettings(
        cluster="testbed", state_file=tmp_path / "state.json", partitions=["batch"], **values
    )


def forge(
    bed: Testbed, lines: Callable[[str], list[str]], comment: Callable[[str], str] | None = None
) -> tuple[str, str, str]:
    """A held job, then a job whose name carries ``lines(held job's id)`` (and its
    comment ``comment(held job's id)``), run to its end: their ids and the name."""
    victim = bed.sbatch("-J", "victim", script="sleep 60")
    name = "\n".join(["x", *lines(victim)])
    options = ["--comment", comment(victim)] if comment else []
    forger = bed.sbatch("-J", name, *options, script="true")
    bed.wait_visible([victim, forger])
    bed.run("scontrol", "release", forger)  # job_submit.lua held both for cpsched
    assert bed.wait_state(forger, {"COMPLETED"})["state"] == "COMPLETED"
    return victim, forger, name


def test_a_name_holding_squeue_and_scontrol_lines_adds_no_job(bed: Testbed, tmp_path: Path) -> None:
    victim, forger, name = forge(
        bed,
        lambda job: [
            "|".join([job, job, "N/A", "root", "root", "batch", "RUNNING", *["1"] * 18]),
            f"JobId={job} JobName=victim UserId=root(0) AdminComment=forged",
        ],
        # squeue does not give comments: this copy of the held job's line (untagged)
        # makes it come twice, and the bridge reads it again on its own
        lambda job: (
            f"c\nJobId={job} JobName=victim UserId=root(0) Network=(null) "
            f"Command=(null) WorkDir={bed.root / 'jobs'} AdminComment="
        ),
    )
    # a job whose directory, comment and --network imitate a hold tag and a node range,
    # and whose own tag is then taken off
    work_dir = bed.root / "w AdminComment=extsched NumNodes=1-9 "
    work_dir.mkdir()
    untagged = bed.sbatch(
        "-J", "paths", "-D", str(work_dir), "--comment", "c AdminComment=extsched",
        "--network", "x AdminComment=extsched NumNodes=2-3", script="sleep 60",
    )  # fmt: skip
    bed.wait_visible([untagged])
    bed.run("scontrol", "update", f"JobId={untagged}", "AdminComment=")
    views = {}
    for source in ("json", "text"):
        state = make_backend(settings(tmp_path, state_source=source)).read_state()
        views[source] = {
            j.id: (j.state, j.user, j.name, j.held_for_us, j.tagged, j.shape, j.rules)
            for j in state.jobs
            if j.id in {victim, forger} or j.state != "completed"
        }
    assert views["text"] == views["json"]
    assert set(views["text"]) == {victim, forger, untagged}
    # in the whole list the held job's line comes twice; the bridge read it on its own
    separator = field_separator()
    known = squeue_free_text(bed.run(*squeue_argv("squeue", separator)), separator)
    assert job_extras(bed.run("scontrol", "-o", "-d", "show", "job"), known)[victim].doubtful
    assert views["text"][victim][:5] == ("pending", "root", "victim", True, True)
    assert views["text"][untagged][:5] == ("pending", "root", "paths", False, False)
    assert views["text"][forger][2] == name


def test_ended_jobs_are_still_delivered_when_a_name_breaks_sacct_c(
    bed: Testbed, cpsched_service: LocalService, tmp_path: Path
) -> None:
    """Every line of a jobcomp record after a line break in its name lacks the state and
    times, and 22.05's ``sacct -c`` dies on such a line (SIGSEGV) as long as it is in the
    file. The bridge reads slurmdbd first and, when ``sacct -c`` fails, still posts what
    ``squeue -t all`` lists."""
    when = time.strftime("%Y-%m-%dT%H:%M:%S")
    ghost = "999999"
    victim, forger, name = forge(
        bed,
        lambda held: [
            f"JobId={job} UserId=root(0) GroupId=root(0) Name=f JobState=COMPLETED "
            f"Partition=batch TimeLimit=1 StartTime={when} EndTime={when} NodeList=node1 "
            "NodeCnt=1 ProcCnt=1 WorkDir=/tmp"
            for job in (held, ghost)
        ],
    )
    jobcomp = bed.run("sacct", "-c", "-n", "-a", "-S", "2020-01-01", check=False)
    broken = bed.run("bash", "-c", "sacct -c -n -a -S 2020-01-01 >/dev/null; echo $?")
    assert broken.strip() != "0", jobcomp  # Slurm's own failure, which the bridge meets

    def ended(source: str) -> dict[str, str]:
        backend = make_backend(settings(tmp_path, finished_source=source))
        return {j.id: j.name for j in backend.finished_jobs(backend.read_state())}

    in_dbd = ended("sacct")  # slurmctld tells slurmdbd a little after the end
    deadline = time.monotonic() + 30
    while forger not in in_dbd and time.monotonic() < deadline:
        time.sleep(1)
        in_dbd = ended("sacct")
    # slurmdbd keeps a name's first 255 characters
    assert name.startswith(in_dbd[forger]) and "\n" in in_dbd[forger]
    assert ended("auto") == in_dbd and victim not in in_dbd
    with pytest.raises(CommandError, match="sacct -c"):
        ended("jobcomp")

    conf = settings(
        tmp_path,
        service_url=cpsched_service.url,
        token=TOKEN,
        mode="shadow",
        finished_source="jobcomp",
    )
    client = ServiceClient(conf.service_url, conf.token, conf.cluster, timeout_s=5)
    report = Bridge(conf, make_backend(conf), client).cycle()
    assert report.service_error is None
    assert any("finished jobs unreadable" in note for note in report.notes)
    # squeue -t all's ended jobs were still sent; the names' line breaks are control
    # characters, which the service does not store
    assert forger in report.finished_refused and not {victim, ghost} & set(report.finished_refused)
    with httpx.Client(
        base_url=cpsched_service.url, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as http:
        for job in (victim, ghost):
            assert http.get(f"/v1/clusters/testbed/jobs/{job}").json().get("state") != "finished"
