"""Parsing recorded Slurm 22.05 outputs (JSON and -O text) into the bridge's model."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpsched.slurm_bridge import hostlist
from cpsched.slurm_bridge.errors import StateParseError
from cpsched.slurm_bridge.finished import parse_sacct
from cpsched.slurm_bridge.model import JobView, NodeView
from cpsched.slurm_bridge.slurm_common import (
    node_state,
    parse_partitions,
    parse_reservations,
    partition_max_minutes,
    shown_node_limit,
    split_records,
    time_limit_minutes,
)
from cpsched.slurm_bridge.slurm_json import parse_jobs, parse_nodes
from cpsched.slurm_bridge.slurm_shape import (
    CoreRounding,
    SlurmRequest,
    WholeCores,
    job_shape,
    parse_gres,
)
from cpsched.slurm_bridge.slurm_text import (
    SQUEUE_FIELDS,
    FreeText,
    JobExtras,
    job_extras,
    squeue_free_text,
)
from cpsched.slurm_bridge.slurm_text import parse_jobs as parse_text_jobs
from cpsched.slurm_bridge.slurm_text import parse_nodes as parse_text_nodes

FIX = Path(__file__).parent / "fixtures" / "slurm"
SEP = "|5e1f0c|"  # a separator as field_separator draws them


def load(name: str) -> dict:
    return json.loads((FIX / name).read_text())


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("gpu[1-2]", ["gpu1", "gpu2"]),
        ("node[01-03,7],gpu1", ["node01", "node02", "node03", "node7", "gpu1"]),
        ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
        ("", []),
        ("(null)", []),
    ],
)
def test_hostlist_expands(text: str, names: list[str]) -> None:
    assert hostlist.expand(text) == names


def test_hostlist_refuses_garbage() -> None:
    with pytest.raises(StateParseError):
        hostlist.expand("node[1-x]")


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("10:00", 10),
        ("1:30:00", 90),
        ("2-00:00:00", 2880),
        ("45", 45),
        ("0:30", 1),
        ("UNLIMITED", None),
        ("INFINITE", None),
        (None, None),
        (17, 17),
        ("1-2", 1560),
    ],
)
def test_time_limits(text: str | int | None, minutes: int | None) -> None:
    assert time_limit_minutes(text) == minutes


def test_gres_strings() -> None:
    assert parse_gres("gpu:2") == {"gpu": 2}
    assert parse_gres("gpu:a100:2(S:0-1),gpu:v100:1,fpga:1") == {"gpu": 3, "fpga": 1}
    assert parse_gres("gres:gpu:1") == {"gpu": 1}
    assert parse_gres("gpu:1(IDX:0)") == {"gpu": 1}
    assert parse_gres("(null)") == {} and parse_gres("") == {}


def test_tres_strings_of_slurm_24_11() -> None:
    """24.11 writes per-task requests as TRES (``squeue -O tres-per-task``, TresPerTask)."""
    assert parse_gres("cpu=2") == {"cpu": 2}
    assert parse_gres("gres/gpu=1") == {"gpu": 1}
    assert parse_gres("gres/gpu:a100=2,cpu=4") == {"gpu": 2, "cpu": 4}


def test_cpus_per_task_given_as_tres_are_cpus_not_a_resource() -> None:
    """``-n 2 -c 2`` as 24.11 records it (TresPerTask=cpu=2, no CPUs/Task of its own)."""
    as_tres = SlurmRequest(
        cpus=4, tasks=2, node_count=1, max_nodes=0, cpus_per_task=None, mem_per_cpu=256,
        mem_per_node=None, gres_per_node={}, gres_per_task=parse_gres("cpu=2"),
        gres_per_job={},
    )  # fmt: skip
    as_field = replace(as_tres, gres_per_task={}, cpus_per_task=2)
    assert job_shape(as_tres) == job_shape(as_field)
    assert "cpu" in job_shape(as_tres).per_unit and set(job_shape(as_tres).per_unit) == {
        "cpu",
        "mem",
    }


def test_node_states() -> None:
    assert node_state("idle") == "up" and node_state("mixed") == "up"
    assert node_state("idle", ["DRAIN"]) == "drain" and node_state("drained") == "drain"
    assert node_state("down*") == "down" and node_state("idle", ["NOT_RESPONDING"]) == "down"
    assert node_state("reserved") == "reserved" and node_state("mixed+drain") == "drain"


def test_sinfo_json_nodes_with_gres_and_use() -> None:
    nodes = parse_nodes(load("sinfo_busy.json"), [])
    assert nodes["gpu1"].capacity == {"cpu": 8, "mem": 8000, "gpu": 2}
    assert nodes["gpu1"].used == {"cpu": 2, "mem": 512, "gpu": 2}
    assert nodes["node2"].capacity == {"cpu": 4, "mem": 4000}
    assert nodes["node2"].free() == {"cpu": 1, "mem": 3388}
    assert parse_nodes(load("sinfo_busy.json"), ["other"]) == {}


def test_squeue_json_held_jobs_and_shapes() -> None:
    jobs = {
        j.id: j
        for j in parse_jobs(
            load("squeue_held.json"),
            tag="extsched",
            partitions=[],
            partition_max={},
            unlimited_s=3600,
        )
    }
    assert all(j.held_for_us for j in jobs.values())
    weird = jobs["1"]
    assert weird.name == 'my "job" é x' and weird.time_limit_s == 120
    assert (weird.shape.units, weird.shape.per_unit) == (1, {"cpu": 2, "mem": 512})
    two_nodes = jobs["2"]  # -N 2 --gres=gpu:1: one unit per node
    assert two_nodes.shape.one_unit_per_node and two_nodes.shape.units == 2
    assert two_nodes.shape.per_unit == {"cpu": 1, "mem": 256, "gpu": 1}
    tasks = jobs["3"]  # -n 3 --mem-per-cpu=100: three spreadable tasks
    assert (tasks.shape.units, tasks.shape.per_unit) == (3, {"cpu": 1, "mem": 100})
    per_task_gpu = jobs["4"]  # -n 2 --gpus-per-task=1
    assert per_task_gpu.shape.per_unit == {"cpu": 1, "mem": 256, "gpu": 1}
    assert jobs["3"].time_limit_s == 600  # the partition's DefaultTime, as squeue shows it


def test_squeue_json_running_allocations() -> None:
    jobs = {
        j.id: j
        for j in parse_jobs(
            load("squeue_running.json"),
            tag="extsched",
            partitions=[],
            partition_max={},
            unlimited_s=3600,
        )
    }
    assert jobs["1"].allocation == {"node2": 1}
    assert jobs["2"].allocation == {"gpu1": 1, "gpu2": 1}
    assert jobs["3"].allocation == {"node1": 2, "node2": 1}  # 2 + 1 cores allocated
    assert all(not j.held_for_us for j in jobs.values())


def test_unlimited_limit_takes_partition_maximum_then_setting() -> None:
    doc = load("squeue.json")  # time_limit null on these jobs
    with_max = parse_jobs(
        doc, tag="x", partitions=[], partition_max={"batch": 120}, unlimited_s=999
    )
    assert {j.time_limit_s for j in with_max if j.state == "completed"} == {7200}
    without = parse_jobs(
        doc, tag="x", partitions=[], partition_max={"batch": None}, unlimited_s=999
    )
    assert {j.time_limit_s for j in without if j.state == "completed"} == {999}


def test_partitions_nodes_and_limits() -> None:
    text = (
        "PartitionName=batch AllowGroups=ALL DefaultTime=00:10:00 MaxTime=UNLIMITED "
        "MaxNodes=UNLIMITED Nodes=gpu[1-2],node[1-4] OverSubscribe=NO x\n"
        "PartitionName=short MaxTime=02:00:00 MaxNodes=1 Nodes=a OverSubscribe=EXCLUSIVE\n"
    )
    partitions = parse_partitions(text)
    assert partition_max_minutes(partitions) == {"batch": None, "short": 120}
    batch, short = partitions["batch"], partitions["short"]
    assert batch.nodes == ("gpu1", "gpu2", "node1", "node2", "node3", "node4")
    assert (batch.max_nodes, batch.exclusive) == (None, False)
    assert (short.nodes, short.max_time_s, short.max_nodes, short.exclusive) == (
        ("a",),
        7200,
        1,
        True,
    )


def test_reservations_need_epoch_times() -> None:
    line = (
        "ReservationName=maint StartTime=1795532309 EndTime=1795535909 Duration=01:00:00 "
        "Nodes=node[3-4] NodeCnt=2 Flags=MAINT,SPEC_NODES Users=root State=INACTIVE\n"
    )
    (maint,) = parse_reservations(line)
    assert (maint.name, maint.nodes, maint.start, maint.end) == (
        "maint",
        ("node3", "node4"),
        1795532309,
        1795535909,
    )
    assert parse_reservations("No reservations in the system\n") == ()
    with pytest.raises(StateParseError, match="SLURM_TIME_FORMAT"):
        parse_reservations(line.replace("1795532309", "2026-11-24T14:58:29"))


def test_text_fallback_matches_json() -> None:
    # squeue_O.txt was recorded with "|" and before the command and directory were read
    # (those of scontrol_show_job.txt's jobs are added); the bridge draws a separator
    squeue = "".join(
        f"{fields}|(null)|/tmp/sbx/jobs|{name}\n"
        for fields, name in (
            line.rsplit("|", 1) for line in (FIX / "squeue_O.txt").read_text().splitlines()
        )
    )
    extras = job_extras((FIX / "scontrol_show_job.txt").read_text(), squeue_free_text(squeue, "|"))
    assert extras["1"].admin_comment == "extsched" and extras["1"].mem_per_cpu == 256
    jobs = {
        j.id: j
        for j in parse_text_jobs(
            squeue,
            separator="|",
            extras=extras,
            tag="extsched",
            partitions=[],
            partition_max={},
            unlimited_s=3600,
        )
    }
    assert jobs["1"].name == 'my "job" é x' and jobs["1"].state == "completed"
    assert jobs["9"].shape.per_unit == {"cpu": 1, "mem": 256, "gpu": 2}
    assert jobs["6"].allocation == {"node2": 1} and jobs["6"].time_limit_s == 660
    nodes = parse_text_nodes((FIX / "sinfo_O.txt").read_text(), [])
    assert nodes["gpu1"].capacity == {"cpu": 8, "mem": 8000, "gpu": 2}
    assert nodes["gpu1"].used == {"cpu": 3, "mem": 768, "gpu": 2}
    assert nodes["gpu1"].cpus_per_core == 1 and nodes["gpu2"].cpus_per_core == 2


def test_shape_rules() -> None:
    base = {
        "cpus_per_task": None,
        "mem_per_cpu": 256,
        "mem_per_node": None,
        "gres_per_node": {},
        "gres_per_task": {},
        "gres_per_job": {},
    }
    single = job_shape(SlurmRequest(cpus=4, tasks=4, node_count=1, max_nodes=1, **base))
    assert single.single_node and single.per_unit == {"cpu": 4, "mem": 1024}
    spread = job_shape(
        SlurmRequest(cpus=8, tasks=4, node_count=1, max_nodes=0, **base | {"cpus_per_task": 2})
    )
    assert (spread.units, spread.per_unit) == (4, {"cpu": 2, "mem": 512})


def test_sacct_jobcomp_output() -> None:
    rows = [
        "2|root(0)|root|batch|gpu[1-2]|CANCELLED by 0|1795361288|1795361288|1795361298|1|2|2|wrap",
        "7|bob(1000)|users|batch|node1|COMPLETED|1795361200|1795361290|1795361350|10|2|1|a|b",
        "8|bob(1000)|users|other|node1|COMPLETED|1795361200|1795361290|1795361350|10|2|1|x",
        "9|bob(1000)|users|batch|None assigned|CANCELLED|1795361200|Unknown|1795361350|10|1|0|y",
        "7.batch|bob(1000)|users|batch|node1|COMPLETED|1|2|3|10|2|1|batch",
        # cancelled while pending: slurmctld gives it its end as a start, on no node
        "10|bob(1000)|users|batch|None assigned|CANCELLED by 0|1|1795361350|1795361350|10|1|0|z",
    ]
    text = "".join(row.replace("|", SEP, 12) + "\n" for row in rows)
    jobs = {j.id: j for j in parse_sacct(text, SEP, partitions=["batch"], unlimited_s=60, now=0)}
    assert set(jobs) == {"2", "7"}  # other partition, never started, steps: left out
    assert jobs["2"].state == "cancelled" and jobs["2"].shape.units == 2
    assert jobs["7"].name == "a|b" and jobs["7"].user == "bob"
    assert (jobs["7"].start, jobs["7"].end) == (1795361290, 1795361350)


def test_a_job_name_cannot_add_sacct_records() -> None:
    """sacct prints names as they are: behind a fixed "|" this name would be job 99."""
    forged = "\n99|alice|users|batch|node1|COMPLETED|1|1795361290|1795369999|10|1|1|x"
    row = (
        f"7|bob(1000)|users|batch|node1|COMPLETED|1795361200|1795361290|1795361350|10|2|1|y{forged}"
    )
    text = row.replace("|", SEP, 12) + "\n"
    jobs = parse_sacct(text, SEP, partitions=[], unlimited_s=60, now=0)
    assert [(j.id, j.name) for j in jobs] == [("7", "y" + forged)]


def test_running_units_always_sum_to_the_job_and_are_positive() -> None:
    from cpsched.slurm_bridge.model import JobShape
    from cpsched.slurm_bridge.slurm_shape import units_on_nodes

    tasks = JobShape(units=3, per_unit={"cpu": 1})
    assert units_on_nodes(tasks, {"a": 2, "b": 1}) == {"a": 2, "b": 1}
    assert units_on_nodes(tasks, {"a": 4, "b": 1}) == {"a": 2, "b": 1}
    assert units_on_nodes(tasks, dict.fromkeys("abcd", 1)) == {"a": 1, "b": 1, "c": 1}
    odd = units_on_nodes(JobShape(units=4, per_unit={"cpu": 2}), {"a": 3, "b": 3})
    assert sum(odd.values()) == 4 and min(odd.values()) > 0


CORE_SELECT = {"SelectType": "select/cons_tres", "SelectTypeParameters": "CR_CORE_MEMORY"}


def _ht_jobs(config: dict[str, str] = CORE_SELECT) -> dict[str, JobView]:
    """Jobs recorded on 2-core, 2-thread nodes (``ThreadsPerCore=2``, ``CR_Core_Memory``):
    five (``-n 5``, running on node1 + node2), one (``-n 1``, running on node2), three
    (``-n 3``, held) and memcpu (``-n 2 --mem-per-cpu=100``, held)."""
    nodes = parse_nodes(load("ht_sinfo.json"), [])
    jobs = parse_jobs(
        load("ht_squeue.json"),
        tag="",
        partitions=[],
        partition_max={},
        unlimited_s=60,
        cores=WholeCores.of(nodes, config),
    )
    return {j.name: j for j in jobs}


def test_jobs_on_two_thread_nodes_are_shaped_in_the_whole_cores_slurm_allocates() -> None:
    jobs = _ht_jobs()
    # -n 1: Slurm allocates a whole core, two CPUs, and counts its memory per CPU on both
    assert jobs["one"].shape.per_unit == {"cpu": 2, "mem": 512}
    # -n 5: two tasks fill a core; Slurm ran 4 + 1 tasks on 2 + 1 cores (4 + 2 CPUs)
    five = jobs["five"].shape
    assert (five.units, five.per_unit["cpu"], five.tasks_per_unit) == (3, 2, 2)
    assert jobs["five"].allocation == {"node1": 2, "node2": 1}
    three = jobs["three"].shape
    assert (three.units, three.per_unit["cpu"], three.cpus_asked) == (2, 2, 3)
    assert jobs["memcpu"].shape.per_unit == {"cpu": 2, "mem": 200}
    assert jobs["memcpu"].shape.units == 1


@pytest.mark.parametrize(
    "config",
    [
        {"SelectType": "select/cons_tres", "SelectTypeParameters": "CR_CPU_MEMORY"},
        {"SelectType": "select/cons_tres", "SelectTypeParameters": "CR_SOCKET_MEMORY"},
        {"SelectType": "select/linear", "SelectTypeParameters": "CR_MEMORY"},
        {},  # scontrol show config unreadable
    ],
)
def test_nothing_is_rounded_unless_slurm_hands_out_whole_cores(config: dict[str, str]) -> None:
    jobs = _ht_jobs(config)
    assert (jobs["three"].shape.units, jobs["three"].shape.per_unit["cpu"]) == (3, 1)
    # running: its 2 + 1 cores are read as 4 + 2 CPUs, as scontrol -d counts them
    assert jobs["five"].allocation == {"node1": 3, "node2": 2}


def _request(tasks: int, per_task: int, **fields: object) -> SlurmRequest:
    values: dict = {
        "cpus": tasks * per_task,
        "tasks": tasks,
        "node_count": 1,
        "max_nodes": 0,
        "cpus_per_task": per_task,
        "mem_per_cpu": None,
        "mem_per_node": None,
        "gres_per_node": {},
        "gres_per_task": {},
        "gres_per_job": {},
        **fields,
    }
    return SlurmRequest(**values)


@pytest.mark.parametrize(
    ("tasks", "per_task", "threads", "units", "unit_cpus"),
    [
        (5, 1, 2, 3, 2),  # two tasks per core
        (4, 2, 2, 4, 2),  # a task fills a core
        (3, 4, 2, 3, 4),  # a task fills two cores
        (4, 3, 2, 2, 6),  # two 3-CPU tasks fill three cores
        (6, 1, 4, 2, 4),  # four tasks per core
        (5, 1, 1, 5, 1),  # one thread per core: tasks stay units
    ],
)
def test_task_units_fill_whole_cores(
    tasks: int, per_task: int, threads: int, units: int, unit_cpus: int
) -> None:
    shape = job_shape(_request(tasks, per_task), rounding=CoreRounding(threads))
    assert (shape.units, shape.per_unit["cpu"]) == (units, unit_cpus)
    assert shape.units * shape.per_unit["cpu"] >= tasks * per_task
    assert shape.per_unit["cpu"] % threads == 0


@pytest.mark.parametrize(
    ("fields", "units", "unit_cpus", "per_node"),
    [
        # -N 4-5 -n 6: 3 pairs could not cover 4 nodes; a core per task
        ({"node_count": 4, "max_nodes": 5}, 6, 2, None),
        # --ntasks-per-node=3 is no whole number of pairs
        ({"tasks_per_node": 3}, 6, 2, 3),
        # --ntasks-per-node=2 is one pair per node
        ({"tasks_per_node": 2}, 3, 2, 1),
        # a GPU per task: a pair would ask two GPUs of one node
        ({"gres_per_task": {"gpu": 1}}, 6, 2, None),
        # --ntasks-per-core=1: every task on a core of its own
        ({"tasks_per_core": 1}, 6, 2, None),
    ],
)
def test_tasks_are_not_paired_where_pairs_break_the_jobs_rules(
    fields: dict, units: int, unit_cpus: int, per_node: int | None
) -> None:
    shape = job_shape(_request(6, 1, **fields), rounding=CoreRounding(2))
    assert (shape.units, shape.per_unit["cpu"]) == (units, unit_cpus)
    assert shape.per_unit.get("gpu", 0) == fields.get("gres_per_task", {}).get("gpu", 0)
    if per_node is not None:
        assert shape.units_of_tasks(fields["tasks_per_node"]) == per_node


@pytest.mark.parametrize(
    ("tasks", "per_task", "fields", "shape_seen"),
    [
        # figures from the two-thread test bed (squeue -d's CPU_IDs, sinfo's AllocMem)
        (1, 2, {"max_nodes": 1}, (1, 4, 200)),  # -n 1 -c 2: two cores, memory for 2 CPUs
        (3, 1, {}, (3, 2, 100)),  # -n 3: a core a task, 4 + 2 CPUs on two nodes
        (3, 1, {"cpus": 6, "allocated": True}, (3, 2, 100)),  # the same job running
        (2, 1, {"node_count": 2, "max_nodes": 2}, (2, 2, 100)),  # -N 2 -n 2
    ],
)
def test_one_thread_per_core_gives_each_cpu_asked_a_core(
    tasks: int, per_task: int, fields: dict, shape_seen: tuple[int, int, int]
) -> None:
    """``--hint=nomultithread`` or ``--threads-per-core=1`` under ``CR_Core``."""
    request = _request(tasks, per_task, mem_per_cpu=100, threads_per_core=1, **fields)
    shape = job_shape(request, rounding=CoreRounding(2))
    assert (shape.units, shape.per_unit["cpu"], shape.per_unit["mem"]) == shape_seen
    assert shape.cpus_asked == tasks * per_task
    if not request.allocated:  # not rounded (CR_CPU, say): as asked
        unrounded = job_shape(request, rounding=CoreRounding(1))
        assert unrounded.per_unit["cpu"] * unrounded.units == request.cpus


def test_one_task_per_core_site_wide_gives_each_task_its_cores() -> None:
    nodes = parse_nodes(load("ht_sinfo.json"), [])
    config = {**CORE_SELECT, "SelectTypeParameters": "CR_CORE_MEMORY,CR_ONE_TASK_PER_CORE"}
    rounding = WholeCores.of(nodes, config).for_job("batch")
    assert rounding == CoreRounding(2, core_per_task=True)
    single = job_shape(_request(3, 1, max_nodes=1), rounding=rounding)
    assert single.per_unit["cpu"] == 6  # three cores, not two


def test_a_partition_of_nodes_with_different_threads_is_not_rounded() -> None:
    def node(name: str, partition: str, threads: int) -> NodeView:
        return NodeView(name, {"cpu": 4}, {}, "up", partitions=(partition,), cpus_per_core=threads)

    mixed = WholeCores.of({"a": node("a", "p", 2), "b": node("b", "p", 1)}, CORE_SELECT)
    assert mixed.for_job("p").threads == 1
    even = WholeCores.of({"a": node("a", "p", 2), "b": node("b", "q", 1)}, CORE_SELECT)
    assert even.for_job("p").threads == 2
    assert even.for_job("p,q").threads == 1  # the two partitions round differently
    assert even.for_job("p,unmanaged").threads == 2  # a partition not read is not looked at


def test_scontrol_details_give_each_nodes_cpus() -> None:
    """``scontrol -o -d show job`` lines recorded in a live run (jobs 44 and 51)."""
    extras = job_extras((FIX / "scontrol_show_job_d.txt").read_text())
    assert extras["44"].cpus_by_node == {"gpu1": 8, "gpu2": 8}
    assert extras["51"].cpus_by_node == {"node4": 2, "node5": 2}
    assert job_extras("JobId=9 JobName=x NumNodes=1\n")["9"].cpus_by_node == {}


def test_a_job_name_cannot_move_a_running_jobs_cpus() -> None:
    """A name is printed as it is, spaces included: it may look like node details."""
    from cpsched.slurm_bridge.slurm_text import held_per_node

    line = (FIX / "scontrol_show_job_d.txt").read_text().splitlines()[1]
    forged = line.replace("JobName=kth50 ", "JobName=a Nodes=node9 CPU_IDs=0-63 ", 1)
    read = job_extras(forged)["51"].cpus_by_node
    assert read["node9"] == 64  # what the line says, taken apart from squeue's view
    assert held_per_node(read, ["node4", "node5"], 4) == {}  # not the job's: even share instead
    honest = job_extras(line)["51"].cpus_by_node
    assert held_per_node(honest, ["node4", "node5"], 4) == {"node4": 2, "node5": 2}


def test_tasks_per_core_and_unset_counts_from_scontrol() -> None:
    line = "JobId=9 JobName=x NumNodes=2 NtasksPerN:B:S:C={} CPUs/Task=1\n"
    assert job_extras(line.format("0:0:*:1"))["9"].tasks_per_core == 1
    assert job_extras(line.format("0:0:*:*"))["9"].tasks_per_core is None
    unset = job_extras(line.format("65534:0:*:65534"))["9"]
    assert unset.tasks_per_core is None and unset.rules.tasks_per_node is None
    threads = "JobId=9 JobName=x NumNodes=1 ReqB:S:C:T=0:0:*:{} NtasksPerN:B:S:C=0:0:*:*\n"
    assert job_extras(threads.format("1"))["9"].threads_per_core == 1  # --hint=nomultithread
    assert job_extras(threads.format("*"))["9"].threads_per_core is None


def test_a_job_name_that_looks_like_fields_changes_no_jobs_extras() -> None:
    """Lines as Slurm 22.05 prints them: an array element's ids come before its name; a
    name comes as it is. Job 2's name imitates array element 1_2 and a cpsched tag."""
    name = "a ArrayJobId=1 ArrayTaskId=2 MinMemoryCPU=9G AdminComment=extsched x"
    paths = " Network=(null) Command=(null) WorkDir=/w"
    text = (
        "JobId=3 ArrayJobId=1 ArrayTaskId=2 JobName=wrap UserId=root(0) GroupId=root(0) "
        f"MCS_label=N/A Priority=0 NumNodes=1 MinMemoryCPU=256M{paths} AdminComment=extsched\n"
        f"JobId=2 JobName={name} UserId=bob(1000) GroupId=bob(1000) "
        f"MCS_label=N/A Priority=0 NumNodes=1 MinMemoryCPU=100M{paths} StdIn=/dev/null\n"
    )
    extras = job_extras(
        text, {"3": FreeText("wrap", "(null)", "/w"), "2": FreeText(name, "(null)", "/w")}
    )
    assert set(extras) == {"1_2", "2"}  # the array key comes from the line's head
    assert extras["1_2"].admin_comment == "extsched" and extras["1_2"].mem_per_cpu == 256
    assert extras["2"].admin_comment == "" and extras["2"].mem_per_cpu == 100
    # without knowing the names, lines are read through
    assert job_extras(text)["2"].admin_comment == "extsched"


