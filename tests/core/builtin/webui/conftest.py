"""A running daemon with the web UI on a free port, backed by a FakeModel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from homeagent_core.app import App
from homeagent_sdk.testing import FakeModel

API_KEY = "test-api-key-0123456789"
PASSWORD = "correct horse battery staple"


@dataclass
class WebDaemon:
    app: App
    model: FakeModel
    url: str
    plugin: object
    api_key: str = API_KEY
    password: str = PASSWORD

    def client(self, *, key: bool = True) -> httpx.AsyncClient:
        headers = {"X-API-Key": API_KEY} if key else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10)


@pytest.fixture
async def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[WebDaemon]:
    monkeypatch.setenv("HOMEAGENT_WEBUI_API_KEY", API_KEY)
    model = FakeModel(default="好的")
    app = App(
        tmp_path / "data",
        load_entrypoints=False,
        builtins=("homeagent_core.builtin.cfgmgr", "homeagent_core.builtin.webui"),
        provider=model,
    )
    app.services.listen_port = 0
    await app.start()
    plugin = app.host.pm.get_plugin("webui")
    assert plugin is not None and plugin.port, app.status()
    plugin.state.credentials.set_password(PASSWORD, plugin.state.credentials_path)
    yield WebDaemon(app, model, plugin.url, plugin)
    await app.stop()
