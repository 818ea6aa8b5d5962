"""The bridge loop with a fake cluster and a scripted service: modes, fallback, delivery."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.slurm_bridge.config import BridgeSettings
from cpsched.slurm_bridge.errors import CommandError
from cpsched.slurm_bridge.loop import Bridge
from cpsched.slurm_bridge.model import ClusterState, JobShape, JobView
from cpsched.wire.client import ServiceClient
from cpsched.wire.errors import ServiceRejected
from tests.slurm_bridge.fakes import (
    FakeCluster,
    ScriptedService,
    decision,
    held,
    node,
    running,
)


def make(
    tmp_path: Path, cluster: FakeCluster, service: ScriptedService, **settings: object
) -> Bridge:
    conf = BridgeSettings(
        cluster="test",
        state_file=tmp_path / "state.json",
        metrics_file=tmp_path / "m.prom",
        **{"pin_grace_s": 0, "finished_read_s": 0, **settings},
    )
    client = ServiceClient(
        "http://svc", "tok", "test", timeout_s=1, transport=httpx.MockTransport(service)
    )
    return Bridge(conf, cluster, client, clock=lambda: 5000.0)


def state(*jobs: object) -> ClusterState:
    return ClusterState(time=1000, nodes={"n1": node("n1"), "n2": node("n2")}, jobs=list(jobs))  # type: ignore[arg-type]


def test_active_cycle_posts_held_jobs_and_applies_starts(tmp_path: Path) -> None:
    cluster = FakeCluster(state(held("1"), held("2")))
    service = ScriptedService(answer=lambda body: decision(starts={"1": {"n2": 1}}))
    report = make(tmp_path, cluster, service).cycle()
    assert [q["id"] for q in service.dispatches[0]["queued"]] == ["1", "2"]
    assert service.dispatches[0]["dry_run"] is False
    assert report.applied is not None and report.applied.started == {"1": {"n2": 1}}
    assert cluster.calls == [("start", "1", "n2")]


def test_pinned_job_that_did_not_start_is_held_and_unpinned(tmp_path: Path) -> None:
    cluster = FakeCluster(state(held("1")))
    service = ScriptedService(answer=lambda body: decision(starts={"1": {"n1": 1}}))
    bridge = make(tmp_path, cluster, service)
    bridge.cycle()
    service.answer = lambda body: decision()
    report = bridge.cycle()  # still pending, not running: node turned busy
    assert report.rehold == ["1"]
    assert cluster.calls[-1] == ("hold", "1", "True")


def test_shadow_mode_posts_dry_runs_and_applies_nothing(tmp_path: Path) -> None:
    free = replace(held("1"), held_for_us=False, tagged=False, priority=5)
    cluster = FakeCluster(state(free))
    service = ScriptedService(answer=lambda body: decision(starts={"1": {"n1": 1}}, dry_run=True))
    bridge = make(tmp_path, cluster, service, mode="shadow")
    report = bridge.cycle()
    assert service.dispatches[0]["dry_run"] is True
    assert [q["id"] for q in service.dispatches[0]["queued"]] == ["1"]
    assert cluster.calls == [] and report.applied is None
    assert '"would_start":{"1":["n1"]}' in bridge.settings.shadow_log_path.read_text()


def test_fallback_hold_does_nothing(tmp_path: Path) -> None:
    cluster = FakeCluster(state(held("1")))
    bridge = make(tmp_path, cluster, ScriptedService(down=True), fallback="hold")
    report = bridge.cycle()
    assert report.fallback == "hold" and cluster.calls == []
    assert "cpsched_bridge_fallback_active 1" in (tmp_path / "m.prom").read_text()


def test_fallback_release_then_service_returns(tmp_path: Path) -> None:
    cluster = FakeCluster(state(held("1"), held("2")))
    service = ScriptedService(down=True)
    bridge = make(tmp_path, cluster, service, fallback="release")
    assert bridge.cycle().fallback == "release:2"
    assert cluster.calls == [("release", "1"), ("release", "2")]
    # job 1 was started by Slurm meanwhile; job 2 still waits
    cluster.state = replace(
        cluster.state,
        jobs=[
            replace(j, state="running", start=990, allocation={"n1": 1}) if j.id == "1" else j
            for j in cluster.state.jobs
        ],
    )
    service.down = False
    report = bridge.cycle()
    assert report.reclaimed == ["2"]
    assert cluster.calls[-1] == ("hold", "2", "False")
    assert not bridge.book.fallback_active and not bridge.book.fallback_released
    metrics = (tmp_path / "m.prom").read_text()
    assert "cpsched_bridge_fallback_released_total 2" in metrics
    assert "cpsched_bridge_fallback_active 0" in metrics


def test_fallback_release_waits_for_fallback_after(tmp_path: Path) -> None:
    cluster = FakeCluster(state(held("1")))
    bridge = make(
        tmp_path, cluster, ScriptedService(down=True), fallback="release", fallback_after_s=60
    )
    assert bridge.cycle().fallback == "hold"  # clock does not move: not yet
    assert cluster.calls == []


def test_finished_jobs_are_delivered_once_even_across_restarts(tmp_path: Path) -> None:
    done = replace(held("9"), state="completed", held_for_us=False, start=900, end=960)
    cluster = FakeCluster(state())
    cluster.ended = [done]
    service = ScriptedService()
    assert make(tmp_path, cluster, service).cycle().finished_posted == 1
    again = make(tmp_path, cluster, service).cycle()  # a new process, same state file
    assert again.finished_posted == 0 and again.finished_duplicates == 0
    assert [j["id"] for j in service.posted_finished] == ["9"]
    assert service.posted_finished[0]["end"] - service.posted_finished[0]["start"] == 60


def test_undelivered_finished_jobs_are_retried(tmp_path: Path) -> None:
    cluster = FakeCluster(state())
    cluster.ended = [replace(held("9"), state="failed", start=900, end=910)]
    service = ScriptedService(down=True)
    bridge = make(tmp_path, cluster, service)
    assert bridge.cycle().finished_posted == 0
    service.down = False
    assert bridge.cycle().finished_posted == 1


def test_rejection_is_a_typed_error_naming_the_token() -> None:
    client = ServiceClient(
        "http://svc",
        "bad",
        "test",
        timeout_s=1,
        transport=httpx.MockTransport(
            lambda r: httpx.Response(401, json={"error": "unauthorized", "detail": "bad token"})
        ),
    )
    with pytest.raises(ServiceRejected, match="token"):
        client.dispatch(
            __import__("cpsched.wire.schemas", fromlist=["DispatchRequest"]).DispatchRequest(
                time=1, nodes=[]
            )
        )


def test_run_loop_backs_off_and_never_exits_on_errors(tmp_path: Path) -> None:
    class Broken(FakeCluster):
        def read_state(self) -> ClusterState:
            raise CommandError(["squeue"], "exit status 1", "slurmctld down")

    bridge = make(tmp_path, Broken(state()), ScriptedService(), poll_interval_s=1, backoff_max_s=8)
    sleeps: list[float] = []
    bridge.run(stop=lambda: len(sleeps) >= 5, sleep=sleeps.append)
    assert sleeps == [2, 4, 8, 8, 8]
    assert bridge.metrics.counters["cycle_errors_total"] == 5


def test_ended_records_a_job_name_may_have_forged_are_not_posted(tmp_path: Path) -> None:
    """The jobcomp file takes job names as they are, so a name can add records: the
    bridge posts only ends that the jobs it saw make believable, and a record it does not
    believe keeps no job's true end out."""
    queued = held("3")
    cluster = FakeCluster(state(queued), finished_forgeable=True)
    history = replace(held("8"), state="completed", start=4000, end=4100)
    cluster.ended = [history]
    service = ScriptedService(down=True)
    bridge = make(tmp_path, cluster, service)
    bridge.cycle()  # sees job 3 queued; the file's jobs before it are its history
    service.down = False
    ended = replace(queued, state="completed", held_for_us=False)
    forged = replace(held("7"), state="completed", start=1, end=2)  # never seen
    cluster.ended = [history, replace(ended, start=5000, end=5100), forged]
    report = bridge.cycle()  # job 3 is still queued: its record cannot be true yet
    assert [j["id"] for j in service.posted_finished] == ["8"]
    assert list(report.finished_disbelieved) == ["7"] and report.finished_refused == {}
    # job 7 is real after all: submitted, run, ended; its own record now counts
    cluster.state = state(queued, replace(held("7"), state="running", start=5000))
    bridge.cycle()
    cluster.state = state(queued)
    cluster.ended = [forged, replace(forged, start=5000, end=5060)]
    bridge.cycle()
    assert service.posted_finished[-1]["id"] == "7"
    assert (service.posted_finished[-1]["start"], service.posted_finished[-1]["end"]) == (
        5000,
        5060,
    )
    # job 3 ran twice (requeued): the run the bridge saw start is the one posted
    cluster.state = state(replace(queued, state="running", start=5200, held_for_us=False))
    bridge.cycle()
    cluster.state = state()
    cluster.ended = [replace(ended, start=5000, end=5100), replace(ended, start=5200, end=5300)]
    bridge.cycle()
    assert service.posted_finished[-1]["id"] == "3"
    assert service.posted_finished[-1]["end"] == 5300
    # records that disagree where the bridge saw no start: neither is posted, both stay
    cluster.ended = [
        replace(held("9"), state="completed", start=4000, end=4050),
        replace(held("9"), state="completed", start=4000, end=4090),
    ]
    bridge.history = frozenset({"8", "9"})
    report = bridge.cycle()
    assert "disagree" in report.finished_disbelieved["9"]
    assert [j["id"] for j in service.posted_finished] == ["8", "7", "3"]


