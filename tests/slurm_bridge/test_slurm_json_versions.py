"""The JSON readers on Slurm 22.05 (openapi v0.0.38) and 24.11 (data_parser v0.0.40,
v0.0.41, v0.0.42), from outputs recorded on both (``fixtures/slurm``, ``fixtures/
slurm-24.11``); Slurm's version and what it decides."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpsched.slurm_bridge.errors import StateParseError
from cpsched.slurm_bridge.model import JobView
from cpsched.slurm_bridge.slurm_json import parse_jobs, read_jobs
from cpsched.slurm_bridge.slurm_json_doc import JsonOrigin, json_argvs
from cpsched.slurm_bridge.slurm_json_nodes import parse_nodes
from cpsched.slurm_bridge.slurm_json_states import node_state_of
from cpsched.slurm_bridge.slurm_version import SlurmVersion, parse_version

FIXTURES = Path(__file__).parent / "fixtures"
SQUEUE_24 = ["squeue_v0.0.40.json", "squeue_v0.0.41.json", "squeue.json"]
V24 = SlurmVersion(24, 11, 5)
NODES_24 = JsonOrigin("scontrol --json=v0.0.42 show nodes", V24)


def load(name: str, version: str = "slurm-24.11") -> dict[str, Any]:
    return json.loads((FIXTURES / version / name).read_text())


def jobs_of(doc: dict[str, Any], partitions: list[str] | None = None) -> dict[str, JobView]:
    found = read_jobs(
        doc, tag="extsched", partitions=partitions or [], partition_max={}, unlimited_s=3600
    )
    assert found.unreadable == ()
    return {job.id: job for job in found.jobs}


# ---- Slurm's version ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("printed", "version"),
    [
        ("slurm 22.05.8\n", SlurmVersion(22, 5, 8)),
        ("slurm 24.11.5\n", V24),
        ("slurm-wlm 24.11.5\n", V24),  # Debian's packages name themselves slurm-wlm
    ],
)
def test_the_version_scontrol_prints(printed: str, version: SlurmVersion) -> None:
    assert parse_version(printed, "scontrol --version") == version
    assert str(SlurmVersion(22, 5, 8)) == "22.05.8" and str(V24) == "24.11.5"


def test_a_version_that_cannot_be_read_names_the_command() -> None:
    with pytest.raises(StateParseError, match=r"/opt/slurm/bin/scontrol --version.*'hello'"):
        parse_version("hello\n", "/opt/slurm/bin/scontrol --version")


def test_each_version_reads_the_newest_json_it_has_that_the_readers_read() -> None:
    def cmd(name: str) -> str:
        return f"/bin/{name}"

    assert json_argvs(SlurmVersion(22, 5, 8), cmd) == (
        ["/bin/sinfo", "--json"],
        ["/bin/squeue", "-a", "--json"],
    )
    assert json_argvs(V24, cmd) == (
        ["/bin/scontrol", "--json=v0.0.42", "show", "nodes"],
        ["/bin/squeue", "-a", "--states=all", "--json=v0.0.42"],
    )
    found = {(23, 11): "v0.0.40", (24, 5): "v0.0.41", (25, 5): "v0.0.42", (25, 11): "v0.0.42"}
    for (major, minor), parser in found.items():
        assert SlurmVersion(major, minor, 0).json_format == parser
    with pytest.raises(StateParseError, match=r"Slurm 23\.02\.7.*v0\.0\.39.*text"):
        json_argvs(SlurmVersion(23, 2, 7), cmd)


# ---- jobs ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SQUEUE_24)
def test_jobs_of_each_data_parser_version(name: str) -> None:
    jobs = jobs_of(load(name))
    assert {j.id: (j.state, j.held_for_us, j.tagged) for j in jobs.values()} == {
        "14": ("running", False, True),
        "15": ("running", False, True),
        "16": ("pending", True, True),
        "18": ("running", False, False),
    }
    two = jobs["14"]  # -n 2: two one-CPU tasks, on the two cores Slurm lists on node1
    assert (two.shape.units, two.shape.per_unit) == (2, {"cpu": 1, "mem": 256})
    assert two.allocation == {"node1": 2} and two.required_nodes == ("node1",)
    assert (two.submit, two.start, two.end, two.time_limit_s) == (1795826242, 1795826242, None, 300)
    assert (two.priority, two.partition, two.user, two.reason) == (12166, "batch", "root", "None")
    held = jobs["16"]  # -n 6, held: NumNodes=1-1 is Slurm's estimate, not a limit
    assert (held.shape.units, held.shape.per_unit) == (6, {"cpu": 1, "mem": 256})
    assert held.rules.max_nodes is None and held.rules.min_nodes is None
    assert (held.priority, held.reason, held.start, held.time_limit_s) == (
        0,
        "JobHeldUser",
        None,
        420,
    )
    own = jobs["18"]  # 4 tasks Slurm ran 3 + 1 on gpu1 + gpu2
    assert (own.shape.units, own.partition, own.allocation) == (
        4,
        "shadowq",
        {"gpu1": 3, "gpu2": 1},
    )
    assert own.rules.min_nodes == 2 and not own.rules.exclusive
    assert all(not j.ending and j.rules.qos == "normal" for j in jobs.values())
    assert {j.rules.account for j in jobs.values()} == {"research"}


def test_the_three_data_parser_versions_read_alike() -> None:
    first, *others = (
        read_jobs(load(n), tag="extsched", partitions=[], partition_max={}, unlimited_s=60)
        for n in SQUEUE_24
    )
    assert all(other == first for other in others)


def test_a_gpu_job_asking_cpus_per_task_is_one_unit_on_its_node() -> None:
    gpu = jobs_of(load("squeue.json"))["15"]  # -c 2 --gres=gpu:1: TresPerTask=cpu=2
    assert gpu.shape.single_node and gpu.allocation == {"gpu2": 1}
    assert gpu.shape.per_unit == {"cpu": 2, "mem": 512, "gpu": 1}


def test_jobs_of_22_05_and_24_11_of_the_same_kind_read_alike() -> None:
    """A held task job (22.05: ``-n 3``, 24.11: ``-n 6``) is as many one-CPU units, free
    to spread, on both; a running task job's units follow the cores Slurm lists."""
    old = jobs_of(load("squeue_held.json", "slurm"))["3"]
    new = jobs_of(load("squeue.json"))["16"]
    for job, tasks in ((old, 3), (new, 6)):
        assert job.shape.units == tasks and job.shape.per_unit["cpu"] == 1
        assert job.shape.laid_out_by_slurm and job.rules.max_nodes is None
    old_running = jobs_of(load("squeue_running.json", "slurm"))["3"]
    assert old_running.allocation == {"node1": 2, "node2": 1}
    assert jobs_of(load("squeue.json"))["18"].allocation == {"gpu1": 3, "gpu2": 1}


