"""The replay's policy reaches the CP dispatchers' search and model configuration, and
its summary records the CP options."""

from __future__ import annotations

from cpsched.replay.runner import _cp_settings
from cpsched.runtime.policy import Policy


def test_heuristics_record_no_cp_settings():
    assert _cp_settings(Policy(dispatcher="easy")) is None


def test_the_summary_records_the_cp_options():
    assert _cp_settings(Policy(dispatcher="pcp3", cp_search_cap=9)) == {
        "deadline_s": 0.2,
        "limit_s": 0.02,
        "patience": 1,
        "deterministic": False,
        "reserve_after_s": None,
        "reuse": False,
        "search_cap": 9,
    }


def test_the_summary_records_the_whole_policy(small_trace, tmp_path):
    from cpsched.replay.runner import ReplaySettings, run_replay

    policy = Policy(dispatcher="sjf", allocator="first-fit", correction="simple")
    summary = run_replay(
        ReplaySettings(small_trace, tmp_path / "o", policy=policy, plots=False, timings=False)
    )
    recorded = summary["settings"]["policy"]  # type: ignore[index]
    assert Policy.model_validate(recorded) == policy
