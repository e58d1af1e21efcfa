"""The ``backup`` built-in over the web UI's HTTP server: status, create now, download, auth."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from homeagent_core.app import App
from homeagent_core.ops.restore import verify_backup
from homeagent_sdk.testing import FakeModel

API_KEY = "test-api-key-0123456789"


async def test_the_web_ui_creates_lists_and_serves_backups_to_the_admin_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("HOMEAGENT_WEBUI_API_KEY", API_KEY)
    app = App(
        tmp_path / "data",
        load_entrypoints=False,
        provider=FakeModel(default="ok"),
        builtins=("homeagent_core.builtin.cfgmgr", "homeagent_core.builtin.webui", "homeagent_core.builtin.backup"),
    )
    app.services.listen_port = 0
    await app.start()
    try:
        web = app.host.pm.get_plugin("webui")
        assert web is not None and web.port, app.status()
        async with httpx.AsyncClient(base_url=web.url, timeout=60) as anonymous:
            assert (await anonymous.get("/plugins/backup/status")).status_code == 401
            assert (await anonymous.post("/plugins/backup/create")).status_code == 401
        async with httpx.AsyncClient(base_url=web.url, headers={"X-API-Key": API_KEY}, timeout=60) as admin:
            before = (await admin.get("/plugins/backup/status")).json()
            assert before["schedule"] == "off" and before["archives"] == [] and before["running"] is False
            made = await admin.post("/plugins/backup/create")
            assert made.status_code == 200, made.text
            name = Path(made.json()["path"]).name
            listed = (await admin.get("/plugins/backup/status")).json()
            assert [a["name"] for a in listed["archives"]] == [name]
            assert listed["last"]["ok"] is True
            download = await admin.get(f"/plugins/backup/download/{name}")
            assert download.status_code == 200
            assert download.content == (tmp_path / "data" / "backups" / name).read_bytes()
            for wrong in ("..%2Fconfig.db", "config.db", "homeagent-20990101T000000Z.tar"):
                missing = await admin.get(f"/plugins/backup/download/{wrong}")
                assert missing.status_code == 404, wrong
    finally:
        await app.stop()
    saved = tmp_path / "downloaded.tar"
    saved.write_bytes(download.content)
    assert "config.db" in verify_backup(saved)["stores"]