def test_only_the_wanted_partitions() -> None:
    assert set(jobs_of(load("squeue.json"), ["shadowq"])) == {"18"}


def _job(doc: dict[str, Any], job: int) -> dict[str, Any]:
    return next(raw for raw in doc["jobs"] if raw["job_id"] == job)


@pytest.mark.parametrize(
    ("state", "read", "ending"),
    [
        (["RUNNING", "COMPLETING"], "running", True),
        (["COMPLETED", "COMPLETING"], "running", True),  # its nodes are still being cleaned
        (["RUNNING", "CONFIGURING"], "running", False),
        (["RUNNING", "SIGNALING"], "running", False),
        (["PENDING", "REQUEUE_HOLD"], "pending", False),
        (["COMPLETED"], "completed", False),
        (["CANCELLED"], "cancelled", False),
        (["OUT_OF_MEMORY"], "other", False),  # an end the wire calls "other"
    ],
)
def test_state_lists(state: list[str], read: str, ending: bool) -> None:
    for name in SQUEUE_24:
        doc = load(name)
        _job(doc, 14)["job_state"] = state
        job = jobs_of(doc)["14"]
        assert (job.state, job.ending) == (read, ending)


@pytest.mark.parametrize(
    ("name", "version", "state"),
    [
        ("squeue.json", "slurm-24.11", ["RUNNING", "HIBERNATING"]),
        ("squeue.json", "slurm-24.11", ["PENDING", "RUNNING"]),
        ("squeue.json", "slurm-24.11", []),
        ("squeue.json", "slurm-24.11", "RUNNING"),  # a word where 24.11 gives a list
        ("squeue.json", "slurm", "HIBERNATING"),
    ],
)
def test_an_unknown_state_makes_that_job_unreadable(name: str, version: str, state: Any) -> None:
    doc = load(name, version)
    first = doc["jobs"][0]
    first["job_state"] = state
    found = read_jobs(doc, tag="extsched", partitions=[], partition_max={}, unlimited_s=60)
    ((job, why),) = found.unreadable
    assert job == str(first["job_id"]) and "unknown job state" in why
    assert why.startswith(
        "squeue --json (Slurm 24.11.5)"
        if version == "slurm-24.11"
        else "squeue --json (Slurm 22.05.8)"
    )
    assert len(found.jobs) == len(doc["jobs"]) - 1
    with pytest.raises(StateParseError, match="unknown job state"):
        parse_jobs(doc, tag="extsched", partitions=[], partition_max={}, unlimited_s=60)


