"""``cpsched replay --dump-instances`` and ``cpsched bench-instances`` as a user runs them."""

from __future__ import annotations

import json

import pytest

from cpsched.errors import ConfigError
from cpsched.runtime.policy import Policy
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
    assert "'warp=9' is not field=value of a policy field" in done.stderr
    assert "cp_time_unit" in done.stderr and "short forms: unit, presolve" in done.stderr


def test_variants_are_policies_over_the_options():
    from cpsched.cli.bench import variant

    base = Policy(deadline=0.5)
    pcp20 = variant("pcp20@workers=2@unit=60", base)
    assert (pcp20.dispatcher, pcp20.cp_workers, pcp20.cp_time_unit) == ("pcp20", 2, 60)
    assert pcp20.deadline == 0.5  # the other options stay
    pcp3 = variant("pcp3@nodesym=on@cp_search_cap=500", base)
    assert pcp3.cp_node_symmetry is True and pcp3.cp_search_cap == 500
    with pytest.raises(ConfigError, match="cp_search_cap applies to pcp3 only"):
        variant("pcp20@searchcap=500", base)
    assert variant("hcp3@reuse=on", base).cp_reuse is True
    assert variant("easy", base).dispatcher == "easy"
