"""The README documents what the code has."""

from __future__ import annotations

from pathlib import Path

from cpsched.runtime.policy import Policy

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_lists_every_policy_setting():
    text = README.read_text()
    table = text[text.index("#### The policy") :]
    for field in Policy.model_fields:
        assert f"`{field}`" in table, field
