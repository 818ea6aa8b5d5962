"""Every command's --help fits an 80-column terminal, shows its defaults, and the main
ones give examples."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cpsched.cli.app import app

COMMANDS = ["replay", "compare", "predict-eval", "serve", "http-check", "sweep", "generate"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_fits_80_columns_and_shows_defaults(command):
    result = CliRunner().invoke(app, [command, "--help"], terminal_width=80, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    too_wide = [line for line in result.output.splitlines() if len(line) > 80]
    assert not too_wide, too_wide
    if command != "sweep":  # its options have no fixed defaults (the cores, a local cluster)
        assert "[default" in result.output


@pytest.mark.parametrize("command", ["replay", "compare"])
def test_the_main_commands_give_examples(command):
    result = CliRunner().invoke(app, [command, "--help"], terminal_width=80)
    assert "Examples:" in result.output and f"cpsched {command} " in result.output
