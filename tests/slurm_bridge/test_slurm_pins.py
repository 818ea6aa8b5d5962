"""The pin reservations' commands and their life (the real Slurm checks are in
test_slurm_placement.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cpsched.slurm_bridge.backend import ExactSplit
from cpsched.slurm_bridge.errors import CommandError, SplitPinRefused
from cpsched.slurm_bridge.model import ClusterState, JobRules, JobView, ReservationView
from cpsched.slurm_bridge.slurm_backend import SlurmBackend
from cpsched.slurm_bridge.slurm_pins import (
    PIN_MARGIN_MIN,
    SplitPins,
    create_argv,
    pin_apart,
    unreserve_pinned,
)
from tests.slurm_bridge.fakes import held, node


class Scontrol:
    """Records every argv but ``--version`` (answered as Slurm 22.05.8's scontrol does);
    fails those whose words contain a key of ``fail``."""

    version = "slurm-wlm 22.05.8\n"

    def __init__(self, fail: dict[str, str] | None = None) -> None:
        self.argvs: list[list[str]] = []
        self.fail = dict(fail or {})

    def run(self, argv: list[str], *, env: dict | None = None) -> str:
        if argv[1:] == ["--version"]:
            return self.version
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


EXACT = ExactSplit(user="alice", cores={"node1": 3, "node2": 2}, partition="cpu", limit_s=3601)


def test_the_counts_go_in_slurms_node_order_for_the_jobs_user() -> None:
    argv = create_argv("scontrol", "7", EXACT)
    assert argv[:3] == ["scontrol", "create", "reservation"]
    assert "ReservationName=cpsched-pin-7" in argv
    assert "Nodes=node1,node2" in argv and "CoreCnt=3,2" in argv
    assert "Users=alice" in argv and "PartitionName=cpu" in argv
    # as long as the job may run and a margin (Slurm ends a job with its reservation),
    # purged once idle
    assert f"Duration={61 + PIN_MARGIN_MIN}" in argv
    assert any(a.startswith("Flags=PURGE_COMP=") for a in argv)


def test_a_pin_left_from_an_earlier_try_is_replaced() -> None:
    runner = Scontrol({"create": "Error creating the reservation: Duplicate reservation name"})
    assert SplitPins(runner, "scontrol").pin("7", EXACT) == "cpsched-pin-7"
    words = [argv[1] for argv in runner.argvs]
    assert words == ["create", "delete", "create"]


def test_other_creation_failures_are_raised() -> None:
    runner = Scontrol({"create": "Requested nodes are busy"})
    with pytest.raises(CommandError):
        SplitPins(runner, "scontrol").pin("7", EXACT)


def test_per_node_core_counts_refused_by_a_newer_slurm_are_told_apart() -> None:
    """What Slurm 24.11's scontrol printed on the test bed for ``CoreCnt=2,3``."""
    said = "scontrol: error: Using a comma separated array for CoreCnt is no longer valid."
    runner = Scontrol({"create": said})
    with pytest.raises(SplitPinRefused):
        SplitPins(runner, "scontrol").pin("7", EXACT)


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
    backend.start("7", {"node1": 3, "node2": 2}, exact=EXACT)
    assert [argv[1] for argv in runner.argvs] == ["create", "update", "release"]
    assert "Reservation=cpsched-pin-7" in runner.argvs[1]
    assert "NodeList=node1,node2" in runner.argvs[1]


def test_a_job_that_cannot_be_released_loses_its_pin() -> None:
    runner = Scontrol({"release": "Unspecified error"})
    backend = SlurmBackend(runner=runner, splits_tasks=False)
    with pytest.raises(CommandError):
        backend.start("7", {"node1": 3, "node2": 2}, exact=EXACT)
    assert runner.argvs[-2:] == [
        ["scontrol", "update", "JobId=7", "Reservation="],
        ["scontrol", "delete", "reservation", "cpsched-pin-7"],
    ]


def test_pinned_by_node_list_only_no_reservation_is_made() -> None:
    runner = Scontrol()
    backend = SlurmBackend(runner=runner, splits_tasks=True)
    backend.start("7", {"node1": 3, "node2": 2}, exact=EXACT)
    assert [argv[1] for argv in runner.argvs] == ["update", "release"]


class Scontrol2411(Scontrol):
    """As Slurm 24.11.5's scontrol answers ``--version``."""

    version = "slurm-wlm 24.11.5\n"


def test_on_slurm_24_11_task_jobs_start_on_slurms_own_split_from_the_first_read() -> None:
    backend = SlurmBackend(runner=Scontrol2411(), splits_tasks=False)
    assert backend.pins_splits  # as configured, until the version is known
    assert str(backend.slurm_version) == "24.11.5"
    assert backend.splits_tasks and not backend.pins_splits


def test_a_refused_pin_switches_to_slurms_own_split_and_keeps_the_job_held() -> None:
    said = "scontrol: error: Using a comma separated array for CoreCnt is no longer valid."
    runner = Scontrol({"create": said})
    backend = SlurmBackend(runner=runner, splits_tasks=False)
    with pytest.raises(SplitPinRefused):
        backend.start("7", {"node1": 3, "node2": 2}, exact=EXACT)
    assert [argv[1] for argv in runner.argvs] == ["create"]  # neither pinned nor released
    assert backend.splits_tasks and not backend.pins_splits


def test_a_job_on_several_nodes_on_24_11_gets_its_node_count() -> None:
    runner = Scontrol2411()
    SlurmBackend(runner=runner, splits_tasks=True).start(
        "9", {"node1": 1, "node2": 1}, cpus_per_node=5
    )
    update = next(argv for argv in runner.argvs if argv[1] == "update")
    assert "MinCPUsNode=5" in update and "NumNodes=2" in update
    runner = Scontrol2411()
    SlurmBackend(runner=runner, splits_tasks=True).start("10", {"node1": 1, "node2": 1})
    assert "NumNodes=2" in runner.argvs[0]
    runner = Scontrol()  # 22.05: held to no node count it shows; the update as before
    SlurmBackend(runner=runner, splits_tasks=True).start("10", {"node1": 1, "node2": 1})
    assert not any(a.startswith("NumNodes=") for a in runner.argvs[0])


def test_a_job_that_ended_before_its_pin_came_off_loses_the_pin_anyway() -> None:
    runner = Scontrol({"update": "Job is no longer pending nor running"})
    assert SplitPins(runner, "scontrol").settle(state_of(pinned("run", "running"))) == ["run"]
    assert runner.argvs[-1] == ["scontrol", "delete", "reservation", "cpsched-pin-run"]


def test_a_node_reserved_only_by_pins_is_up() -> None:
    busy = replace(pinned("run", "running"), allocation={"a": 1, "b": 1})
    jobs = [pin_apart(busy)]
    nodes = {n: replace(node(n), state="reserved") for n in ("a", "b", "c")}
    site = (ReservationView(name="maint", nodes=("b",), start=0, end=2000),)
    seen = unreserve_pinned(nodes, jobs, site, now=1000)
    # a: only a pin; b: a site reservation too; c: no pin (a site reservation unread yet)
    assert {n: v.state for n, v in seen.items()} == {"a": "up", "b": "reserved", "c": "reserved"}


def test_a_pin_that_cannot_be_taken_off_its_job_is_tried_again() -> None:
    # Slurm would end the job with its pin: unlike a pin already off its job, this one
    # is not left to Slurm's purge (which never removes a pin a job still uses).
    runner = Scontrol({"update": "Socket timed out", "delete": "Requested reservation is in use"})
    pins = SplitPins(runner, "scontrol")
    assert pins.settle(state_of(pinned("run", "running"))) == []
    assert pins.settle(state_of(pinned("run", "running"))) == ["run"]
    assert [argv[1] for argv in runner.argvs] == ["update", "delete", "update", "delete"]
