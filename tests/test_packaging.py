"""Packaging for sysadmins: there is no Docker engine here, so the Dockerfile is linted
and the compose file validated against the Compose specification's schema."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cpsched.service.settings import load_settings

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = BIN / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: install the dev extra (pip install -e '.[dev]')")
    return found


def test_dockerfile_passes_hadolint():
    result = subprocess.run(
        [tool("hadolint"), str(REPO / "docker" / "Dockerfile")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_runs_as_non_root_with_a_healthcheck():
    text = (REPO / "docker" / "Dockerfile").read_text()
    assert "\nUSER 10001\n" in text
    assert "HEALTHCHECK" in text and "/readyz" in text


def test_compose_file_matches_the_compose_spec():
    result = subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec",
         str(REPO / "docker-compose.yml")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_example_configs_load():
    load_settings(REPO / "docker" / "cpsched.toml")
    load_settings(REPO / "deploy" / "cpsched.toml")
