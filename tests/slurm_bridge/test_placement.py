"""Exact placement, starting jobs, every service failure's fallback, refused finished jobs
and event-driven pacing — against a fake cluster and a scripted service (the real Slurm
checks are in test_slurm_placement.py)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from cpsched.slurm_bridge.apply import apply_decision, exact_split, slurm_split
from cpsched.slurm_bridge.backend import ExactSplit
from cpsched.slurm_bridge.model import ClusterState, JobRules, JobShape, PartitionView
from cpsched.slurm_bridge.pacing import Pacer, WakeFile
from cpsched.slurm_bridge.snapshot import dispatch_request
from cpsched.wire.schemas import DecisionOut
from tests.slurm_bridge.fakes import FakeCluster, ScriptedService, decision, held, node, running
from tests.slurm_bridge.test_loop import make

TASKS = JobShape(units=5, per_unit={"cpu": 1})  # sbatch -n 5: Slurm splits the tasks


def tasks(job_id: str, units: int = 5) -> object:
    return held(job_id, units=units, shape=replace(TASKS, units=units))


def cluster(*jobs: object, used: dict[str, int] | None = None) -> ClusterState:
    names = ["a", "b", "c"]  # Slurm's node order
    nodes = {n: node(n, cpu=4, used_cpu=(used or {}).get(n, 0)) for n in names}
    return ClusterState(time=1000, nodes=nodes, jobs=list(jobs))  # type: ignore[arg-type]


def apply(
    state: ClusterState, starts: dict[str, dict[str, int]], may_drift: frozenset[str] = frozenset()
) -> tuple[FakeCluster, object]:
    fake = FakeCluster(state)
    answer = DecisionOut.model_validate(decision(starts=starts))
    return fake, apply_decision(answer, state, fake, may_drift=may_drift)


def test_slurm_split_is_one_per_node_then_filling_in_node_order() -> None:
    order = {"a": 0, "b": 1, "c": 2}
    assert slurm_split(5, {"b": 4, "a": 3}, order) == {"a": 3, "b": 2}
    assert slurm_split(6, {"a": 4, "b": 4, "c": 4}, order) == {"a": 4, "b": 1, "c": 1}


def test_a_task_job_starts_only_on_the_split_slurm_will_make() -> None:
    state = cluster(tasks("x"), tasks("y"), used={"a": 1})  # a has 3 free, b 4
    # (Whatever uses a's fourth CPU could end before Slurm allocates: without may_drift,
    # x and y would wait for a steadier moment, as the test after the next one shows.)
    both = frozenset({"x", "y"})
    fake, result = apply(state, {"x": {"a": 3, "b": 2}}, both)
    assert fake.calls == [("start", "x", "a", "b")]
    assert result.started == {"x": {"a": 3, "b": 2}}
    # Decided 1 + 4: Slurm will fill a (first in its order) with 3 and give b 2. That is
    # what it is started as, and said so (no room anyone else was given is taken).
    fake, result = apply(state, {"y": {"a": 1, "b": 4}}, both)
    assert fake.calls == [("start", "y", "a", "b")]
    assert result.started == {"y": {"a": 3, "b": 2}}
    assert result.adjusted == {"y": ({"a": 1, "b": 4}, {"a": 3, "b": 2})}


def test_a_task_job_whose_split_depends_on_slurms_order_waits_a_cycle() -> None:
    # x fills a (3 of its 4, one-task job s takes the last): Slurm allocates the cycle's
    # jobs in its own order, and allocated first x would take s's core. x waits; s starts.
    state = cluster(tasks("x"), held("s"))
    fake, result = apply(state, {"x": {"a": 3, "b": 2}, "s": {"a": 1}})
    assert fake.calls == [("start", "s", "a")]
    assert list(result.deferred) == ["x"]
    assert "depends on the jobs starting beside it" in result.deferred["x"]
    # Two tasks on two nodes: one each whatever the order, so both start at once.
    state = cluster(tasks("z", units=2), held("t", cpu=3))
    fake, result = apply(state, {"t": {"a": 1}, "z": {"a": 1, "b": 1}})
    assert [c[1] for c in fake.calls] == ["t", "z"] and not result.deferred


def test_a_task_job_beside_a_completing_job_waits_for_its_nodes_to_settle() -> None:
    # A cycle woken by a job's end sees it COMPLETING: its core frees any moment, and
    # Slurm would then fill a further than decided.
    leaving = replace(running("done", {"a": 1}), ending=True)
    state = cluster(tasks("x"), leaving, used={"a": 1})
    fake, result = apply(state, {"x": {"a": 3, "b": 2}})
    assert fake.calls == []
    assert result.deferred == {"x": "job done is leaving its nodes; the split would change"}


def test_a_task_job_whose_split_a_running_jobs_end_could_change_waits() -> None:
    # r runs on a's fourth CPU: x fills a's other 3 and spills 2 onto b. If r ends in the
    # second before Slurm allocates x, Slurm puts 4 on a and 1 on b: x waits.
    drifting = cluster(tasks("x"), running("r", {"a": 1}), used={"a": 1})
    fake, result = apply(drifting, {"x": {"a": 3, "b": 2}})
    assert fake.calls == []
    assert result.deferred["x"].startswith("a job ending before Slurm allocates")
    assert result.drifting() == ["x"]
    # Running jobs only on the last node, or a split an end cannot change, start at once.
    state = cluster(tasks("y"), running("r", {"b": 1}), used={"b": 1})
    fake, result = apply(state, {"y": {"a": 4, "b": 1}})
    assert fake.calls == [("start", "y", "a", "b")] and not result.deferred
    state = cluster(tasks("z", units=2), running("r", {"a": 1}), used={"a": 1})
    fake, result = apply(state, {"z": {"a": 1, "b": 1}})  # one per node whatever a's room
    assert fake.calls == [("start", "z", "a", "b")]
    # Once it has waited long enough (the bridge passes it in may_drift), it starts.
    fake, result = apply(drifting, {"x": {"a": 3, "b": 2}}, frozenset({"x"}))
    assert result.started == {"x": {"a": 3, "b": 2}}
    # So does a start the service marks may_drift: it waited its split_wait already.
    fake = FakeCluster(drifting)
    answer = decision(starts={"x": {"a": 3, "b": 2}})
    answer["starts"][0]["may_drift"] = True
    result = apply_decision(DecisionOut.model_validate(answer), drifting, fake)
    assert result.started == {"x": {"a": 3, "b": 2}} and not result.deferred


def test_the_bridge_starts_a_drifting_task_job_after_split_drift_wait_s(tmp_path: Path) -> None:
    clock = [5000.0]
    service = ScriptedService(answer=lambda body: decision(starts={"x": {"a": 3, "b": 2}}))
    fake = FakeCluster(cluster(tasks("x"), running("r", {"a": 1}), used={"a": 1}))
    bridge = make(tmp_path, fake, service, split_drift_wait_s=30)
    bridge.clock = lambda: clock[0]
    for _ in range(2):
        report = bridge.cycle()
        assert report.applied is not None and report.applied.drifting() == ["x"]
        clock[0] += 20
    report = bridge.cycle()  # 40 s after it was first deferred
    assert report.applied is not None and report.applied.started == {"x": {"a": 3, "b": 2}}
    assert bridge.drift_since == {}
    assert bridge.metrics.counters["starts_deferred_for_split_total"] == 2


def test_a_task_job_beside_a_job_released_earlier_waits_until_that_one_runs() -> None:
    # r, released last cycle, still pending on a: Slurm may allocate x first (priority
    # order), and x would then take r's core. x waits until r runs.
    released = replace(held("r"), held_for_us=False, priority=1)
    state = cluster(tasks("x"), released)
    fake = FakeCluster(state)
    answer = DecisionOut.model_validate(decision(starts={"x": {"a": 3, "b": 2}}))
    result = apply_decision(answer, state, fake, starting={"r": {"a": 1}})
    assert fake.calls == [] and list(result.deferred) == ["x"]


def test_jobs_released_earlier_and_not_running_yet_hold_their_share() -> None:
    released = replace(held("r", cpu=3), held_for_us=False, priority=1)
    state = cluster(released, held("y", cpu=2))
    fake = FakeCluster(state)
    answer = DecisionOut.model_validate(decision(starts={"y": {"a": 1}}))
    result = apply_decision(answer, state, fake, starting={"r": {"a": 1}})
    assert fake.calls == []
    assert result.refused == {"y": "node a has 1 cpu free, needs 2"}


def test_node_count_jobs_get_their_share_as_the_least_cpus_per_node() -> None:
    per_node = JobShape(units=2, per_unit={"cpu": 4}, one_unit_per_node=True)  # sbatch -N 2 -n 8
    seen: list[object] = []

    class Recording(FakeCluster):
        def start(self, job_id, allocation, *, cpus_per_node=None, partition=None, exact=None):  # type: ignore[no-untyped-def]
            seen.append((job_id, dict(allocation), cpus_per_node))

    state = cluster(held("n", units=2, shape=per_node))
    apply_decision(
        DecisionOut.model_validate(decision(starts={"n": {"b": 1, "a": 1}})),
        state,
        Recording(state),
    )
    assert seen == [("n", {"a": 1, "b": 1}, 4)]  # in Slurm's node order, with the cap


def test_snapshot_sends_task_jobs_as_block_and_nodes_in_slurm_order() -> None:
    state = cluster(tasks("x"), held("one"))
    request, _ = dispatch_request(state, shadow=False, extensions={})
    assert [n.name for n in request.nodes] == ["a", "b", "c"]
    assert {j.id: j.layout for j in request.queued} == {"x": "block", "one": "any"}


def test_a_released_job_still_pending_keeps_its_nodes_in_the_snapshot() -> None:
    released = replace(tasks("x"), held_for_us=False, priority=1)
    state = cluster(released, tasks("y"))
    request, _ = dispatch_request(
        state, shadow=False, extensions={}, starting={"x": (990, {"a": 3, "b": 2})}
    )
    assert [(r.id, r.start, r.allocation) for r in request.running] == [
        ("x", 990, {"a": 3, "b": 2})
    ]
    assert [j.id for j in request.queued] == ["y"]


def test_labels_with_control_characters_are_cleaned_in_snapshots() -> None:
    state = cluster(replace(held("x"), name="bad\x01name"))
    request, _ = dispatch_request(state, shadow=False, extensions={})
    assert request.queued[0].name == "bad\ufffdname"


def test_the_next_cycle_compares_where_a_job_landed_with_the_decision(tmp_path: Path) -> None:
    job = tasks("x")
    service = ScriptedService(answer=lambda body: decision(starts={"x": {"a": 3, "b": 2}}))
    fake = FakeCluster(cluster(job, used={"a": 1}))
    bridge = make(tmp_path, fake, service, pin_grace_s=60, split_drift_wait_s=0)
    bridge.cycle()
    # While Slurm starts it, the job is sent as running on its decided nodes.
    service.answer = lambda body: decision()
    bridge.cycle()
    assert service.dispatches[-1]["running"][0]["allocation"] == {"a": 3, "b": 2}
    # It runs on another split: logged, counted, audited.
    fake.state = replace(
        fake.state,
        jobs=[running("x", {"a": 2, "b": 3}, start=1001)],
    )
    report = bridge.cycle()
    assert report.misplaced == {"x": {"a": 2, "b": 3}}  # 3 CPUs on b, 2 were decided
    assert bridge.metrics.counters["placement_mismatch_total"] == 1
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [e["event"] for e in audit] == ["start", "placement_mismatch"]
    assert audit[1]["decided"] == {"a": 3, "b": 2}


def test_a_node_count_job_running_its_even_split_is_where_it_was_decided(
    tmp_path: Path,
) -> None:
    # -N 2 -n 7: decided one unit (4 CPUs) per node; Slurm runs 4 + 3 and reports it as
    # seven tasks. Less than decided on a node is not a mismatch; more would be.
    shape = JobShape(units=2, per_unit={"cpu": 4}, one_unit_per_node=True)
    service = ScriptedService(answer=lambda body: decision(starts={"n": {"a": 1, "b": 1}}))
    fake = FakeCluster(cluster(held("n", units=2, shape=shape)))
    bridge = make(tmp_path, fake, service)
    bridge.cycle()
    as_tasks = JobShape(units=7, per_unit={"cpu": 1})
    fake.state = replace(
        fake.state,
        jobs=[replace(running("n", {"a": 4, "b": 3}, start=1001), shape=as_tasks)],
    )
    assert bridge.cycle().misplaced == {}


@pytest.mark.parametrize(
    ("status", "fix"),
    [(401, "token"), (403, "may not act"), (404, "no such cluster"), (422, "refused the data")],
)
def test_every_refusal_of_the_service_triggers_the_fallback(
    tmp_path: Path, status: int, fix: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeCluster(cluster(held("x")))
    bridge = make(tmp_path, fake, ScriptedService(), fallback="release")
    bridge.client._http._transport = httpx.MockTransport(  # type: ignore[attr-defined]
        lambda r: httpx.Response(status, json={"error": "e", "detail": "no"})
    )
    with caplog.at_level(logging.WARNING):
        report = bridge.cycle()
    assert report.fallback == "release:1"
    assert fake.calls == [("release", "x")]
    refused = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(refused) == 1 and fix in refused[0].getMessage()
    assert refused[0].fallback == "release"  # type: ignore[attr-defined]


def test_the_first_outage_line_names_the_fallback_in_force(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeCluster(cluster(held("x")))
    bridge = make(
        tmp_path, fake, ScriptedService(down=True), fallback="release", fallback_after_s=60
    )
    with caplog.at_level(logging.WARNING):
        report = bridge.cycle()
    assert report.fallback == "hold"
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "fallback=hold" not in text and "fallback=release" in text
    assert caplog.records[0].fallback == "release after 60 s"  # type: ignore[attr-defined]


def test_a_finished_job_the_schema_refuses_is_reported_once_and_blocks_nothing(
    tmp_path: Path,
) -> None:
    good = replace(running("g", {"a": 1}), state="completed", end=1010)
    bad = replace(running("b", {"a": 1}), state="completed", end=1010, name="x\x00y")
    fake = FakeCluster(cluster())
    fake.ended = [bad, good]
    service = ScriptedService()
    bridge = make(tmp_path, fake, service)
    report = bridge.cycle()
    assert [j["id"] for j in service.posted_finished] == ["g"]
    assert set(report.finished_refused) == {"b"}
    assert "control character" in report.finished_refused["b"]
    again = bridge.cycle()  # not retried: it would be refused again
    assert again.finished_refused == {} and again.notes == []


def test_a_finished_job_the_service_refuses_is_not_sent_again(tmp_path: Path) -> None:
    fake = FakeCluster(cluster())
    fake.ended = [replace(running(j, {"a": 1}), state="completed", end=1010) for j in "pq"]
    posts: list[list[str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path.endswith("/dispatch"):
            return httpx.Response(200, json=decision())
        posts.append([j["id"] for j in body["jobs"]])
        refused = [{"job_id": "p", "reason": "cannot store it"}]
        return httpx.Response(200, json={"stored": 1, "duplicates": 0, "refused": refused})

    bridge = make(tmp_path, fake, ScriptedService())
    bridge.client._http._transport = httpx.MockTransport(handler)  # type: ignore[attr-defined]
    report = bridge.cycle()
    assert report.finished_refused == {"p": "cannot store it"}
    bridge.cycle()
    assert posts == [["p", "q"]]


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_touched_wake_file_starts_a_cycle_after_the_minimum_gap(tmp_path: Path) -> None:
    wake = tmp_path / "wake"
    wake.touch()
    t = FakeTime()
    pacer = Pacer(WakeFile(wake), lambda: True, t.clock, t.sleep, min_gap_s=1.0)
    wake.write_text("x")  # a job ended: EpilogSlurmctld touched it
    assert pacer.wait(0.0, 10.0, outage=False) == "event"
    assert 1.0 <= t.now < 1.3
    assert pacer.wait(t.now, 10.0, outage=False) == "periodic"  # nothing new since


def test_during_an_outage_the_service_is_probed_and_its_return_starts_a_cycle() -> None:
    t = FakeTime()
    answers = iter([False, False, True])
    pacer = Pacer(WakeFile(None), lambda: next(answers), t.clock, t.sleep, probe_s=1.0)
    assert pacer.wait(0.0, 10.0, outage=True) == "service back"
    assert 3.0 <= t.now < 3.3  # noticed within a probe interval of being ready


def test_capacity_held_by_jobs_the_snapshot_does_not_carry_is_sent_as_held_outside() -> None:
    # 3 CPUs of a are used by a job of a partition left to Slurm (not in the state's jobs):
    # the node keeps its capacity, the 3 go as held outside it.
    state = cluster(held("x"), used={"a": 3})
    request, _ = dispatch_request(state, shadow=False, extensions={})
    assert {n.name: n.resources["cpu"] for n in request.nodes} == {"a": 4, "b": 4, "c": 4}
    assert {n.name: n.held_outside for n in request.nodes} == {"a": {"cpu": 3}, "b": {}, "c": {}}
    # A job released but not running yet does not hide it (Slurm does not count it yet).
    released = replace(held("s"), held_for_us=False, priority=1)
    state = cluster(released, used={"a": 2})
    request, _ = dispatch_request(
        state, shadow=False, extensions={}, starting={"s": (990, {"a": 1})}
    )
    assert request.nodes[0].held_outside == {"cpu": 2}  # what Slurm's other jobs hold
    # A running job the snapshot does carry is not counted twice.
    state = cluster(running("r", {"a": 3}), used={"a": 3})
    request, _ = dispatch_request(state, shadow=False, extensions={})
    assert request.nodes[0].held_outside == {}


def test_the_cycle_that_ends_a_release_fallback_applies_nothing(tmp_path: Path) -> None:
    # Jobs handed to Slurm's scheduler may be starting at that moment on nodes the state
    # shows free: the starts wait for the next read, one cycle gap later.
    service = ScriptedService(down=True)
    fake = FakeCluster(cluster(held("x"), held("y")))
    bridge = make(tmp_path, fake, service, fallback="release")
    assert bridge.cycle().fallback == "release:2"
    fake.state = replace(fake.state, jobs=[fake.state.jobs[0], replace(held("z"))])
    service.down = False
    service.answer = lambda body: decision(starts={"z": {"a": 1}})
    back = bridge.cycle()
    assert back.settling and back.applied is None and back.reclaimed == ["x"]
    after = bridge.cycle()
    assert after.applied is not None and list(after.applied.started) == ["z"]


def test_pinned_by_reservation_a_task_job_starts_on_its_decided_split_at_once() -> None:
    # a has 3 free (a running job's end could grow that), b 4: Slurm alone would split
    # 1 + 4 as 3 + 2, and a drift could change even that. In a core reservation of
    # exactly 1 + 4 cores neither can happen: no adjustment, no wait.
    state = cluster(tasks("y"), used={"a": 1})
    fake = FakeCluster(state, splits_tasks=False, pins_splits=True)
    answer = DecisionOut.model_validate(decision(starts={"y": {"b": 4, "a": 1}}))
    result = apply_decision(answer, state, fake)
    assert result.started == {"y": {"a": 1, "b": 4}} and not result.adjusted
    assert not result.deferred
    assert fake.exact["y"] == ExactSplit(
        user="u", cores={"a": 1, "b": 4}, partition="batch", limit_s=600
    )
    assert list(fake.exact["y"].cores) == ["a", "b"]  # Slurm's node order


def test_only_task_jobs_on_several_nodes_are_pinned_by_reservation() -> None:
    per_node = JobShape(units=2, per_unit={"cpu": 4}, one_unit_per_node=True)  # sbatch -N 2
    state = cluster(tasks("one", units=2), held("n", units=2, shape=per_node), held("s"))
    fake = FakeCluster(state, splits_tasks=False, pins_splits=True)
    starts = {"one": {"a": 2}, "n": {"b": 1, "c": 1}, "s": {"a": 1}}
    result = apply_decision(DecisionOut.model_validate(decision(starts=starts)), state, fake)
    assert set(result.started) == {"one", "n", "s"}
    assert fake.exact == {}


def test_a_pin_counts_cores_where_a_core_has_several_cpus() -> None:
    state = cluster(tasks("y", units=6))
    state = replace(state, nodes={n: replace(v, cpus_per_core=2) for n, v in state.nodes.items()})
    split = exact_split(state.jobs[0], {"a": 3, "b": 3}, state, None)
    assert split is not None and split.cores == {"a": 2, "b": 2}


def test_pinned_by_reservation_task_jobs_are_sent_with_any_split() -> None:
    state = cluster(tasks("x"))
    request, _ = dispatch_request(
        state, shadow=False, extensions={}, splits_tasks=False, pins_splits=True
    )
    assert {j.id: j.layout for j in request.queued} == {"x": "any"}


def test_a_pin_cannot_hold_a_job_in_a_site_reservation_or_on_whole_nodes() -> None:
    # A job is in one reservation at most, and a pin of its CPUs is not whole nodes:
    # such jobs keep Slurm's own split (block), with the bridge's drift rule.
    own = replace(tasks("r"), rules=JobRules(reservation="training"))
    whole = replace(tasks("w"), rules=JobRules(exclusive=True))
    state = cluster(own, whole, tasks("x"))
    request, _ = dispatch_request(
        state,
        shadow=False,
        extensions={},
        splits_tasks=False,
        pins_splits=True,
        starting={},
    )
    layouts = {j.id: j.layout for j in request.queued}
    assert layouts == {"r": "block", "w": "block", "x": "any"}
    fake = FakeCluster(state, splits_tasks=False, pins_splits=True)
    answer = DecisionOut.model_validate(decision(starts={"w": {"a": 4, "b": 1}}))
    result = apply_decision(answer, state, fake, may_drift=frozenset({"w"}))
    assert result.started == {"w": {"a": 4, "b": 1}} and fake.exact == {}


def test_a_job_still_in_its_pin_is_not_extended_until_the_pin_is_off() -> None:
    # Slurm ends a job with its reservation: raising the limit past the pin would kill it.
    job = replace(running("r", {"a": 1}), pin="cpsched-pin-r", time_limit_s=600)
    state = cluster(job)
    answer = DecisionOut.model_validate(decision(extensions={"r": 1200}))
    fake = FakeCluster(state, splits_tasks=False, pins_splits=True)
    result = apply_decision(answer, state, fake)
    assert result.extended == {} and "r" in result.deferred
    result = apply_decision(answer, state, fake, unpinned=["r"])  # taken off this cycle
    assert result.extended == {"r": 1200}


def test_a_job_on_whole_nodes_by_its_partitions_rule_is_not_pinned() -> None:
    whole = PartitionView(name="big", nodes=("a", "b", "c"), exclusive=True)
    job = replace(tasks("w"), partition="big")
    state = replace(cluster(job), partitions={"big": whole})
    assert job.split_by_manager(state.partitions, splits_tasks=False, pins_splits=True)
    assert not tasks("x").split_by_manager({}, splits_tasks=False, pins_splits=True)
    assert not tasks("x").split_by_manager({}, splits_tasks=False, pins_splits=False)  # PBS
    assert tasks("x").split_by_manager({}, splits_tasks=True, pins_splits=False)


def test_a_job_of_several_partitions_is_pinned_in_the_one_it_runs_in() -> None:
    job = replace(tasks("x"), partition="short,long")
    state = cluster(job)
    assert exact_split(job, {"a": 1, "b": 4}, state, "long").partition == "long"  # type: ignore[union-attr]
    # not chosen (partitions not read): Slurm's default, not a guess among them
    assert exact_split(job, {"a": 1, "b": 4}, state, None).partition == ""  # type: ignore[union-attr]
