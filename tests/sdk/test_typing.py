"""The SDK is fully typed: strict mypy over ``homeagent_sdk`` (configured in pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_sdk_passes_strict_mypy():
    api = pytest.importorskip("mypy.api")
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--no-incremental",
                                      str(ROOT / "homeagent_sdk")])
    assert status == 0, stdout + stderr