def test_a_document_the_readers_do_not_know_is_an_error_for_the_read() -> None:
    origin = JsonOrigin("squeue -a --json=v0.0.42", V24)
    doc = load("squeue.json")
    doc["meta"]["plugin"]["data_parser"] = "data_parser/v0.0.43"
    with pytest.raises(
        StateParseError, match=r"squeue -a --json=v0.0.42 \(Slurm 24.11.5\).*v0.0.43"
    ):
        read_jobs(doc, tag="", partitions=[], partition_max={}, unlimited_s=60, origin=origin)
    no_jobs = {k: v for k, v in load("squeue.json").items() if k != "jobs"}
    with pytest.raises(StateParseError, match=r"\(Slurm 24.11.5\): the JSON has no 'jobs'"):
        read_jobs(no_jobs, tag="", partitions=[], partition_max={}, unlimited_s=60, origin=origin)


# A held task job's node counts as 24.11 shows them (scontrol_show_job_o.txt's jobs 6 and 8:
# `-n 14` is NumNodes=2 with ReqTRES node=1; a job asking -N 2 has ReqTRES node=2).
@pytest.mark.parametrize(
    ("change", "max_nodes", "one_unit_per_node"),
    [
        ({}, None, False),  # -n 6: NumNodes=1-1
        ({"node_count": 2, "max_nodes": 2, "tres_req_str": "cpu=6,node=1"}, None, False),
        ({"node_count": 2, "max_nodes": 2, "tres_req_str": "cpu=6,node=2"}, 2, True),  # -N 2
        ({"node_count": 2, "max_nodes": 3, "tres_req_str": "cpu=6,node=2"}, 3, False),  # -N 2-3
        ({"cpus_per_task": 2, "cpus": 12}, 1, False),  # Slurm shows the job's own maximum
    ],
)
def test_a_held_jobs_maximum_node_count(
    change: dict[str, Any], max_nodes: int | None, one_unit_per_node: bool
) -> None:
    doc = load("squeue.json")
    raw = _job(doc, 16)
    for key, value in change.items():
        raw[key] = value if isinstance(value, str) else dict(raw[key], number=value)
    held = jobs_of(doc)["16"]
    assert held.rules.max_nodes == max_nodes
    assert held.shape.one_unit_per_node == one_unit_per_node


@pytest.mark.parametrize(
    ("comment", "max_nodes", "tagged"),
    [
        ("extsched,max_nodes=1", 1, True),  # -N 1 -n 6: held to one node
        ("extsched,max_nodes=none", None, True),
        ("extsched,max_nodes=3", 3, True),
        ("extsched,max_nodes=3,x", None, False),  # not the kit's record: not held for us
    ],
)
def test_the_kits_record_of_the_maximum_node_count_wins(
    comment: str, max_nodes: int | None, tagged: bool
) -> None:
    doc = load("squeue.json")
    _job(doc, 16)["admin_comment"] = comment
    held = jobs_of(doc)["16"]
    assert (held.rules.max_nodes, held.tagged, held.held_for_us) == (max_nodes, tagged, tagged)
    assert held.shape.single_node == (max_nodes == 1)


# ---- unreadable jobs leave the others alone ----------------------------------------------

CORRUPTIONS: dict[str, Any] = {
    "state": lambda raw: raw.update(job_state=["NOT_A_STATE"]),
    "cpus": lambda raw: raw.update(cpus="many"),
    "nodes": lambda raw: raw.update(nodes="node[1-x]"),
    "limit": lambda raw: raw.update(time_limit=[5]),
    "id": lambda raw: raw.pop("job_id"),
}


