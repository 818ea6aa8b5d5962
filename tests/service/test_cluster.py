"""A cluster's policy reaches the dispatchers the service builds for it."""

from __future__ import annotations

from typing import Any

from cpsched.service.cluster import build_dispatchers
from cpsched.service.settings import ClusterPolicy


def test_cp_settings_reach_the_cp_dispatcher():
    policy = ClusterPolicy(
        dispatcher="pcp20", deadline_s=1.0, cp_limit_s=0.1, cp_patience=3, cp_reserve_after_s=3600
    )
    dispatcher, fallback = build_dispatchers(policy)
    cp: Any = dispatcher  # best-fit needs no allocator context: the CP dispatcher itself
    assert cp.name == "pcp20" and fallback.name == "easy"
    assert cp.search.initial_limit == 0.1 and cp.search.patience == 3
    assert cp.search.deadline == 0.8  # inside the request's deadline
    assert cp.model.reserve_after == 3600


def test_the_wait_trigger_is_off_unless_set():
    dispatcher, _ = build_dispatchers(ClusterPolicy(dispatcher="hcp3"))
    assert dispatcher.model.reserve_after is None  # type: ignore[attr-defined]
