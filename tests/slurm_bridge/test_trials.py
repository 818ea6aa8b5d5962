"""Trial runs through the bridge: which jobs are offered, the trial started and ended on
time (put back in the queue, held), or ended by the job itself, and what is refused."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from cpsched.slurm_bridge.errors import CommandError
from cpsched.slurm_bridge.loop import Bridge
from cpsched.slurm_bridge.model import ClusterState
from tests.slurm_bridge.fakes import FakeCluster, ScriptedService, decision, held, node
from tests.slurm_bridge.test_loop import make


def at(time: int, cluster: FakeCluster) -> None:
    cluster.state = replace(cluster.state, time=time)


def tried(starts: dict[str, dict[str, int]], seconds: int = 60) -> dict:
    answer = decision(starts=starts)
    for start in answer["starts"]:
        start["trial_s"] = seconds
    return answer


def audited(bridge: Bridge) -> list[str]:
    path = bridge.settings.audit_log_path
    return [json.loads(line)["event"] for line in path.read_text().splitlines()]


def runs(cluster: FakeCluster, job_id: str, start: int) -> None:
    """Slurm started the released job at ``start`` on the nodes it was pinned to."""
    job = cluster.state.job(job_id)
    assert job is not None
    allocation = dict.fromkeys(job.required_nodes, 1)
    cluster._set(job_id, state="running", start=start, allocation=allocation)


def cluster_of(*jobs) -> FakeCluster:
    nodes = {"n1": node("n1"), "n2": node("n2")}
    return FakeCluster(ClusterState(time=1000, nodes=nodes, jobs=list(jobs)))


def test_only_jobs_slurm_may_requeue_are_offered_and_never_a_second_time(tmp_path: Path) -> None:
    cluster = cluster_of(
        replace(held("1"), requeue=True),
        held("2"),
        replace(held("3"), requeue=True, restarts=1),
    )
    service = ScriptedService()
    make(tmp_path, cluster, service).cycle()
    queued = {q["id"]: q for q in service.dispatches[0]["queued"]}
    assert queued["1"]["requeue"] is True
    assert "requeue" not in queued["2"] and "restarts" not in queued["2"]
    assert queued["3"]["restarts"] == 1
    # A workload manager the bridge cannot put jobs back into offers none.
    cluster.ends_trials = False
    make(tmp_path / "pbs", cluster, service).cycle()
    assert "requeue" not in service.dispatches[1]["queued"][0]


def test_a_trial_ends_on_time_with_the_job_put_back_held(tmp_path: Path) -> None:
    cluster = cluster_of(replace(held("1"), requeue=True))
    service = ScriptedService(answer=lambda body: tried({"1": {"n1": 1}}))
    bridge = make(tmp_path, cluster, service)
    bridge.cycle()
    assert cluster.calls == [("start", "1", "n1")]
    assert bridge.book.trials == {"1": 60}
    service.answer = lambda body: decision()
    runs(cluster, "1", start=1002)
    at(1030, cluster)
    report = bridge.cycle()
    running = service.dispatches[-1]["running"]
    assert [(r["id"], r["trial_end"]) for r in running] == [("1", 1062)]
    assert report.next_trial_s == 32 and report.trials_ended == []
    at(1062, cluster)
    report = bridge.cycle()
    assert report.trials_ended == ["1"]
    assert cluster.calls[-1] == ("requeue_hold", "1")
    # Put back this cycle: in neither the running jobs nor the queue the service saw.
    assert service.dispatches[-1]["running"] == [] and service.dispatches[-1]["queued"] == []
    assert bridge.book.trials == {}
    assert audited(bridge) == ["trial_start", "trial_requeued"]
    assert bridge.metrics.counters["trials_requeued_total"] == 1
    # Next cycle it waits again, held for cpsched, and Slurm counts its restart; Slurm
    # reset its submit time, the bridge sends the first one: it keeps its place.
    assert cluster.state.jobs[0].submit == 1062
    at(1070, cluster)
    bridge.cycle()
    again = service.dispatches[-1]["queued"]
    assert [(q["id"], q["restarts"], q["submit"]) for q in again] == [("1", 1, 100)]


def running_trial(tmp_path: Path, start: int) -> tuple[FakeCluster, ScriptedService, Bridge]:
    """Job 1 started for a 60 s trial on n1 at ``start``; the service decides nothing more."""
    cluster = cluster_of(replace(held("1"), requeue=True))
    service = ScriptedService(answer=lambda body: tried({"1": {"n1": 1}}))
    bridge = make(tmp_path, cluster, service)
    bridge.cycle()
    service.answer = lambda body: decision()
    runs(cluster, "1", start=start)
    return cluster, service, bridge


def test_a_job_that_ends_within_its_trial_has_simply_run(tmp_path: Path) -> None:
    cluster, _, bridge = running_trial(tmp_path, start=1002)
    cluster._set("1", state="completed", end=1020)
    at(1100, cluster)
    report = bridge.cycle()
    assert report.trials_ended == [] and bridge.book.trials == {}
    assert ("requeue_hold", "1") not in cluster.calls


def test_the_bridge_refuses_a_trial_it_could_not_end(tmp_path: Path) -> None:
    cluster = cluster_of(held("1"), replace(held("2"), requeue=True, restarts=1))
    service = ScriptedService(answer=lambda body: tried({"1": {"n1": 1}, "2": {"n2": 1}}))
    bridge = make(tmp_path, cluster, service)
    report = bridge.cycle()
    assert report.applied is not None
    assert "may not be requeued" in report.applied.refused["1"]
    assert "went back to the queue before" in report.applied.refused["2"]
    assert cluster.calls == [] and bridge.book.trials == {}


def test_a_trial_that_cannot_be_ended_runs_on_and_is_said(tmp_path: Path) -> None:
    cluster, service, bridge = running_trial(tmp_path, start=1000)

    def refuse(job_id: str) -> None:
        raise CommandError(["scontrol", "requeuehold", job_id], "exit 1", "Job is not requeueable")

    cluster.requeue_hold = refuse  # type: ignore[method-assign]
    at(1061, cluster)
    report = bridge.cycle()
    assert report.trials_ended == [] and bridge.book.trials == {}
    assert audited(bridge)[-1] == "trial_not_ended"
    # It runs on as an ordinary job: sent without a trial end.
    assert "trial_end" not in service.dispatches[-1]["running"][0]


def test_the_trials_to_end_survive_a_bridge_restart(tmp_path: Path) -> None:
    cluster = cluster_of(replace(held("1"), requeue=True))
    service = ScriptedService(answer=lambda body: tried({"1": {"n1": 1}}))
    make(tmp_path, cluster, service).cycle()
    service.answer = lambda body: decision()
    runs(cluster, "1", start=1000)
    at(1060, cluster)
    report = make(tmp_path, cluster, service).cycle()  # a new process, the same state file
    assert report.trials_ended == ["1"]


def test_shadow_mode_shows_trials_without_making_them(tmp_path: Path) -> None:
    free = replace(held("1"), held_for_us=False, tagged=False, priority=5, requeue=True)
    cluster = cluster_of(free)
    service = ScriptedService(answer=lambda body: {**tried({"1": {"n1": 1}}), "dry_run": True})
    bridge = make(tmp_path, cluster, service, mode="shadow")
    bridge.cycle()
    assert service.dispatches[0]["queued"][0]["requeue"] is True
    assert cluster.calls == [] and bridge.book.trials == {}
    assert '"would_try":{"1":60}' in bridge.settings.shadow_log_path.read_text()
