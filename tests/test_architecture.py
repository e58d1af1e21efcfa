"""The layer rules hold: the import-linter contracts in pyproject.toml are kept, and documented."""

from __future__ import annotations

import json
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
    assert ids == {
        "sdk",
        "hmapdev",
        "providers",
        "embeddings",
        "memory",
        "memory-host",
        "knowledge",
        "kernel",
        "kernel-hooks",
        "plugins",
        "builtin",
        "stores",
        "backends",
        "shared",
        "node",
    }


def test_architecture_doc_names_every_contract():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for contract in contracts():
        assert str(contract["name"]) in text, f"docs/ARCHITECTURE.md does not list the contract {contract['name']!r}"


#: The import circles left, each with the reason it stays. Any other circle fails the test below.
KNOWN_CIRCLES = [
    # The out-of-process plugin, its protocol handler and its supervisor restart one another.
    ["homeagent_core.plugins.proc", "homeagent_core.plugins.protocol", "homeagent_core.plugins.supervisor"],
]


def test_no_new_import_circles():
    """Modules that import one another in a loop (type-only and lazy imports included) stay the known few."""
    code = "import json, import_graph; print(json.dumps(import_graph.ImportGraph.build('homeagent_core').circles()))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    circles: list[list[str]] = json.loads(result.stdout)
    new = [c for c in circles if not any(set(c) <= set(known) for known in KNOWN_CIRCLES)]
    assert not new, (
        f"new import circles {new}: break each with a protocol the importer owns (see docs/ARCHITECTURE.md, "
        "'Where things live'), or move the shared type to the module that owns it"
    )
    assert len(circles) <= len(KNOWN_CIRCLES)


def test_the_circle_finder_sees_type_only_and_lazy_imports(tmp_path, monkeypatch):
    from import_graph import ImportGraph

    package = tmp_path / "circle_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "owner.py").write_text("from circle_pkg import helper\n")
    (package / "helper.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circle_pkg.owner import Owner\n"
    )
    (package / "lazy.py").write_text("def f():\n    from circle_pkg import tail\n")
    (package / "tail.py").write_text("import circle_pkg.lazy\n")
    (package / "alone.py").write_text("import circle_pkg.owner\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert ImportGraph.build("circle_pkg").circles() == [
        ["circle_pkg.helper", "circle_pkg.owner"],
        ["circle_pkg.lazy", "circle_pkg.tail"],
    ]