def test_free_text_around_the_hold_tag_neither_tags_nor_untags() -> None:
    """Two held jobs recorded on the test bed with the same directory, comment,
    ``--network`` and output path, each imitating a hold tag and fields; job 7 was then
    tagged by ``scontrol update AdminComment=extsched``, job 6 was not."""
    work_dir = "/tmp/w AdminComment=extsched NumNodes=1-9 "
    known = {job: FreeText(f"free {n}", "(null)", work_dir) for n, job in ((1, "6"), (2, "7"))}
    extras = job_extras((FIX / "scontrol_show_job_free_text.txt").read_text(), known)
    assert [extras[job].admin_comment for job in ("6", "7")] == ["", "extsched"]
    assert {(e.rules.max_nodes, e.rules.min_nodes, e.mem_per_cpu) for e in extras.values()} == {
        (None, None, 256)
    }


@given(names=st.lists(st.text(st.sampled_from("ab |\n=5e"), max_size=12), min_size=1, max_size=6))
def test_records_split_back_whatever_the_names_hold(names: list[str]) -> None:
    """Fields joined by a drawn separator, one record a line, the name last."""
    records = [[str(i), f"user{i}", name] for i, name in enumerate(names)]
    text = "".join(SEP.join(record) + "\n" for record in records)
    assert split_records(text, SEP, 3, "test") == records


