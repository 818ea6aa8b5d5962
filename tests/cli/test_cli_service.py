"""``cpsched db`` and ``cpsched serve`` as a sysadmin runs them: real processes."""

from __future__ import annotations

import subprocess
import sys


def cpsched(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpsched.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_db_upgrade_current_downgrade(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert "empty" in cpsched("db", "current", "--database-url", url).stdout
    upgraded = cpsched("db", "upgrade", "--database-url", url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "(current)" in cpsched("db", "current", "--database-url", url).stdout
    assert "base" in cpsched("db", "downgrade", "base", "--database-url", url).stdout


def test_serve_refuses_an_out_of_date_schema(tmp_path):
    result = cpsched("serve", "--database-url", f"sqlite:///{tmp_path / 'c.db'}")
    assert result.returncode == 2
    assert "cpsched db upgrade" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_refuses_a_bad_config(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[defaults]\ndispatcher = 'quantum'\n")
    result = cpsched("serve", "--config", config, "--upgrade")
    assert result.returncode == 2
    assert "quantum" in result.stderr
    assert "Traceback" not in result.stderr
