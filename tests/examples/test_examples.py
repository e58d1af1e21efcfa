"""Every example under ``examples/`` passes its own tests, run as its author would run them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.parent.parent for p in (ROOT / "examples").glob("*/tests/test_*.py"))
EXAMPLES = sorted(set(EXAMPLES))


def test_every_kind_of_plugin_has_an_example():
    kinds = {"homeagent-plugin-hello", "proc-echo", "lua-dice", "tea-brewing", "file-channel"}
    assert {p.name for p in EXAMPLES} >= kinds
    for example in EXAMPLES:
        assert (example / "README.md").is_file(), f"{example.name} has no README.md"


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_the_examples_own_tests_pass(example: Path, tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOMEAGENT_", "PYTEST_"))}
    env.update({"HOMEAGENT_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "t")],
        cwd=example,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout
    built = [p.name for p in (example / "build", example / "dist") if p.exists()]
    assert built == [], "tests must not build in the source tree"


def test_example_tests_use_only_the_test_kit():
    offenders = []
    for path in (ROOT / "examples").rglob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        if "homeagent_core" in text or "hmapdev" in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
