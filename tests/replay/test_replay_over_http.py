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
    trace = traces_dir / KTH
    chosen = Policy(**{**policy, **replay_options})
    common = {"trace": trace, "jobs": 400, "plots": False, "timings": False, "policy": chosen}
    local = ReplaySettings(out=tmp_path / "local", **common)
    run_replay(local)
    with local_service(tmp_path / "service", **chosen.model_dump(exclude_none=True)) as service:
        remote = ReplaySettings(
            out=tmp_path / "remote",
            service=service.url,
            token="local-token",
            cluster="kth",
            **common,
        )
        run_replay(remote)
    over_http = summary_without_settings(tmp_path / "remote")
    in_process = summary_without_settings(tmp_path / "local")
    assert over_http == in_process
    assert over_http["jobs"] > 300
