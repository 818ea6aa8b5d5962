"""The replay's policy reaches the CP dispatchers' search and model configuration, and
its summary records the CP options."""

from __future__ import annotations

import pytest

from cpsched.errors import TraceError
from cpsched.replay.runner import ReplaySettings, _cp_settings, simulate
from cpsched.runtime.policy import Policy


def test_heuristics_record_no_cp_settings():
    assert _cp_settings(Policy(dispatcher="easy")) is None


def test_the_summary_records_the_cp_options():
    # A replay's search is limited by work alone by default: no deadline applies.
    assert _cp_settings(Policy(dispatcher="pcp3", cp_search_cap=9, cp_work_limit=0.05)) == {
        "deadline_s": None,
        "limited_by": "work",
        "first_limit": 0.05,
        "patience": 1,
        "reserve_after_s": None,
        "reuse": False,
        "search_cap": 9,
    }
    wall = _cp_settings(Policy(dispatcher="hcp3", cp_replay_search="wall"))
    assert wall is not None
    assert (wall["deadline_s"], wall["limited_by"], wall["first_limit"]) == (0.2, "wall time", 0.02)


def test_replays_search_by_work_alone_and_the_service_by_wall_time():
    policy = Policy()
    replay, service = policy.search_config(replay=True), policy.search_config()
    assert replay is not None and service is not None
    assert (replay.deterministic, replay.wall_clock) == (True, False)
    assert replay.initial_limit == policy.cp_work_limit
    assert (service.deterministic, service.wall_clock) == (False, True)
    assert service.initial_limit == policy.cp_limit
    by_work = Policy(cp_deterministic=True).search_config()
    assert by_work is not None
    assert (by_work.deterministic, by_work.wall_clock) == (True, True)  # the deadline holds
    walled = Policy(cp_replay_search="wall").search_config(replay=True)
    assert walled == service


def test_the_summary_records_the_whole_policy(small_trace, tmp_path):
    from cpsched.replay.runner import ReplaySettings, run_replay

    policy = Policy(dispatcher="sjf", allocator="first-fit", correction="simple")
    summary = run_replay(
        ReplaySettings(small_trace, tmp_path / "o", policy=policy, plots=False, timings=False)
    )
    recorded = summary["settings"]["policy"]  # type: ignore[index]
    assert Policy.model_validate(recorded) == policy


def test_skip_jobs_replays_a_slice_of_the_trace(small_trace, tmp_path):
    settings = ReplaySettings(
        small_trace, tmp_path, policy=Policy.named("today"), skip_jobs=10, jobs=20
    )
    result = simulate(settings)
    assert list(result.jobs.job_id) == [str(i) for i in range(11, 31)]
    assert (result.settings["jobs_skipped"], result.settings["jobs_limit"]) == (10, 20)
    # The slice starts on an empty machine: its first job waits for nothing.
    assert result.jobs.start[0] == result.jobs.submit[0]


def test_skipping_every_job_says_how_many_there_were(small_trace, tmp_path):
    with pytest.raises(TraceError, match="40 kept, all within the 40 skipped"):
        simulate(ReplaySettings(small_trace, tmp_path, skip_jobs=40))


def test_a_predictor_built_from_the_run_times_replaces_the_policys(small_trace, tmp_path):
    """``make_predictor`` gets every replayed job's real run time and predicts in place
    of the policy's predictor: with the oracle built there, the default policy replays as
    the ``oracle`` policy does, and the summary names the predictor used."""
    from cpsched.predictor.registry import make_predictor

    given: dict[str, int] = {}

    def oracle(run_times):
        given.update(run_times)
        return make_predictor("oracle", run_times=run_times)

    default = ReplaySettings(small_trace, tmp_path / "d", policy=Policy.named("easy++"))
    built = simulate(default, make_predictor=oracle)
    named = simulate(
        ReplaySettings(
            small_trace, tmp_path / "o", policy=Policy.named("easy++", predictor="oracle")
        )
    )
    plain = simulate(default)
    assert len(given) == 40
    assert list(built.jobs.start) == list(named.jobs.start)
    assert list(built.jobs.start) != list(plain.jobs.start)
    assert (built.settings["predictor"], plain.settings["predictor"]) == ("oracle", "last-two")
