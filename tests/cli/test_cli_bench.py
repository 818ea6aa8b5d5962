"""``cpsched replay --dump-instances`` and ``cpsched bench-instances`` as a user runs them."""

from __future__ import annotations

import json

import pytest

from cpsched.errors import ConfigError
from tests.cli.test_cli import cpsched


def test_a_dumped_replay_is_re_solved_by_bench_instances(small_trace, tmp_path):
    dumps = tmp_path / "instances"
    done = cpsched(
        "replay", small_trace, "--out", tmp_path / "out", "--no-plots", "--dump-instances", dumps
    )
    assert done.returncode == 0, done.stderr
    files = list(dumps.glob("*.instances.jsonl.gz"))
    assert len(files) == 1
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    done = cpsched(
        "bench-instances", dumps, "--dispatcher", "easy,hcp3", "--deadline", "5", "--json"
    )
    assert done.returncode == 0, done.stderr
    bench = json.loads(done.stdout)
    # One instance per dispatch call of the replay, each re-solved by both dispatchers.
    calls = summary["dispatch_calls"]
    assert bench["dispatchers"]["easy"]["calls"] == bench["dispatchers"]["hcp3"]["calls"] == calls
    hcp3 = bench["dispatchers"]["hcp3"]
    assert hcp3["latency_ms"]["max"] >= hcp3["latency_ms"]["p50"] > 0
    assert sum(hcp3["statuses"].values()) == calls
    assert hcp3["model"]["calls_with_model"] > 0
    text = cpsched("bench-instances", dumps, "--dispatcher", "hcp3", "--limit", "3")
    assert text.returncode == 0, text.stderr
    assert "hcp3: 3 calls" in text.stdout and "latency ms: p50" in text.stdout


def test_an_unknown_variant_is_refused_with_the_valid_ones(small_trace, tmp_path):
    dumps = tmp_path / "instances"
    cpsched("replay", small_trace, "--out", tmp_path / "o", "--no-plots", "--dump-instances", dumps)
    done = cpsched("bench-instances", dumps, "--dispatcher", "pcp20@warp=9")
    assert done.returncode == 2
    assert "unit=<seconds>, presolve=cpsat|bounded" in done.stderr


def test_variants_set_the_search_and_model_options():
    from cpsched.cli.bench import variant
    from cpsched.core.cp import ModelConfig, SearchConfig

    dispatcher = variant("pcp20@workers=2@unit=60", "best-fit", SearchConfig(), ModelConfig())
    assert dispatcher.search.num_workers == 2  # type: ignore[attr-defined]
    assert dispatcher.model.time_unit == 60  # type: ignore[attr-defined]
    pcp3 = variant("pcp3@nodesym=on@searchcap=500", "best-fit", SearchConfig(), ModelConfig())
    assert pcp3.node_symmetry is True  # type: ignore[attr-defined]
    assert pcp3.search.search_size_cap == 500  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="unknown variant"):
        variant("pcp20@searchcap=500", "best-fit", SearchConfig(), ModelConfig())
    hcp3 = variant("hcp3@reuse=on", "best-fit", SearchConfig(), ModelConfig())
    assert hcp3.search.reuse is True  # type: ignore[attr-defined]
