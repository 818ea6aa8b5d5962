"""End to end: a replay driving a real ``cpsched serve`` process over HTTP gives the same
results as the same replay in process (deterministic policies)."""

from __future__ import annotations

import json

import pytest

from cpsched.cli.local_service import local_service
from cpsched.replay.runner import ReplaySettings, run_replay
from cpsched.runtime.policy import Policy

KTH = "KTH-SP2-1996-2.1-cln.swf.gz"


def summary_without_settings(path):
    summary = json.loads((path / "summary.json").read_text())
    summary.pop("settings")
    return summary


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
    over_http, in_process = both_ways(tmp_path, traces_dir / KTH, Policy(**policy), replay_options)
    assert over_http == in_process
    assert over_http["jobs"] > 300


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
    # A generous deadline: a loaded machine must not turn a slow call into a fallback.
    policy = Policy(dispatcher="easy", allocator="best-fit", predictor="last-two", deadline=5)
    over_http, in_process = both_ways(
        tmp_path, traces_dir / "CTC-SP2-1996-3.1-cln.swf.gz", policy, {}, system=system
    )
    assert over_http == in_process
    assert over_http["jobs"] > 300


def both_ways(tmp_path, trace, policy, replay_options, system=None):
    """The summaries of one replay over HTTP and in process (settings left out)."""
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
    with local_service(tmp_path / "service", **chosen.model_dump(exclude_none=True)) as service:
        remote = ReplaySettings(
            out=tmp_path / "remote",
            service=service.url,
            token="local-token",
            cluster="c",
            **common,
        )
        run_replay(remote)
    return (
        summary_without_settings(tmp_path / "remote"),
        summary_without_settings(tmp_path / "local"),
    )
