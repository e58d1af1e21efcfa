"""The layer rules hold: the import-linter contracts in pyproject.toml are kept, and documented."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("importlinter", reason="import-linter comes with the dev extra")


def contracts() -> list[dict[str, object]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(data["tool"]["importlinter"]["contracts"])


def test_every_layer_contract_is_kept():
    code = (
        "from importlinter.cli import lint_imports\n"
        f"raise SystemExit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_layers_are_all_under_contract():
    ids = {str(c["id"]) for c in contracts()}
    assert ids == {"sdk", "hmapdev", "providers", "embeddings", "memory", "kernel", "builtin", "stores", "backends"}


def test_architecture_doc_names_every_contract():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for contract in contracts():
        assert str(contract["name"]) in text, f"docs/ARCHITECTURE.md does not list the contract {contract['name']!r}"