def test_records_that_do_not_add_up_are_a_parse_error() -> None:
    with pytest.raises(StateParseError, match="not a multiple of 2"):
        split_records(f"1{SEP}a{SEP}b{SEP}c\n", SEP, 3, "squeue")
    with pytest.raises(StateParseError, match="without a line break"):
        split_records(f"1{SEP}a{SEP}b 2{SEP}c{SEP}d\n", SEP, 3, "squeue")
    assert split_records("", SEP, 3, "squeue") == []


def _squeue_record(fields: dict[str, str]) -> str:
    base = dict.fromkeys(SQUEUE_FIELDS, "N/A") | {
        "Command": "(null)",
        "WorkDir": "/w",
        "State": "PENDING",
        "PriorityLong": "0",
        "NumCPUs": "1",
        "NumNodes": "1",
        "NumTasks": "1",
        "cpus-per-task": "1",
        "MinMemory": "100M",
        "TimeLimit": "10:00",
        "SubmitTime": "1795361283",
        "UserName": "bob",
        "GroupName": "bob",
        "Partition": "batch",
    }
    return SEP.join((base | fields)[name] for name in SQUEUE_FIELDS) + "\n"


def test_a_job_name_cannot_add_jobs_to_the_text_state() -> None:
    """squeue and scontrol print names as they are. Job 2's name holds a whole squeue
    line behind "|" and a whole scontrol line tagging job 3 for cpsched."""
    forged_squeue = "|".join(["3", "3", "N/A", "alice", "alice", "batch", "RUNNING"] + ["1"] * 20)
    paths = "Network=(null) Command=(null) WorkDir=/w"
    name = f"x\n{forged_squeue}\nJobId=3 JobName=y UserId=alice(1) {paths} AdminComment=extsched"
    squeue = _squeue_record({"JobID": "2", "ArrayJobID": "2", "Name": name}) + _squeue_record(
        {"JobID": "3", "ArrayJobID": "3", "UserName": "alice", "Name": "y"}
    )
    show_job = (
        f"JobId=2 JobName={name} UserId=bob(2) NumNodes=1 {paths} AdminComment=extsched\n"
        f"JobId=3 JobName=y UserId=alice(1) NumNodes=1 {paths} Comment=z\n"
    )
    extras = job_extras(show_job, squeue_free_text(squeue, SEP))
    assert {key: e.admin_comment for key, e in extras.items()} == {"2": "extsched", "3": ""}
    jobs = parse_text_jobs(
        squeue,
        separator=SEP,
        extras=extras,
        tag="extsched",
        partitions=[],
        partition_max={},
        unlimited_s=3600,
    )
    assert [(j.id, j.user, j.state, j.held_for_us) for j in jobs] == [
        ("2", "bob", "pending", True),
        ("3", "alice", "pending", False),  # the tag in job 2's name is not job 3's
    ]
    assert jobs[0].name == name and jobs[0].tagged and not jobs[1].tagged


