"""The README and the guides document what the code has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cpsched.replay.sweep import load_grid
from cpsched.runtime.policy import Policy

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SERVICE = REPO / "docs" / "service.md"
REPLAY = REPO / "docs" / "replay.md"


def test_the_service_guide_lists_every_policy_setting():
    text = SERVICE.read_text()
    table = text[text.index("### The policy") :]
    for field in Policy.model_fields:
        assert f"`{field}`" in table, field


def test_every_image_the_docs_show_is_in_the_repository():
    docs = README.parent / "docs"
    for page in [README, *docs.glob("*.md")]:
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).is_file(), f"{page.name}: {target}"


@pytest.mark.parametrize("doc", [REPLAY, REPO / "docs" / "sweeps.md"])
def test_the_sweep_grid_examples_are_valid_grids(doc, tmp_path, traces_dir):
    """The first TOML block after the sweep's heading, with its paths pointed here."""
    text = doc.read_text()
    start = text.index("```toml", text.index("Sweeps" if doc == REPLAY else "## The grid"))
    example = text[start + len("```toml") : text.index("```", start + 1)]
    example = example.replace('"../shared/data/traces/', f'"{traces_dir}/')
    example = example.replace('"systems/', f'"{REPO / "systems"}/')
    grid = tmp_path / "grid.toml"
    grid.write_text(example)
    plan = load_grid(grid)
    assert len(plan.traces) == 2
    assert len(plan.cells()) == 2 * len(plan.policies) > 2


def test_the_readme_is_short_and_links_only_to_pages_that_exist():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    for target in re.findall(r"\]\((docs/[^)#\s]+)", text):
        assert (REPO / target).is_file(), target
