"""Fixtures of the deploy/ tests: Debian's promtool (package ``prometheus``), which
``./dev test`` installs as root when missing; without it the tests that run it fail
when ``CI`` is set and are skipped otherwise."""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(scope="session")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        reason = "promtool is not installed (Debian: apt-get install prometheus)"
        if os.environ.get("CI"):
            pytest.fail(f"promtool is required in CI: {reason}")
        pytest.skip(reason)
    return found