def test_a_job_found_twice_in_scontrol_output_is_doubtful() -> None:
    """Another job's comment, output path or ``--network`` (squeue does not give them)
    may hold a line break and a copy of a job's line: that job's lines are not believed."""
    paths = "Network=(null) Command=(null) WorkDir=/w"
    show_job = (
        f"JobId=4 JobName=x UserId=a(1) {paths} Comment=c\n"
        f"JobId=3 JobName=y UserId=a(1) {paths} AdminComment=extsched\n"
        f"JobId=3 JobName=y UserId=a(1) {paths}\n"
    )
    known = {job: FreeText(name, "(null)", "/w") for job, name in (("3", "y"), ("4", "x"))}
    extras = job_extras(show_job, known)
    assert extras["3"] == JobExtras(doubtful=True) and not extras["4"].doubtful


def test_a_job_cancelled_while_pending_never_started() -> None:
    """Slurm gives such a job a start time (its end) on no node; it is no 0 s run."""
    doc = load("squeue.json")
    ran, cancelled = doc["jobs"][0], dict(doc["jobs"][0], job_id=99, nodes="")
    cancelled["job_state"] = "CANCELLED"
    jobs = parse_jobs(
        {**doc, "jobs": [ran, cancelled]},
        tag="extsched",
        partitions=[],
        partition_max={},
        unlimited_s=3600,
    )
    assert [(j.id, j.state, j.start) for j in jobs] == [
        ("1", "completed", 1795349284),
        ("99", "cancelled", None),
    ]
    text = _squeue_record(
        {"JobID": "7", "State": "CANCELLED", "StartTime": "1795349284", "NodeList": ""}
    ) + _squeue_record(
        {"JobID": "8", "State": "COMPLETED", "StartTime": "1795349284", "NodeList": "node1"}
    )
    jobs = parse_text_jobs(
        text,
        separator=SEP,
        extras={},
        tag="extsched",
        partitions=[],
        partition_max={},
        unlimited_s=3600,
    )
    assert [(j.id, j.start) for j in jobs] == [("7", None), ("8", 1795349284)]


