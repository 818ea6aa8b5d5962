"""Dispatch instances as data: what a replay dumps reads back as the same objects."""

import gzip
import json

import pytest

from cpsched.core import make_dispatcher
from cpsched.errors import InputError
from cpsched.predictor.walltime import WallTime
from cpsched.replay.bench_instances import bench, summarise
from cpsched.replay.instances import (
    InstanceWriter,
    RecordingDispatcher,
    instance_files,
    open_instances,
)
from cpsched.replay.simulator import Simulator, SimulatorOptions
from tests.factories import job, nodes, running, snapshot
from tests.replay.test_simulator import CROWDED_TRACE, HAND_TRACE, system

GPU = ("cpu", "gpu")


class Keeping:
    """A dispatcher that remembers what it was given, then lets EASY decide."""

    name = "keeping"

    def __init__(self):
        self.inner = make_dispatcher("easy", "first-fit")
        self.seen = []

    def decide(self, snap, durations):
        self.seen.append((snap, dict(durations)))
        return self.inner.decide(snap, durations)


def test_a_replays_instances_read_back_equal(tmp_path):
    keeping = Keeping()
    machine = system(4)
    path = tmp_path / "hand.easy.instances.jsonl.gz"
    with InstanceWriter(path, machine.resource_names, machine.nodes, {"trace": "hand"}) as w:
        recorder = RecordingDispatcher(keeping, w)
        Simulator(machine, HAND_TRACE, recorder, WallTime(), SimulatorOptions()).run()
    source = open_instances(path)
    assert source.meta == {"trace": "hand"} and source.nodes == machine.nodes
    loaded = list(source.instances())
    assert len(loaded) == len(keeping.seen) > 1
    for i, (instance, (snap, durations)) in enumerate(zip(loaded, keeping.seen, strict=True)):
        assert instance.index == i
        assert instance.snapshot == snap
        assert instance.durations == durations


def test_several_types_extensions_and_shared_jobs_round_trip(tmp_path):
    machine = nodes((4, 2), (4, 0), (8, 1))
    a = job("a", units=2, unit=(2, 1), limit=50)
    b = job("b", submit=3, unit=(1, 0), limit=70, user="v")
    c = job("c", submit=4, units=3, unit=(1, 0))
    first = snapshot(5, machine, [running(a, 0, [(0, 1), (2, 1)])], [b, c], GPU)
    extended = running(a, 0, [(0, 1), (2, 1)])
    extended = type(extended)(a, 0, 120, extended.allocation, extensions=1)
    second = snapshot(9, machine, [extended, running(b, 9, [(1, 1)])], [c], GPU)
    path = tmp_path / "x.instances.jsonl.gz"
    durations = [{"a": 40, "b": 60, "c": 100}, {"a": 120, "b": 55, "c": 90}]
    with InstanceWriter(path, GPU, machine) as w:
        w.write(first, durations[0])
        w.write(second, durations[1])
    loaded = list(open_instances(path).instances())
    assert [x.snapshot for x in loaded] == [first, second]
    assert [x.durations for x in loaded] == durations
    with gzip.open(path, "rt") as lines:
        kinds = [json.loads(line).get("kind", "header") for line in lines]
    # Each job is written once, before the first instance holding it.
    assert kinds == ["header", "jobs", "instance", "instance"]


def test_other_files_are_refused_with_what_to_do(tmp_path):
    plain = tmp_path / "plain.jsonl.gz"
    with gzip.open(plain, "wt") as f:
        f.write(json.dumps({"format": "something-else"}) + "\n")
    with pytest.raises(InputError, match="not a cpsched-instances file"):
        open_instances(plain)
    newer = tmp_path / "newer.instances.jsonl.gz"
    with gzip.open(newer, "wt") as f:
        f.write(json.dumps({"format": "cpsched-instances", "version": 99}) + "\n")
    with pytest.raises(InputError, match="dump the instances again"):
        open_instances(newer)
    with pytest.raises(InputError, match="--dump-instances"):
        instance_files(_empty(tmp_path))


def _empty(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    return empty


def test_bench_re_solves_every_instance_with_every_dispatcher(tmp_path):
    machine = system(4)
    path = tmp_path / "hand.easy.instances.jsonl.gz"
    with InstanceWriter(path, machine.resource_names, machine.nodes) as w:
        recorder = RecordingDispatcher(make_dispatcher("easy", "first-fit"), w)
        Simulator(machine, HAND_TRACE, recorder, WallTime(), SimulatorOptions()).run()
    names = ["easy", "fcfs"]
    dispatchers = {n: make_dispatcher(n, "first-fit") for n in names}
    records = bench([path], dispatchers)
    assert len(records) == 2 * w.count
    summary = summarise(records, names, deadline_s=None)
    assert summary["dispatchers"]["easy"]["calls"] == w.count
    assert summary["dispatchers"]["fcfs"]["statuses"] == {"heuristic": w.count}
    assert summary["dispatchers"]["easy"]["fallbacks"] == 0


def test_bench_reads_the_cp_objective_and_never_finds_it_above_the_heuristics(tmp_path):
    from tests.core.cp._util import DETERMINISTIC

    machine = system(4, 2)
    path = tmp_path / "crowded.easy.instances.jsonl.gz"
    with InstanceWriter(path, machine.resource_names, machine.nodes) as w:
        recorder = RecordingDispatcher(make_dispatcher("easy", "first-fit"), w)
        Simulator(machine, CROWDED_TRACE, recorder, WallTime(), SimulatorOptions()).run()
    names = ["hcp3", "pcp20"]
    dispatchers = {n: make_dispatcher(n, "best-fit", search=DETERMINISTIC) for n in names}
    records = bench([path], dispatchers)
    modelled = [r for r in records if r.variables]
    assert modelled and all(r.objective is not None for r in modelled)
    # The search starts from the best greedy plan, the heuristic-seeded one among them.
    assert all(r.objective <= r.heuristic_objective for r in modelled)
    assert all("solve" in r.phases_ms for r in modelled if not r.fallback)
    summary = summarise(records, names, deadline_s=DETERMINISTIC.deadline)
    assert "past_deadline" in summary["dispatchers"]["pcp20"]
    assert summary["variables_ratio"]["hcp3/pcp20"]["instances"] == len(modelled) // 2


def test_keep_reads_only_the_instances_it_accepts(tmp_path):
    machine = system(4)
    path = tmp_path / "hand.easy.instances.jsonl.gz"
    with InstanceWriter(path, machine.resource_names, machine.nodes) as w:
        recorder = RecordingDispatcher(make_dispatcher("easy", "first-fit"), w)
        Simulator(machine, HAND_TRACE, recorder, WallTime(), SimulatorOptions()).run()
    everything = list(open_instances(path).instances())
    odd = list(open_instances(path).instances(keep=lambda index: index % 2 == 1))
    assert odd == [x for x in everything if x.index % 2 == 1] and odd
