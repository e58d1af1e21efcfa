"""Everything that ships is fully typed: strict mypy over ``homeagent_sdk``, ``homeagent_core``,
``hmapdev`` and the first-party plugin distributions (the ``files`` of ``[tool.mypy]``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)  # a whole-tree strict run without a cache: minutes on two cores
def test_the_shipped_packages_pass_strict_mypy():
    api = pytest.importorskip("mypy.api")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert {"homeagent_sdk", "homeagent_core", "hmapdev"} <= set(config["files"])
    paths = [str(ROOT / f) for f in config["files"]]
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--no-incremental", *paths])
    assert status == 0, stdout + stderr