def test_a_jobs_line_runs_on_over_line_breaks_in_its_name_command_and_directory() -> None:
    paths = "Network=(null) Command=/home/b/run\nit.sh WorkDir=/home/b/a\rb"
    show_job = (
        f"JobId=5 JobName=n\u2028x\ny UserId=b(1) MinMemoryCPU=100M {paths} AdminComment=extsched\n"
        "JobId=6 JobName=z UserId=b(1) MinMemoryCPU=200M Network=(null) Command=(null) "
        "WorkDir=/w AdminComment=extsched\n"
    )
    known = {
        "5": FreeText("n\u2028x\ny", "/home/b/run\nit.sh", "/home/b/a\rb"),
        "6": FreeText("z", "(null)", "/w"),
    }
    extras = job_extras(show_job, known)
    assert [(e.admin_comment, e.mem_per_cpu, e.doubtful) for e in extras.values()] == [
        ("extsched", 100, False),
        ("extsched", 200, False),
    ]
    # renamed between the two reads: its line breaks cannot be followed; job 6 is intact
    renamed = {**known, "5": FreeText("n\n\n\n", "/home/b/run\nit.sh", "/home/b/a\rb")}
    extras = job_extras(show_job, renamed)
    assert extras["5"].doubtful and extras["6"].admin_comment == "extsched"


