"""The ``backup`` built-in writes the day's archive on schedule, prunes by retention and reports it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from homeagent_core.app import App
from homeagent_core.builtin.backup import read_status
from homeagent_core.ops.backup import list_backups
from homeagent_core.ops.restore import restore_backup
from homeagent_sdk.testing import FakeModel
from homeagent_sdk.types import ToolCall

#: Bound on the wait for the scheduled backup (not a speed assertion).
WAIT_S = 60.0


async def start(data: Path, settings: dict[str, object]) -> App:
    app = App(
        data, load_entrypoints=False, builtins=["homeagent_core.builtin.backup"], provider=FakeModel(default="ok")
    )
    app.declare_settings()
    for key, value in settings.items():
        app.config.set(key, value)
    await app.start()
    return app


async def wait_for_status(data: Path) -> dict[str, object]:
    async with asyncio.timeout(WAIT_S):
        while not (status := read_status(data)):
            await asyncio.sleep(0.05)
    return status


async def test_a_daily_schedule_writes_today_s_backup_and_prunes_old_ones(tmp_path: Path, monkeypatch):
    data, folder = tmp_path / "data", tmp_path / "archives"
    folder.mkdir()
    old = datetime.now(UTC) - timedelta(days=400)
    for day in range(30):  # thirty days of archives, more than a year old
        (folder / f"homeagent-{(old - timedelta(days=day)).strftime('%Y%m%dT%H%M%SZ')}.tar").write_bytes(b"x")
    monkeypatch.setenv("HA_BACKUP_PASS", "family secret")
    app = await start(
        data,
        {
            "plugin.backup.schedule": "daily",
            "plugin.backup.hour": 0,
            "plugin.backup.folder": str(folder),
            "plugin.backup.keep_daily": 2,
            "plugin.backup.keep_weekly": 1,
            "plugin.backup.passphrase_env": "HA_BACKUP_PASS",
        },
    )
    try:
        status = await wait_for_status(data)
        assert status["ok"] is True, status
        made = Path(str(status["path"]))
        assert made.parent == folder and made.name.endswith(".tar.enc")
        names = sorted(p.name for p in folder.iterdir())
        assert len(names) == 3 and made.name in names  # today + 1 more day + 1 week before
        result = await app.kernel.tools.execute(ToolCall(id="t", name="backup_status", arguments={}))
        assert result.success and made.name in result.result and "daily" in result.result
    finally:
        await app.stop()
    restore_backup(made, tmp_path / "restored", passphrase="family secret")
    assert (tmp_path / "restored" / "config.db").is_file()


async def test_the_schedule_is_off_by_default_and_a_failure_is_recorded(tmp_path: Path, monkeypatch):
    data = tmp_path / "data"
    app = await start(data, {})
    try:
        assert app.config.get("plugin.backup.schedule") == "off"
    finally:
        await app.stop()
    assert read_status(data) == {} and list_backups(data / "backups") == []

    monkeypatch.delenv("HA_MISSING", raising=False)
    app = await start(
        data, {"plugin.backup.schedule": "daily", "plugin.backup.hour": 0, "plugin.backup.passphrase_env": "HA_MISSING"}
    )
    try:
        status = await wait_for_status(data)
    finally:
        await app.stop()
    assert status["ok"] is False and "HA_MISSING" in str(status["error"])
    assert list_backups(data / "backups") == []
