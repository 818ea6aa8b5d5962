"""The pin reservations' commands and their life (the real Slurm checks are in
test_slurm_placement.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cpsched.slurm_bridge.backend import ExactSplit
from cpsched.slurm_bridge.errors import CommandError
from cpsched.slurm_bridge.model import ClusterState, JobRules, JobView
from cpsched.slurm_bridge.slurm_backend import SlurmBackend
from cpsched.slurm_bridge.slurm_pins import SplitPins, create_argv, pin_apart
from tests.slurm_bridge.fakes import held, node


class Scontrol:
    """Records every argv; fails those whose words contain a key of ``fail``."""

    def __init__(self, fail: dict[str, str] | None = None) -> None:
        self.argvs: list[list[str]] = []
        self.fail = dict(fail or {})

    def run(self, argv: list[str], *, env: dict | None = None) -> str:
        self.argvs.append(list(argv))
        for key, why in list(self.fail.items()):
            if key in " ".join(argv):
                del self.fail[key]  # each failure once
                raise CommandError(argv, "exit 1", why)
        return ""


def pinned(job_id: str, state: str, held_for_us: bool = False) -> JobView:
    job = replace(held(job_id), state=state, held_for_us=held_for_us)
    return replace(job, rules=JobRules(reservation=f"cpsched-pin-{job_id}"))


def test_a_pin_is_not_a_site_rule() -> None:
    job = pin_apart(pinned("7", "pending", held_for_us=True))
    assert job.rules.reservation == "" and job.pin == "cpsched-pin-7"
    own = replace(held("8"), rules=JobRules(reservation="maintenance"))
    assert pin_apart(own) == own


def test_the_counts_go_in_slurms_node_order_for_the_jobs_user() -> None:
    argv = create_argv("scontrol", "7", {"node1": 3, "node2": 2}, "alice")
    assert argv[:3] == ["scontrol", "create", "reservation"]
    assert "ReservationName=cpsched-pin-7" in argv
    assert "Nodes=node1,node2" in argv and "CoreCnt=3,2" in argv
    assert "Users=alice" in argv
    # never ends by itself (a running job ends with its reservation), purged once idle
    assert "Duration=UNLIMITED" in argv and any(a.startswith("Flags=PURGE_COMP=") for a in argv)


def test_a_pin_left_from_an_earlier_try_is_replaced() -> None:
    runner = Scontrol({"create": "Error creating the reservation: Duplicate reservation name"})
    assert SplitPins(runner, "scontrol").pin("7", {"a": 1, "b": 1}, "u") == "cpsched-pin-7"
    words = [argv[1] for argv in runner.argvs]
    assert words == ["create", "delete", "create"]


def test_other_creation_failures_are_raised() -> None:
    runner = Scontrol({"create": "Requested nodes are busy"})
    with pytest.raises(CommandError):
        SplitPins(runner, "scontrol").pin("7", {"a": 1, "b": 1}, "u")


def state_of(*jobs: JobView) -> ClusterState:
    """As the backend reads it: pins apart."""
    return ClusterState(time=1000, nodes={"a": node("a")}, jobs=[pin_apart(j) for j in jobs])


def test_a_pin_goes_once_its_job_runs_ended_or_was_held_again() -> None:
    runner = Scontrol()
    pins = SplitPins(runner, "scontrol")
    state = state_of(
        pinned("run", "running"),
        pinned("wait", "pending"),  # released, not running yet: keeps its pin
        pinned("back", "pending", held_for_us=True),
        pinned("done", "completed"),
        held("plain"),
    )
    assert pins.settle(state) == ["run", "back", "done"]
    assert runner.argvs == [
        ["scontrol", "update", "JobId=run", "Reservation="],  # off the job first
        ["scontrol", "delete", "reservation", "cpsched-pin-run"],
        ["scontrol", "update", "JobId=back", "Reservation="],
        ["scontrol", "delete", "reservation", "cpsched-pin-back"],
        ["scontrol", "delete", "reservation", "cpsched-pin-done"],  # an ended job keeps it
    ]
    # Slurm lists the ended job with its pin for a while: it is not deleted again.
    runner.argvs.clear()
    assert pins.settle(state_of(pinned("done", "completed"))) == []
    assert runner.argvs == []


def test_a_pin_that_cannot_be_deleted_is_left_to_slurms_purge() -> None:
    runner = Scontrol({"delete": "Requested reservation is invalid"})
    pins = SplitPins(runner, "scontrol")
    assert pins.settle(state_of(pinned("done", "completed"))) == []
    assert pins.settle(state_of(pinned("done", "completed"))) == []
    assert len(runner.argvs) == 1  # tried once


def test_a_pinned_start_makes_the_reservation_then_releases_into_it() -> None:
    runner = Scontrol()
    backend = SlurmBackend(runner=runner, splits_tasks=False)
    backend.start("7", {"a": 3, "b": 2}, exact=ExactSplit(user="u", cores={"a": 3, "b": 2}))
    assert [argv[1] for argv in runner.argvs] == ["create", "update", "release"]
    assert "Reservation=cpsched-pin-7" in runner.argvs[1]
    assert "NodeList=a,b" in runner.argvs[1]


def test_a_job_that_cannot_be_released_loses_its_pin() -> None:
    runner = Scontrol({"release": "Unspecified error"})
    backend = SlurmBackend(runner=runner, splits_tasks=False)
    with pytest.raises(CommandError):
        backend.start("7", {"a": 3, "b": 2}, exact=ExactSplit(user="u", cores={"a": 3, "b": 2}))
    assert runner.argvs[-2:] == [
        ["scontrol", "update", "JobId=7", "Reservation="],
        ["scontrol", "delete", "reservation", "cpsched-pin-7"],
    ]


def test_pinned_by_node_list_only_no_reservation_is_made() -> None:
    runner = Scontrol()
    backend = SlurmBackend(runner=runner, splits_tasks=True)
    backend.start("7", {"a": 3, "b": 2}, exact=ExactSplit(user="u", cores={"a": 3, "b": 2}))
    assert [argv[1] for argv in runner.argvs] == ["update", "release"]