@given(
    doc=st.sampled_from([("slurm-24.11", n) for n in SQUEUE_24] + [("slurm", "squeue.json")]),
    index=st.integers(min_value=0, max_value=20),
    corruption=st.sampled_from(sorted(CORRUPTIONS)),
)
def test_one_unreadable_job_gives_the_same_jobs_for_the_others(
    doc: tuple[str, str], index: int, corruption: str
) -> None:
    clean = load(doc[1], doc[0])
    spoilt = copy.deepcopy(clean)
    index %= len(clean["jobs"])
    CORRUPTIONS[corruption](spoilt["jobs"][index])
    args: dict[str, Any] = {"tag": "extsched", "partitions": [], "partition_max": {}}
    before = read_jobs(clean, unlimited_s=60, **args)
    after = read_jobs(spoilt, unlimited_s=60, **args)
    gone = str(clean["jobs"][index]["job_id"])
    assert [j for j in before.jobs if j.id != gone] == after.jobs
    assert [job for job, _ in after.unreadable] == [gone if corruption != "id" else "?"]


# ---- nodes -------------------------------------------------------------------------------


def test_nodes_of_scontrol_show_nodes() -> None:
    nodes = parse_nodes(load("scontrol_show_nodes.json"), [], origin=NODES_24)
    assert set(nodes) == {"gpu1", "gpu2", "node1", "node2"}
    gpu2, node1 = nodes["gpu2"], nodes["node1"]
    assert gpu2.capacity == {"cpu": 8, "mem": 8000, "gpu": 2}
    assert gpu2.used == {"cpu": 3, "mem": 768, "gpu": 1}
    assert (gpu2.partitions, gpu2.features) == (("batch", "shadowq", "gpu"), ("ampere", "ib"))
    assert node1.free() == {"cpu": 2, "mem": 3488} and node1.cpus_per_core == 1
    assert {n.state for n in nodes.values()} == {"up"}  # MIXED and IDLE
    assert set(parse_nodes(load("scontrol_show_nodes.json"), ["cpu"])) == {"node1", "node2"}


@pytest.mark.parametrize(
    ("words", "state"),
    [
        (["IDLE"], "up"),
        (["MIXED"], "up"),
        (["ALLOCATED", "COMPLETING"], "up"),
        (["IDLE", "DRAIN"], "drain"),  # drained
        (["MIXED", "DRAIN"], "drain"),  # draining
        (["IDLE", "MAINTENANCE", "RESERVED"], "drain"),
        (["IDLE", "RESERVED"], "reserved"),
        (["DOWN", "NOT_RESPONDING"], "down"),
        (["IDLE", "NOT_RESPONDING"], "down"),
        (["DOWN", "DRAIN"], "down"),
        (["IDLE", "POWERED_DOWN"], "down"),
        (["IDLE", "REBOOT_REQUESTED"], "down"),
        (["FUTURE"], "down"),
    ],
)
def test_node_state_lists(words: list[str], state: str) -> None:
    assert node_state_of(words) == state
    doc = load("scontrol_show_nodes.json")
    doc["nodes"][0]["state"] = words
    assert parse_nodes(doc, [], origin=NODES_24)["gpu1"].state == state


@pytest.mark.parametrize("state", [["IDLE", "HIBERNATING"], [], "IDLE"])
def test_a_node_state_not_known_is_an_error_never_up(state: Any) -> None:
    doc = load("scontrol_show_nodes.json")
    doc["nodes"][0]["state"] = state
    with pytest.raises(StateParseError, match=r"show nodes \(Slurm 24.11.5\): node gpu1"):
        parse_nodes(doc, [], origin=NODES_24)


def test_24_11_sinfo_lists_node_groups_which_are_not_read() -> None:
    with pytest.raises(StateParseError, match=r"\(Slurm 24.11.5\).*no 'nodes'.*scontrol"):
        parse_nodes(load("sinfo.json"), [])


def test_22_05_sinfo_nodes_read_as_before() -> None:
    nodes = parse_nodes(load("sinfo_busy.json", "slurm"), [])
    assert nodes["gpu1"].used == {"cpu": 2, "mem": 512, "gpu": 2}
    with pytest.raises(StateParseError, match=r"sinfo --json \(Slurm 22.05.8\).*no 'nodes'"):
        parse_nodes({**load("sinfo.json", "slurm"), "nodes": None}, [])
