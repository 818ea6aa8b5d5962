"""End to end: a replay driving a real ``cpsched serve`` process over HTTP decides the same
as the same replay in process (deterministic policies). What the wall clock decides (a
call past its deadline on a busy machine, answered by the fallback) is not compared:
:mod:`cpsched.replay.agreement`, which ``cpsched http-check`` uses too."""

from __future__ import annotations

import json

import httpx
import pytest

from cpsched.cli.local_service import local_service
from cpsched.replay.agreement import compare_replays
from cpsched.replay.runner import ReplaySettings, run_replay
from cpsched.runtime.policy import Policy

KTH = "KTH-SP2-1996-2.1-cln.swf.gz"


@pytest.mark.parametrize(
    ("policy", "replay_options"),
    [
        ({"dispatcher": "easy", "allocator": "first-fit", "predictor": "last-two"}, {}),
        (
            {
                "dispatcher": "sjf",
                "allocator": "best-fit",
                "predictor": "profile",
                "correction": "simple",
                "correction_step": 1800,
            },
            # The simulated cluster must wake the service before a kill, as a bridge does.
            {"limits": "predicted", "correction": "simple", "correction_step": 1800},
        ),
    ],
    ids=["easy-last-two", "sjf-profile-predicted-limits-corrected"],
)
def test_same_results_over_http_as_in_process(tmp_path, traces_dir, policy, replay_options):
    agreement = both_ways(tmp_path, traces_dir / KTH, Policy(**policy), replay_options)
    assert agreement.identical, (agreement.differing, agreement.counters_note())
    assert jobs_replayed(tmp_path / "remote") > 300


def test_trial_runs_give_the_same_results_over_http(tmp_path, traces_dir):
    """The service tries the same jobs as the replay in process, keeps a tried job's
    queued prediction for when it comes back, and never tries it twice."""
    policy = Policy(dispatcher="easy", allocator="first-fit", predictor="last-two", trial_run=60)
    agreement = both_ways(tmp_path, traces_dir / KTH, policy, {})
    assert agreement.identical, (agreement.differing, agreement.counters_note())
    trials = json.loads((tmp_path / "remote" / "summary.json").read_text())["trial_runs"]
    assert trials["ended"] > 0 and trials["requeued"] > 0


CTC_SITE = """
name = "CTC with a partition for queues 2-4 and a maintenance window in the first day"
[[nodes]]
group = "a"
count = 210
cpu = 1
[[nodes]]
group = "b"
count = 128
cpu = 1
[[partitions]]
name = "batch"
groups = ["a", "b"]
default = true
[[partitions]]
name = "other"
groups = ["b"]
queues = ["2", "3", "4"]
[[reservations]]
name = "maintenance"
groups = ["a"]
start = 20000
end = 40000
"""


def test_site_rules_give_the_same_results_over_http(tmp_path, traces_dir):
    system = tmp_path / "ctc-site.toml"
    system.write_text(CTC_SITE)
    policy = Policy(dispatcher="easy", allocator="best-fit", predictor="last-two")
    agreement = both_ways(
        tmp_path, traces_dir / "CTC-SP2-1996-3.1-cln.swf.gz", policy, {}, system=system
    )
    assert agreement.identical, (agreement.differing, agreement.counters_note())
    assert jobs_replayed(tmp_path / "remote") > 300


def jobs_replayed(out):
    return json.loads((out / "summary.json").read_text())["jobs"]


def both_ways(tmp_path, trace, policy, replay_options, system=None):
    """How one replay in process and the same over HTTP compare."""
    chosen = Policy(**{**policy.model_dump(exclude_none=True), **replay_options})
    common = {
        "trace": trace,
        "jobs": 400,
        "plots": False,
        "timings": False,
        "policy": chosen,
        "system": system,
        "validate": True,
    }
    run_replay(ReplaySettings(out=tmp_path / "local", **common))
    # A generous deadline: on a loaded machine a slow call must not be answered by the
    # service's fallback (EASY, best-fit), whose decision may not be the policy's. (Where
    # it is the same, only the wall-clock counters differ, which are not compared.)
    served = {**chosen.model_dump(exclude_none=True), "deadline": 5}
    with local_service(tmp_path / "service", **served) as service:
        remote = ReplaySettings(
            out=tmp_path / "remote",
            service=service.url,
            token="local-token",
            cluster="c",
            **common,
        )
        run_replay(remote)
        # The replay's cluster was retired at its end: nothing of it is left at the service.
        headers = {"Authorization": "Bearer local-token"}
        gone = httpx.get(f"{service.url}/v1/clusters/c/decisions", headers=headers).json()
        assert gone["entries"] == []
    return compare_replays(tmp_path / "local", tmp_path / "remote")
