"""Sweep test fixtures: grid files, and a grid on the first few hundred jobs of real
traces (``dask_installed`` is in tests/conftest.py: the CLI's tests use it too)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from cpsched.replay.sweep import SweepPlan, load_grid

REPO = Path(__file__).resolve().parents[3]
CTC_SYSTEM = REPO / "systems" / "ctc.toml"


@pytest.fixture(autouse=True)
def staging_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Traces that cells run in this process stage land under the test's directory."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture
def write_grid(tmp_path: Path) -> Callable[..., Path]:
    """Write a grid file from TOML text into a fresh folder; return its path."""

    def write(text: str, name: str = "grid.toml") -> Path:
        path = tmp_path / "grids" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return write


@pytest.fixture
def two_slice_plan(small_trace: Path, write_grid: Callable[..., Path]) -> SweepPlan:
    """The small trace whole and a slice of it that has no job, under easy++, FCFS and
    today: 6 cells, the last 3 failing."""
    return load_grid(
        write_grid(f"""
[[traces]]
path = "{small_trace}"
name = "small"
jobs = [40, "500:600"]
[[policies]]
policy = "easy++"
[[policies]]
name = "fcfs"
policy = "today"
dispatcher = "fcfs"
""")
    )


def kth_ctc_grid(traces_dir: Path) -> str:
    """Three slices of two real traces (KTH by its header, CTC by its system file) under
    easy++, SJF, deterministic HCP3 and, added by the sweep, today: 12 cells, about 7 s of
    replays in all, the HCP3 cells taking 1-4 s each."""
    return f"""
[[traces]]
path = "{traces_dir / "KTH-SP2-1996-2.1-cln.swf.gz"}"
name = "kth"
jobs = [600, "600:1200"]

[[traces]]
path = "{traces_dir / "CTC-SP2-1996-3.1-cln.swf.gz"}"
name = "ctc"
system = "{CTC_SYSTEM}"
jobs = 300

[[policies]]
policy = "easy++"

[[policies]]
name = "sjf"
policy = "easy++"
dispatcher = "sjf"

[[policies]]
name = "hcp3"
deadline = 60    # never reached: the deterministic search is what limits each call
cp_window = 20
"""
