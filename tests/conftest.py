"""Suite-wide isolation: no installed plugin, user data dir or model download leaks in."""

from __future__ import annotations

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
