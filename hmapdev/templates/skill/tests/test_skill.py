"""Checks the SKILL.md front matter."""

from __future__ import annotations

from pathlib import Path

import yaml


def test_front_matter_names_the_skill_and_describes_it() -> None:
    text = (Path(__file__).resolve().parents[1] / "SKILL.md").read_text(encoding="utf-8")
    _, front, body = text.split("---", 2)
    meta = yaml.safe_load(front)
    assert meta["name"] == "__plugin_name__"
    assert meta["description"]
    assert body.strip()