def test_ended_jobs_in_squeue_win_over_their_records(tmp_path: Path) -> None:
    gone = replace(held("4"), state="completed", start=5000, end=5050, held_for_us=False)
    cluster = FakeCluster(state(gone), finished_forgeable=True)
    cluster.ended = [replace(gone, end=5999), replace(gone, start=5001, end=5060)]
    service = ScriptedService()
    make(tmp_path, cluster, service).cycle()
    assert [(j["id"], j["end"]) for j in service.posted_finished] == [("4", 5050)]


def test_ended_jobs_the_bridge_never_saw_are_posted_from_a_trusted_source(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster(state())  # slurmdbd's sacct or PBS's qstat -x: not forgeable
    cluster.ended = [replace(held("7"), state="completed", start=5000, end=5010)]
    service = ScriptedService()
    make(tmp_path, cluster, service).cycle()
    assert [j["id"] for j in service.posted_finished] == ["7"]


def test_without_a_first_read_no_later_record_passes_for_history(tmp_path: Path) -> None:
    """The jobcomp file could not be read at start: records that turn up later for jobs
    the bridge never saw are not taken for history, and each is said once."""
    cluster = FakeCluster(state(), finished_forgeable=True)
    cluster.finished_error = CommandError(["sacct", "-c"], "exit status -11")
    service = ScriptedService()
    bridge = make(tmp_path, cluster, service, audit_log=tmp_path / "audit.jsonl")
    assert "finished jobs unreadable" in bridge.cycle().notes[-1]
    cluster.finished_error = None
    cluster.ended = [replace(held("7"), state="completed", start=1, end=90000)]
    for _ in range(3):
        assert list(bridge.cycle().finished_disbelieved) == ["7"]
    assert service.posted_finished == []
    assert bridge.metrics.counters["finished_disbelieved_total"] == 1
    audit = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert sum('"finished_disbelieved"' in line for line in audit) == 1


def test_no_run_is_posted_for_a_job_the_bridge_saw_end_without_starting(
    tmp_path: Path,
) -> None:
    cancelled = replace(held("5"), state="cancelled", held_for_us=False)  # while pending
    cluster = FakeCluster(state(cancelled), finished_forgeable=True)
    service = ScriptedService()
    bridge = make(tmp_path, cluster, service)
    bridge.cycle()
    cluster.state = state()  # gone from squeue -t all; a record then claims a run
    cluster.ended = [replace(cancelled, state="completed", start=1, end=90000)]
    bridge.cycle()
    assert service.posted_finished == []


def test_the_record_of_ended_jobs_is_read_once_a_minute_and_squeue_every_cycle(
    tmp_path: Path,
) -> None:
    """sacct over two days takes seconds at a busy site: between its reads, the ended
    jobs squeue -t all lists are posted at once."""
    reads = 0
    cluster = FakeCluster(state())

    def finished_jobs(_: ClusterState) -> list:
        nonlocal reads
        reads += 1
        return list(cluster.ended)

    cluster.finished_jobs = finished_jobs  # type: ignore[method-assign]
    service = ScriptedService()
    bridge = make(tmp_path, cluster, service, finished_read_s=60)
    bridge.cycle()
    done = replace(held("3"), state="completed", start=900, end=990, held_for_us=False)
    cluster.state = replace(state(done), time=1030)
    cluster.ended = [replace(held("4"), state="completed", start=110, end=120)]
    bridge.cycle()
    assert reads == 1 and [j["id"] for j in service.posted_finished] == ["3"]
    cluster.state = replace(state(), time=1060)
    bridge.cycle()
    assert reads == 2 and [j["id"] for j in service.posted_finished] == ["3", "4"]


def _start_all_queued(body: dict) -> dict:
    """A service that starts every queued job it is sent on n2: its starts depend only on
    what the snapshot carried."""
    return decision(starts={q["id"]: {"n2": 1} for q in body["queued"]})


def _misshapen(job_id: str) -> JobView:
    """A running job whose allocation does not add up to its units (as a 24.11 job Slurm
    rewrote after its release was read): the wire cannot carry it."""
    return replace(
        running(job_id, {"n1": 2}), shape=JobShape(units=9, per_unit={"cpu": 1}, single_node=False)
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(queued=st.integers(min_value=1, max_value=6), at=st.integers(min_value=0, max_value=6))
def test_one_job_the_snapshot_cannot_carry_changes_no_other_jobs_start(
    tmp_path: Path, queued: int, at: int
) -> None:
    jobs: list[JobView] = [held(str(i)) for i in range(queued)]
    without = FakeCluster(state(*jobs))
    with_bad = FakeCluster(state(*jobs[:at], _misshapen("bad"), *jobs[at:]))
    folder = tmp_path / f"{queued}-{at}"
    plain = make(folder / "plain", without, ScriptedService(answer=_start_all_queued)).cycle()
    bridge = make(folder / "bad", with_bad, ScriptedService(answer=_start_all_queued))
    report = bridge.cycle()
    assert plain.applied is not None and report.applied is not None
    assert report.applied.started == plain.applied.started
    assert set(report.left_out) == {"bad"} and "allocation" in report.left_out["bad"]
    assert bridge.metrics.gauges["jobs_left_out"] == 1


def test_a_job_left_out_is_said_once_and_audited(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = FakeCluster(state(held("1"), _misshapen("bad")))
    bridge = make(tmp_path, cluster, ScriptedService(answer=_start_all_queued))
    with caplog.at_level("WARNING", logger="slurm_bridge.loop"):
        bridge.cycle()
        bridge.cycle()
    said = [r for r in caplog.records if r.getMessage() == "jobs left out of the decision"]
    assert len(said) == 1
    audit = [json.loads(line) for line in bridge.settings.audit_log_path.read_text().splitlines()]
    assert [a["job"] for a in audit if a["event"] == "left_out"] == ["bad"]
    assert bridge.metrics.counters["jobs_left_out_total"] == 1


def test_jobs_the_service_refuses_are_reported_and_the_others_started(tmp_path: Path) -> None:
    def refuse_one(body: dict) -> dict:
        answer = decision(starts={"1": {"n2": 1}})
        answer["rejected"] = [{"job_id": "2", "reason": "asks for resource type 'x'"}]
        return answer

    cluster = FakeCluster(state(held("1"), held("2")))
    report = make(tmp_path, cluster, ScriptedService(answer=refuse_one)).cycle()
    assert report.applied is not None and report.applied.started == {"1": {"n2": 1}}
    assert report.left_out == {"2": "refused by the service: asks for resource type 'x'"}
    # Handed to the workload manager's own scheduler, once: it is not cpsched's any more.
    assert report.handed_over == ["2"] and ("release", "2") in cluster.calls


def test_a_refused_job_stays_held_when_the_site_says_so(tmp_path: Path) -> None:
    def refuse(body: dict) -> dict:
        answer = decision()
        answer["rejected"] = [{"job_id": "2", "reason": "asks for resource type 'x'"}]
        return answer

    cluster = FakeCluster(state(held("2")))
    bridge = make(tmp_path, cluster, ScriptedService(answer=refuse), refused="hold")
    report = bridge.cycle()
    assert report.handed_over == [] and not any(c[0] == "release" for c in cluster.calls)


def test_a_standby_bridge_changes_nothing_until_the_active_one_stops(tmp_path: Path) -> None:
    service = ScriptedService(answer=lambda body: decision(starts={"1": {"n2": 1}}))
    service.locked_by = "other-host:1234abcd"
    cluster = FakeCluster(state(held("1")))
    # The release fallback at once: a standby must still not hand jobs to the manager.
    bridge = make(tmp_path, cluster, service, fallback="release", fallback_after_s=0)
    for _ in range(3):
        report = bridge.cycle()
        assert report.standby and report.fallback is None and report.applied is None
    assert not [c for c in cluster.calls if c[0] in {"release", "start", "hold"}]
    assert bridge.metrics.gauges["standby"] == 1.0
    audit = [json.loads(line) for line in bridge.settings.audit_log_path.read_text().splitlines()]
    assert [a["event"] for a in audit if a["event"] == "standby"] == ["standby"]  # said once
    # The active bridge stopped: its lease expired, this one dispatches now.
    service.locked_by = None
    report = bridge.cycle()
    assert not report.standby and report.applied is not None
    assert report.applied.started == {"1": {"n2": 1}}
    assert bridge.metrics.gauges["standby"] == 0.0
    # It names itself the same way on every call, and after a restart (the state file).
    assert len(set(service.writers)) == 1 and service.writers[0] == bridge.book.writer_id
    restarted = make(tmp_path, FakeCluster(state()), service)
    assert restarted.book.writer_id == bridge.book.writer_id
