"""Built-in ``backup``: scheduled backups of the data directory, with retention.

With ``plugin.backup.schedule`` set to ``daily`` the daemon writes one archive a day (the
first check at or after ``hour`` o'clock, local time, on a day that has none yet) with
:func:`homeagent_core.ops.backup.create_backup` — the same online, consistent archive as
``homeagent backup create`` — into ``folder`` (default ``<data>/backups``), encrypted when
``passphrase_env`` names an environment variable holding a passphrase. After each backup,
archives beyond the newest of ``keep_daily`` days and ``keep_weekly`` weeks before them are
deleted. The backup runs on a worker thread at a lower CPU priority (nice +10); the outcome
of the last run is kept in ``<data>/plugin_data/backup/status.json`` (:func:`read_status`) and
answered by the ``backup_status`` tool.

With the web UI running, the same is reachable over HTTP (admin login or API key, like the rest of
the API): ``GET /plugins/backup/status``, ``POST /plugins/backup/create`` (one archive now, no
pruning) and ``GET /plugins/backup/download/<name>``. The schedule is set like any setting, on
the settings page or with ``homeagent config set``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.ops.backup import (
    ARCHIVE_NAME,
    backup_folder,
    create_backup,
    list_backups,
    lower_priority,
    prune_backups,
)
from homeagent_sdk import (
    ConfigDef,
    HomeAgentError,
    RouteRegistry,
    SettingsRegistry,
    ToolError,
    ToolRegistryProtocol,
    hookimpl,
)
from homeagent_sdk._atomic import atomic_write

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "backup"
STATUS_FILE = "status.json"
#: How often the schedule is looked at (at startup, then every minute: the settings may change).
CHECK_S = 60.0

__all__ = ["BackupPlugin", "make_plugin", "read_status"]

log = logging.getLogger(__name__)


def read_status(data_dir: Path) -> dict[str, Any]:
    """The outcome of the last scheduled backup of a data directory (``{}`` when none ran)."""
    path = Path(data_dir) / "plugin_data" / PLUGIN_NAME / STATUS_FILE
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise HomeAgentError(f"backup status {path} is unreadable ({exc}); delete it to start afresh") from None
    return dict(value) if isinstance(value, dict) else {}


def _create_in_background(data: Path, folder: Path, passphrase: str | None) -> tuple[Path, dict[str, Any]]:
    lower_priority()  # this worker thread only: the daemon's turns go first
    return create_backup(data, folder, passphrase=passphrase)


class BackupPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self._task: asyncio.Task[None] | None = None
        self._running = False

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(
            ConfigDef(
                key="schedule",
                type="select",
                default="off",
                options=["off", "daily"],
                description="Write a backup of the data directory every day (daily) or not (off).",
            )
        )
        registry.add(
            ConfigDef(
                key="hour",
                type="int",
                default=3,
                min=0,
                max=23,
                description="Local hour from which the day's backup is written.",
            )
        )
        registry.add(
            ConfigDef(
                key="keep_daily",
                type="int",
                default=7,
                min=1,
                max=366,
                description="Keep the newest backup of this many most recent days.",
            )
        )
        registry.add(
            ConfigDef(
                key="keep_weekly",
                type="int",
                default=4,
                min=0,
                max=520,
                description="Also keep the newest backup of this many weeks before those days.",
            )
        )
        registry.add(
            ConfigDef(
                key="folder",
                type="string",
                default="",
                description="Folder for the archives; empty = <data>/backups (copy them off the machine too).",
            )
        )
        registry.add(
            ConfigDef(
                key="passphrase_env",
                type="string",
                default="",
                description="Name of an environment variable holding a passphrase; set = archives are encrypted.",
            )
        )

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.backup_status, parallel_safe=True)

    @hookimpl
    def register_routes(self, router: RouteRegistry) -> None:
        router.add("/status", self._route_status, methods=["GET"])
        router.add("/create", self._route_create, methods=["POST"])
        router.add("/download/{name}", self._route_download, methods=["GET"])

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="backup-schedule")

    @hookimpl
    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # ------------------------------------------------------------------ helpers

    @property
    def sdk(self) -> ScopedSDK:
        if self._sdk is None:
            raise ToolError("backup has not started yet")
        return self._sdk

    def _data_dir(self) -> Path:
        services = self.sdk.services
        return Path(services.data_dir) if services is not None else self.sdk.data_dir.parent.parent

    def folder(self) -> Path:
        chosen = str(self.sdk.settings.get("folder") or "").strip()
        return Path(chosen).expanduser() if chosen else backup_folder(self._data_dir())

    def due(self, now: datetime) -> bool:
        """Whether the schedule asks for a backup at ``now`` (local time)."""
        if self.sdk.settings.get("schedule") != "daily" or now.hour < int(self.sdk.settings.get("hour") or 0):
            return False
        today = now.strftime("%Y-%m-%d")
        for info in list_backups(self.folder()):
            with contextlib.suppress(ValueError):
                made = datetime.fromisoformat(info.created).astimezone()
                if made.strftime("%Y-%m-%d") == today and info.status == "complete":
                    return False
        return True

    async def _loop(self) -> None:
        while True:
            try:
                if not self._running and await asyncio.to_thread(self.due, datetime.now().astimezone()):
                    await self.run_backup()
            except Exception:
                log.exception("scheduled backup check failed")
            await asyncio.sleep(CHECK_S)

    async def run_backup(self, *, prune: bool = True) -> dict[str, Any]:
        """Write one archive now, prune by the retention settings (``prune``), record the outcome."""
        self._running = True
        started = time.time()
        status: dict[str, Any] = {"started": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds")}
        try:
            passphrase: str | None = None
            var = str(self.sdk.settings.get("passphrase_env") or "").strip()
            if var:
                passphrase = os.environ.get(var) or None
                if passphrase is None:
                    raise HomeAgentError(
                        f"plugin.backup.passphrase_env names {var}, which is not set in the daemon's environment"
                    )
            folder = self.folder()
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            path, manifest = await asyncio.to_thread(_create_in_background, self._data_dir(), folder, passphrase)
            removed = (
                []
                if not prune
                else await asyncio.to_thread(
                    prune_backups,
                    folder,
                    keep_daily=int(self.sdk.settings.get("keep_daily") or 7),
                    keep_weekly=int(self.sdk.settings.get("keep_weekly") or 0),
                )
            )
            status.update(ok=True, path=str(path), counts=manifest["counts"], pruned=[p.name for p in removed])
            log.info("backup written: %s (%d pruned)", path, len(removed))
        except (HomeAgentError, OSError) as exc:
            status.update(ok=False, error=str(exc))
            log.warning("scheduled backup failed: %s", exc)
        finally:
            self._running = False
        status["duration_s"] = round(time.time() - started, 3)
        self._save(status)
        return status

    def _save(self, status: dict[str, Any]) -> None:
        atomic_write(self.sdk.data_dir / STATUS_FILE, json.dumps(status, ensure_ascii=False))

    # ------------------------------------------------------------------ tools

    async def backup_status(self) -> dict[str, Any]:
        """The backup schedule, the last scheduled backup's outcome and the archives kept."""
        archives = await asyncio.to_thread(list_backups, self.folder())
        return {
            "schedule": self.sdk.settings.get("schedule"),
            "folder": str(self.folder()),
            "last": read_status(self._data_dir()),
            "archives": [
                {"name": a.path.name, "size": a.size, "created": a.created, "status": a.status,
                 "encrypted": a.encrypted}
                for a in archives
            ],
        }

    # ------------------------------------------------------------------ web routes (/plugins/backup/...)

    async def _route_status(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse({**(await self.backup_status()), "running": self._running})

    async def _route_create(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        if self._running:
            return JSONResponse({"error": "a backup is being written now; try again when it is done"}, status_code=409)
        status = await self.run_backup(prune=False)
        return JSONResponse(status, status_code=200 if status.get("ok") else 500)

    async def _route_download(self, request: Any) -> Any:
        from starlette.responses import FileResponse, JSONResponse

        name = str(request.path_params.get("name", ""))
        path = self.folder() / name
        if not ARCHIVE_NAME.match(name) or not path.is_file():
            return JSONResponse(
                {"error": f"no backup named {name!r}; GET /plugins/backup/status lists them"}, status_code=404
            )
        return FileResponse(path, media_type="application/octet-stream", filename=name)


def make_plugin() -> BackupPlugin:
    return BackupPlugin()
