"""The Slurm backend's choice of finished-jobs source and its re-reads of jobs in doubt,
with scripted command outputs (the real Slurm is for the ``slurm`` tests)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cpsched.slurm_bridge.errors import CommandError
from cpsched.slurm_bridge.model import ClusterState
from cpsched.slurm_bridge.slurm_backend import DOUBTFUL_REREADS, REPROBE_S, SlurmBackend
from cpsched.slurm_bridge.slurm_text import FreeText, JobExtras


class Script:
    """Answers each command with ``answer(argv)``, which may raise; records the argvs."""

    def __init__(self, answer: Callable[[list[str]], str]) -> None:
        self.answer = answer
        self.argvs: list[list[str]] = []

    def run(self, argv: list[str], *, env: dict | None = None) -> str:
        self.argvs.append(list(argv))
        return self.answer(list(argv))


def sacct_rows(argv: list[str], job: str) -> str:
    separator = next(a for a in argv if a.startswith("--delimiter=")).split("=", 1)[1]
    fields = [job, "u(1)", "g", "batch", "node1", "COMPLETED", "1", "10", "70", "5", "1", "1", "x"]
    return separator.join(fields) + "\n"


def at(time: int) -> ClusterState:
    return ClusterState(time=time, nodes={}, jobs=[])


def test_auto_tries_slurmdbd_again_after_settling_on_the_jobcomp_file() -> None:
    dbd_up = False

    def answer(argv: list[str]) -> str:
        if "-c" in argv:
            return sacct_rows(argv, "7")
        if not dbd_up:
            raise CommandError(argv, "exit status 1", "accounting storage is disabled")
        return sacct_rows(argv, "8")

    script = Script(answer)
    backend = SlurmBackend(runner=script)
    assert [j.id for j in backend.finished_jobs(at(1000))] == ["7"]
    assert backend.finished_forgeable
    dbd_up = True
    backend.finished_jobs(at(1000 + REPROBE_S - 1))  # settled: the file only
    assert ["-c" in argv for argv in script.argvs] == [False, True, True]
    assert [j.id for j in backend.finished_jobs(at(1000 + REPROBE_S))] == ["8"]
    assert not backend.finished_forgeable


def test_a_source_that_keeps_failing_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    def answer(argv: list[str]) -> str:
        raise CommandError(argv, "exit status -11", "Unknown type")

    backend = SlurmBackend(runner=Script(answer), finished_source="jobcomp")
    for now in (1000, 1001, 1002):  # each run has its own separator and window
        with pytest.raises(CommandError):
            backend.finished_jobs(at(now))
    assert sum(r.levelname == "ERROR" for r in caplog.records) == 1


def test_jobs_in_doubt_are_read_alone_in_turn() -> None:
    """Many copied lines cannot keep one job in doubt: the re-reads take turns."""
    doubtful = [str(job) for job in range(90, 90 + DOUBTFUL_REREADS + 5)]
    known = {job: FreeText("n", "(null)", "/w") for job in doubtful}

    def answer(argv: list[str]) -> str:
        job = argv[-1]
        if job == "90":
            raise CommandError(argv, "exit status 1", "Invalid job id specified")
        return (
            f"JobId={job} JobName=n UserId=u(1) MinMemoryCPU=100M Network=(null) "
            "Command=(null) WorkDir=/w AdminComment=extsched\n"
        )

    script = Script(answer)
    backend = SlurmBackend(runner=script)
    first = backend._settle_doubtful(dict.fromkeys(doubtful, JobExtras(doubtful=True)), known)
    read = {argv[-1] for argv in script.argvs}
    assert len(read) == DOUBTFUL_REREADS
    assert {job for job, e in first.items() if not e.doubtful} == read - {"90"}
    script.argvs.clear()
    backend._settle_doubtful(dict.fromkeys(doubtful, JobExtras(doubtful=True)), known)
    assert set(doubtful) - read <= {argv[-1] for argv in script.argvs}
