"""The replay's settings reach the CP dispatchers' search and model configuration."""

from __future__ import annotations

from pathlib import Path

from replay.runner import ReplaySettings, cp_model, cp_search


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
        cp_search_cap=20_000,
    )
    search, model = cp_search(settings), cp_model(settings)
    assert search is not None and model is not None
    assert (search.deadline, search.initial_limit, search.max_limit) == (0.5, 0.05, 0.8)
    assert (search.patience, search.deterministic, search.reuse) == (3, True, True)
    assert search.search_size_cap == 20_000
    assert model.reserve_after == 3600


def test_heuristics_get_no_cp_settings():
    settings = ReplaySettings(trace=Path("t.swf"), out=Path("out"), dispatcher="easy")
    assert cp_search(settings) is None and cp_model(settings) is None
