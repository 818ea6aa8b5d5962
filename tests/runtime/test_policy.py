"""One policy: its names match the registries, its settings reach the dispatchers the
replay and the service build, and a wrong setting is a typed error naming the valid ones."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from cpsched.core.registry import DISPATCHERS, make_dispatcher
from cpsched.core.state import DispatcherState
from cpsched.core.trial_runs import TrialRuns
from cpsched.core.wait_bound import WaitBound
from cpsched.errors import ConfigError
from cpsched.predictor.registry import PREDICTORS
from cpsched.runtime.policy import DispatcherName, Policy, PredictorName
from cpsched.service.cluster import build_dispatchers


def test_the_policy_names_are_the_registries_names():
    assert set(get_args(DispatcherName)) == set(DISPATCHERS)
    assert set(get_args(PredictorName)) == set(PREDICTORS)


def test_cp_settings_become_search_and_model_settings():
    policy = Policy(
        dispatcher="pcp20",
        deadline=0.5,
        cp_work_limit=0.05,
        cp_patience=3,
        cp_deterministic=True,
        cp_reserve_after=3600,
        cp_reuse=True,
        cp_time_unit=60,
        cp_workers=2,
    )
    search, model = policy.search_config(), policy.model_settings()
    assert search is not None and model is not None
    assert (search.deadline, search.initial_limit, search.max_limit) == (0.5, 0.05, 0.8)
    assert (search.patience, search.deterministic, search.reuse) == (3, True, True)
    assert search.num_workers == 2
    assert (model.reserve_after, model.time_unit) == (3600, 60)
    assert (model.reserve_above, model.window) == (10.0, 100)  # the model's own defaults
    off = policy.but(cp_reserve_above=0, cp_window=20).model_settings()
    assert off is not None and (off.reserve_above, off.window) == (None, 20)
    pcp3 = policy.but(dispatcher="pcp3", cp_search_cap=20_000).search_config()
    assert pcp3 is not None and pcp3.search_size_cap == 20_000


def test_cpsat_presolve_effort_leaves_cp_sat_its_defaults():
    search = Policy(dispatcher="hcp3", cp_presolve_effort="cpsat").search_config()
    assert search is not None
    assert search.presolve_iterations is None and search.probing_level is None
    bounded = Policy(dispatcher="hcp3").search_config()
    assert bounded is not None and bounded.presolve_iterations == 1


def test_heuristics_get_no_cp_settings():
    policy = Policy(dispatcher="easy")
    assert policy.search_config() is None and policy.model_settings() is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"dispatcher": "hcp4"}, "'fcfs', 'sjf', 'ljf', 'easy', 'hcp3', 'pcp3' or 'pcp20'"),
        ({"predictor": "magic"}, "'wall-time', 'last-two'"),
        ({"allocator": "worst-fit"}, "choose one of: balanced, best-fit, first-fit"),
        ({"dispatcher": "hcp3", "cp_search_cap": 9}, "cp_search_cap applies to pcp3 only"),
        ({"dispatcher": "hcp3", "cp_node_symmetry": True}, "applies to pcp3 only"),
        ({"dispatcher": "pcp3", "cp_merge_running": False}, "applies to pcp20 only"),
        ({"deadline": 0}, "deadline = 0: Input should be greater than 0"),
        ({"cp_limt": 1.0}, "cp_limt = 1.0: Extra inputs are not permitted"),
    ],
)
def test_a_wrong_setting_is_a_config_error_saying_what_is_valid(
    changes: dict[str, Any], message: str
):
    with pytest.raises(ConfigError, match=r"^policy: ") as caught:
        Policy.parse(changes)
    assert message in str(caught.value)


def test_the_service_builds_the_policys_dispatchers():
    policy = Policy(dispatcher="pcp20", deadline=1.0, cp_limit=0.1, cp_patience=3)
    dispatcher, fallback = build_dispatchers(policy.but(cp_reserve_after=3600))
    cp: Any = dispatcher  # best-fit needs no allocator context: the CP dispatcher itself
    assert cp.name == "pcp20" and fallback.name == "easy"
    assert cp.search.initial_limit == 0.1 and cp.search.patience == 3
    assert cp.search.deadline == 1.0  # as in a replay: the service adds its own margin
    assert cp.model.reserve_after == 3600
    hcp3: Any = build_dispatchers(Policy(dispatcher="hcp3"))[0]
    assert hcp3.model.reserve_after is None  # the wait trigger is off unless set


def test_formulation_options_reach_the_cp_dispatchers():
    pcp20: Any = Policy(dispatcher="pcp20", cp_merge_running=False).make_dispatcher()
    pcp3: Any = Policy(dispatcher="pcp3", cp_node_symmetry=True).make_dispatcher()
    assert pcp20.merge_running is False and pcp3.node_symmetry is True


def test_named_policies_start_from_their_settings_and_take_changes():
    assert Policy.named("default") == Policy()
    today = Policy.named("today")
    assert (today.dispatcher, today.predictor, today.overrun) == ("easy", "wall-time", "one-second")
    easy = Policy.named("easy++", allocator="first-fit")
    assert (easy.predictor, easy.backfill_order, easy.overrun, easy.allocator) == (
        "last-two",
        "shortest",
        "request",
        "first-fit",
    )
    assert Policy.named("oracle").predictor == "oracle"
    with pytest.raises(ConfigError, match="unknown policy 'x': choose one of today, conservative"):
        Policy.named("x")


def test_the_default_keeps_guarantees_in_the_dispatcher_and_the_fallback_alike():
    state = DispatcherState()
    dispatcher, fallback = Policy().make_dispatchers(state=state)
    for wrapped in (dispatcher, fallback):
        bound: Any = wrapped
        assert isinstance(bound, WaitBound)
        assert (bound.after, bound.depth, bound.state) == (21600, 1, state)
        assert bound.overdue_quantile is None
    assert Policy.named("bounded") == Policy()  # its name before it became the default


@pytest.mark.parametrize("name", ["today", "conservative", "easy++", "unbounded"])
def test_todays_easy_easy_plus_plus_and_unbounded_give_no_guarantees(name: str):
    policy = Policy.named(name)
    assert (policy.wait_bound, policy.wait_bound_depth) == (0, 0)
    dispatcher, fallback = policy.make_dispatchers()
    assert not isinstance(dispatcher, WaitBound) and not isinstance(fallback, WaitBound)
    assert Policy.named("unbounded") == Policy(wait_bound=0, wait_bound_depth=0)


def test_the_policys_fallback_is_bounded_by_its_depth():
    fallback: Any = Policy(fallback_depth=7).make_fallback()
    assert fallback.max_jobs == 7  # read through the wrappers
    assert Policy(fallback_depth=0).make_fallback().max_jobs is None  # type: ignore[attr-defined]


def test_the_default_policy_builds_one_fallback_with_every_setting():
    state = DispatcherState()
    dispatcher, fallback = Policy().make_dispatchers(state=state)
    cp: Any = dispatcher
    bounded_easy: Any = fallback
    easy = bounded_easy.inner  # the wait bound wraps both, keeping one set of guarantees
    # One object: what the CP dispatcher answers and fills with is what the service answers.
    assert cp.fallback is easy
    assert (easy.name, easy.max_jobs, easy.shortest_backfilled_first) == ("easy", 500, True)
    assert easy.plan is True  # the service shows what the answer plans
    assert Policy().make_dispatchers(plan=False)[1].plan is False  # type: ignore[attr-defined]
    # One state: the jobs waiting for a steady split are the dispatcher's and the fallback's.
    assert cp.state is state
    assert easy.allocator.inner.waiting is state.split_waits
    assert easy.allocator.inner.wait == Policy().split_wait
    site: Any = Policy(priority="site", split_wait=0).make_fallback()
    assert site.order.__name__ == "by_site_priority" and site.allocator.inner.wait == 0


def test_a_corrected_fallback_wraps_the_same_object_the_cp_dispatcher_holds():
    dispatcher, fallback = Policy(correction="simple").make_dispatchers()
    cp: Any = dispatcher
    corrected: Any = fallback
    # The service's answers get extensions (the wait bound sits between).
    assert corrected.inner.inner is cp.inner.fallback


def test_make_dispatcher_searches_with_the_products_defaults():
    cp: Any = make_dispatcher("hcp3", "best-fit")
    default = Policy().search_config()
    assert default is not None
    assert (cp.search.deadline, cp.search.initial_limit, cp.search.max_limit) == (
        default.deadline,
        default.initial_limit,
        default.max_limit,
    )
    assert cp.search.patience == default.patience
    assert cp.fallback.max_jobs == Policy().fallback_depth


def test_trial_runs_reach_the_replays_and_the_services_dispatchers():
    policy = Policy(trial_run=60)
    dispatcher: Any = policy.make_dispatcher(replay=True)
    assert isinstance(dispatcher, TrialRuns) and dispatcher.seconds == 60
    assert not isinstance(Policy().make_dispatcher(replay=True), TrialRuns)
    served: Any = build_dispatchers(policy)[0]
    assert isinstance(served, TrialRuns) and served.seconds == 60
