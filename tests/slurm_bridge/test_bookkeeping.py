"""Settings, the state file, the shadow report and the install kit."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from cpsched.slurm_bridge import shadow
from cpsched.slurm_bridge import state_file as bookkeeping
from cpsched.slurm_bridge.config import BridgeSettings, load_settings
from cpsched.slurm_bridge.errors import BridgeConfigError, StateFileError

KIT = Path(__file__).resolve().parents[2] / "slurm_bridge" / "kit"


def test_settings_from_toml_overridden_by_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text(
        'cluster = "c1"\nmode = "shadow"\npartitions = ["batch"]\n'
        'service_url = "http://svc:8480/"\n'
    )
    monkeypatch.setenv("CPSCHED_BRIDGE_FALLBACK", "release")
    monkeypatch.setenv("CPSCHED_BRIDGE_MODE", "active")
    settings = load_settings(path)
    assert (settings.cluster, settings.mode, settings.fallback) == ("c1", "active", "release")
    assert settings.service_url == "http://svc:8480" and settings.partitions == ["batch"]


def test_bad_settings_are_a_typed_error_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text('cluster = "c1"\nmode = "yolo"\n')
    with pytest.raises(BridgeConfigError, match="mode"):
        load_settings(path)
    with pytest.raises(BridgeConfigError, match="not found"):
        load_settings(tmp_path / "missing.toml")


def test_kit_example_config_is_valid() -> None:
    settings = BridgeSettings(**tomllib.loads((KIT / "bridge.toml").read_text()))
    assert settings.hold_tag == "extsched"


def test_kit_lua_tag_matches_the_default_setting() -> None:
    lua = (KIT / "job_submit.lua").read_text()
    tag = re.search(r'local TAG = "([^"]+)"', lua)
    assert tag and tag.group(1) == BridgeSettings.model_fields["hold_tag"].default
    assert "job_desc.priority = 0" in lua and "slurm_job_modify" in lua


def test_state_file_round_trip_and_atomic_replace(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "state.json"
    book = bookkeeping.BridgeState(delivered={"1": 100}, extensions={"2": 1})
    book.pinned["3"] = bookkeeping.Pin(at=5.0, allocation={"n1": 2}, per_unit={"cpu": 1})
    bookkeeping.save(path, book)
    assert bookkeeping.load(path) == book
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]  # no temp file left


def test_corrupt_state_file_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("{not json")
    with pytest.raises(StateFileError, match="move it aside"):
        bookkeeping.load(path)


def test_old_delivered_ids_are_forgotten() -> None:
    book = bookkeeping.BridgeState(delivered={"old": 0, "new": 10**8})
    book.forget_old(10**8 + 10)
    assert book.delivered == {"new": 10**8}


def test_shadow_report_earlier_later_and_slurm_only(tmp_path: Path) -> None:
    log = tmp_path / "shadow.jsonl"
    entries = [
        {
            "time": 100,
            "would_start": {"a": ["n1"]},
            "planned": {"b": 130},
            "pending": ["a", "b"],
            "slurm_started": {},
        },
        {
            "time": 110,
            "would_start": {},
            "planned": {"b": 130},
            "pending": ["a", "b"],
            "slurm_started": {"b": {"start": 105, "nodes": ["n2"]}},
        },
        {
            "time": 120,
            "would_start": {},
            "planned": {},
            "pending": [],
            "slurm_started": {
                "a": {"start": 115, "nodes": ["n1"]},
                "b": {"start": 105, "nodes": ["n2"]},
                "c": {"start": 112, "nodes": ["n3"]},
            },
        },
    ]
    log.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    rows = {r.job_id: r for r in shadow.compare(log)}
    assert rows["a"].delta_s == -15  # cpsched would have started it 15 s earlier
    assert rows["b"].delta_s == 25  # planned for 130, Slurm started it at 105
    assert rows["c"].cpsched_start is None  # Slurm started it between two cycles
    summary = shadow.summary(list(rows.values()), tolerance_s=2)
    assert (summary["earlier"], summary["later"], summary["slurm_only"]) == (1, 1, 1)
    assert summary["same_nodes"] == 1
