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


PAGES = [README, REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]
"""Every page a reader follows links through: the README, the changelog, the guides and
the results pages."""

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
"""An inline markdown link or image: ``[text](target)``, ``![alt](target)``."""


def _outside_code(text: str) -> str:
    """``text`` without fenced code blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    return {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


def _relative_links(page: Path) -> list[tuple[Path, str]]:
    """(target path, anchor) of every link of ``page`` to this repository."""
    found = []
    for target in LINK.findall(_outside_code(page.read_text())):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        found.append(((page.parent / path).resolve() if path else page, anchor))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_points_to_a_page_and_heading_that_exist(page):
    for target, anchor in _relative_links(page):
        where = f"{page.relative_to(REPO)} -> {target}"
        assert target.exists(), where
        if anchor and target.suffix == ".md":
            assert anchor in _anchors(target), f"{where}#{anchor}"


def test_every_image_the_docs_show_is_in_the_repository():
    for page in PAGES:
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
