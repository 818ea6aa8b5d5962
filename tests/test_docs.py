"""The README documents what the code has."""

from __future__ import annotations

import re
from pathlib import Path

from cpsched.runtime.policy import Policy

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_lists_every_policy_setting():
    text = README.read_text()
    table = text[text.index("#### The policy") :]
    for field in Policy.model_fields:
        assert f"`{field}`" in table, field


def test_every_image_the_docs_show_is_in_the_repository():
    docs = README.parent / "docs"
    for page in [README, *docs.glob("*.md")]:
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).is_file(), f"{page.name}: {target}"
