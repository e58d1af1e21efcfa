"""The Dockerfile and compose file: what a container user relies on, read from the files.

No image is built here (the machine reaches no container registry); these checks keep the
files true to the package: every package directory copied, a non-root user, the data volume,
the web UI published on the host's loopback only, the daemon waiting for PostgreSQL.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    rows = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            rows.append((word.upper(), rest.strip()))
    return rows


def test_the_image_copies_every_package_of_the_wheel_and_what_its_build_reads() -> None:
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    copied = {source for word, rest in _instructions((ROOT / "Dockerfile").read_text())
              if word == "COPY" and not rest.startswith("--from") for source in rest.split()[:-1]}
    needed = set(wheel["packages"]) | set(wheel["force-include"]) | {"hatch_build.py", "pyproject.toml"}
    missing = needed - copied
    assert not missing, f"the Dockerfile does not COPY {sorted(missing)}"


def test_the_image_runs_as_an_unprivileged_user_with_the_data_directory_as_a_volume() -> None:
    rows = _instructions((ROOT / "Dockerfile").read_text())
    final = rows[max(i for i, (w, _) in enumerate(rows) if w == "FROM"):]
    users = [rest for word, rest in final if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("VOLUME", '["/data"]') in final
    assert any(word == "ENV" and "HOMEAGENT_HOME=/data" in rest for word, rest in final)
    assert any(word == "HEALTHCHECK" for word, _ in final)


def test_compose_publishes_the_web_ui_on_loopback_only_and_waits_for_a_healthy_database() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    agent, db = compose["services"]["homeagent"], compose["services"]["db"]
    assert all(str(p).startswith("127.0.0.1:") for p in agent["ports"])
    assert "ports" not in db
    assert agent["depends_on"]["db"]["condition"] == "service_healthy" and "healthcheck" in db
    assert "pgvector" in db["image"]
    command = agent["command"]
    store = command[command.index("--store") + 1]
    assert store.startswith("postgresql://") and "${HOMEAGENT_DB_PASSWORD:?" in store
    assert any(v.endswith(":/data") for v in agent["volumes"])


def test_the_build_context_leaves_out_local_environments_and_build_outputs() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for name in (".git", ".venv*", "homeagent_core/memory/documents/_native.so"):
        assert name in ignored
