"""A newcomer's first try with hmapdev: new, its tests, build, pack, install, listed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, cwd: Path, data: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOMEAGENT_", "PYTEST_"))}
    env.update({"HOMEAGENT_HOME": str(data), "HF_HUB_OFFLINE": "1"})
    result = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{args}: {result.stdout[-3000:]}{result.stderr[-3000:]}"
    return result


@pytest.mark.parametrize("kind", ["proc", "lua", "skill"])
def test_a_new_project_builds_packs_installs_and_is_listed(kind: str, tmp_path: Path):
    data = tmp_path / "data"
    run("-m", "hmapdev.cli", "new", "first", "--kind", kind, cwd=tmp_path, data=data)
    project = tmp_path / "first"
    tested = run("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=project, data=data)
    assert " passed" in tested.stdout
    run("-m", "hmapdev.cli", "build", cwd=project, data=data)
    run("-m", "hmapdev.cli", "pack", cwd=project, data=data)
    package = project / "dist" / "first-0.1.0.hmap"
    assert package.is_file()

    installed = run("-m", "homeagent_core.cli", "plugins", "install", str(package), cwd=tmp_path, data=data)
    assert "installed first 0.1.0" in installed.stdout

    listed = json.loads(run("-m", "homeagent_core.cli", "plugins", "list", "--json", cwd=tmp_path, data=data).stdout)
    rows = {row["name"]: row for row in listed}
    if kind == "skill":
        assert rows["skills"]["status"] == "loaded"
        skills = run("-m", "homeagent_core.cli", "skills", "list", cwd=tmp_path, data=data).stdout
        assert "first" in skills, skills
    else:
        assert rows["first"]["kind"] == kind and rows["first"]["status"] == "loaded", rows.get("first")
