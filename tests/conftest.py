"""Fixtures shared by every test package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The real SWF traces: ``../shared/data/traces`` beside the clone (CI has them)."""
    path = Path(os.environ.get("CPSCHED_TRACES", REPO.parent / "shared" / "data" / "traces"))
    if not path.is_dir():
        pytest.fail(f"real traces not found at {path}; set CPSCHED_TRACES")
    return path


@pytest.fixture(scope="session")
def dask_installed() -> None:
    """Dask, which the [sweep] extra installs, is there: skipped locally without it, a
    failure in CI (``CI`` set), as the PostgreSQL tests are."""
    try:
        import distributed  # noqa: F401
    except ModuleNotFoundError as missing:
        reason = (
            f"the [sweep] extra is not installed ({missing.name}): pip install 'cpsched[sweep]'"
        )
        if os.environ.get("CI"):
            pytest.fail(f"Dask is required in CI: {reason}")
        pytest.skip(reason)


SMALL_SWF = """\
; Small hand-written trace for CLI tests
; MaxNodes: 4
; MaxProcs: 8
"""


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    """40 jobs on 4 nodes x 2 cores, plus one broken line and one job too big."""
    lines = [SMALL_SWF]
    for i in range(1, 41):
        submit = i * 30
        run = 50 + (i * 37) % 400
        procs = 1 + (i * 5) % 6
        requested = run * (1 + i % 4)
        fields = [
            i,
            submit,
            -1,
            run,
            procs,
            -1,
            -1,
            procs,
            requested,
            -1,
            1,
            i % 3,
            1,
            -1,
            1,
            -1,
            -1,
            -1,
        ]
        lines.append(" ".join(map(str, fields)) + "\n")
    lines.append("41 1300 this line is broken\n")
    lines.append("42 1310 -1 100 64 -1 -1 64 200 -1 1 1 1 -1 1 -1 -1 -1\n")
    path = tmp_path / "small.swf"
    path.write_text("".join(lines))
    return path
