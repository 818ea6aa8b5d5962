"""The replay's settings reach the CP dispatchers' search and model configuration."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cpsched.errors import ConfigError
from cpsched.replay.runner import ReplaySettings, _cp_settings, cp_model, cp_search


def test_cp_options_become_search_and_model_settings():
    settings = ReplaySettings(
        trace=Path("t.swf"),
        out=Path("out"),
        dispatcher="pcp20",
        cp_deadline=0.5,
        cp_limit=0.05,
        cp_patience=3,
        cp_deterministic=True,
        cp_reserve_after=3600,
        cp_reuse=True,
    )
    search, model = cp_search(settings), cp_model(settings)
    assert search is not None and model is not None
    assert (search.deadline, search.initial_limit, search.max_limit) == (0.5, 0.05, 0.8)
    assert (search.patience, search.deterministic, search.reuse) == (3, True, True)
    assert model.reserve_after == 3600
    pcp3 = cp_search(replace(settings, dispatcher="pcp3", cp_search_cap=20_000))
    assert pcp3 is not None and pcp3.search_size_cap == 20_000


def test_the_search_cap_is_refused_for_other_dispatchers():
    settings = ReplaySettings(trace=Path("t"), out=Path("o"), dispatcher="hcp3", cp_search_cap=9)
    with pytest.raises(ConfigError, match="pcp3 only"):
        cp_search(settings)


def test_heuristics_get_no_cp_settings():
    settings = ReplaySettings(trace=Path("t.swf"), out=Path("out"), dispatcher="easy")
    assert cp_search(settings) is None and cp_model(settings) is None
    assert _cp_settings(settings) is None


def test_the_summary_records_the_cp_options():
    settings = ReplaySettings(trace=Path("t"), out=Path("o"), dispatcher="pcp3", cp_search_cap=9)
    assert _cp_settings(settings) == {
        "deadline_s": 2.0,
        "limit_s": 1.0,
        "patience": 2,
        "deterministic": False,
        "reserve_after_s": None,
        "reuse": False,
        "search_cap": 9,
    }