def test_free_text_is_known_only_for_jobs_submitted_before_scontrol_ran() -> None:
    squeue = _squeue_record({"JobID": "2", "SubmitTime": "100"}) + _squeue_record(
        {"JobID": "3", "SubmitTime": "200"}
    )
    assert set(squeue_free_text(squeue, SEP)) == {"2", "3"}
    assert set(squeue_free_text(squeue, SEP, submitted_before=200)) == {"2"}


def test_scontrol_lines_of_slurm_24_11() -> None:
    """What the text source takes from 24.11's ``scontrol -o -d show job`` (recorded): the
    tag, a held ``-n 6`` job's shown maximum (``NumNodes=1-1``, read as no limit there),
    a ``-N 2`` job's asked node count, a running job's CPUs per node."""
    text = (FIX.parent / "slurm-24.11" / "scontrol_show_job_o_d_epoch.txt").read_text()
    extras = job_extras(text)
    held = extras["16"]  # PENDING, -n 6, NumNodes=1-1, ReqTRES node=1
    assert held.admin_comment == "extsched"
    assert (held.rules.min_nodes, held.rules.max_nodes, held.asked_nodes) == (None, 1, 1)
    assert shown_node_limit(1, 1, packed_as_asked=False, asked_nodes=1, estimated=True) == 0
    assert extras["8"].asked_nodes == 2 and extras["8"].rules.min_nodes == 2  # -N 2 -n 4
    assert extras["3"].cpus_by_node == {"node1": 3, "node2": 3}
    assert extras["15"].cpus_by_node == {"gpu2": 2}
