"""homeagent-plugin-file-channel: an output channel that appends messages to a file.

The channel ``file`` is asynchronous: replies are not copied to it; the model writes to it
when it decides to, with the generated tool ``output_send__file``. Each message becomes one
JSON line ``{"time", "message", "meta"}`` in a file under the plugin's data directory
(``<data>/plugin_data/file_channel/``), named by the setting ``plugin.file_channel.filename``.
A message is acknowledged only after it is on disk (appended, flushed, fsynced); a write that
fails is reported to the model as a failed tool call with the reason.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any

from homeagent_sdk import ChannelRegistry, PluginSDK, SettingsRegistry, hookimpl
from homeagent_sdk.types import Caps, ChannelDef, ConfigDef

__all__ = ["CHANNEL", "DEFAULT_FILENAME", "FileChannelPlugin", "make_plugin"]

CHANNEL = "file"
DEFAULT_FILENAME = "messages.jsonl"


class FileChannelPlugin:
    """Appends what the model sends on the ``file`` channel to a JSON Lines file."""

    name = "file_channel"

    def __init__(self) -> None:
        self.sdk: Any = None
        self._lock = threading.Lock()  # sends run in worker threads; one line at a time

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(
            ConfigDef(
                key="filename",
                type="string",
                default=DEFAULT_FILENAME,
                description="File the file channel appends to, relative to the plugin's data directory.",
            )
        )

    @hookimpl
    def register_output_channels(self, registry: ChannelRegistry) -> None:
        registry.add(
            ChannelDef(
                name=CHANNEL,
                sync=False,
                caps=Caps.TEXT,
                description="append a note to a file on the agent's machine",
                help='optional JSON object, stored with the message, e.g. {"topic": "shopping"}',
                send=self.send,
            )
        )

    @hookimpl
    def startup(self, sdk: PluginSDK) -> None:
        self.sdk = sdk

    # ------------------------------------------------------------------ the channel

    def path(self) -> Path:
        """The file messages go to now (the setting is read on every send).

        Raises:
            RuntimeError: the plugin has not started yet.
            ValueError: the setting is empty, absolute or leaves the data directory.
        """
        if self.sdk is None:
            raise RuntimeError("the file channel is not started; it needs the agent's data directory")
        filename = str(self.sdk.settings.get("filename") or "").strip()
        key = f"plugin.{self.name}.filename"
        if not filename:
            raise ValueError(f"{key} is empty; set it to a file name such as {DEFAULT_FILENAME}")
        relative = PurePath(filename)
        if relative.is_absolute() or ".." in relative.parts:
            raise ValueError(
                f"{key} = {filename!r} must be a relative path inside the plugin's data directory "
                f"(no leading '/' and no '..'), e.g. {DEFAULT_FILENAME} or notes/today.jsonl"
            )
        return Path(self.sdk.data_dir) / relative

    def send(self, payload: str, meta: dict[str, Any], type: str) -> str:
        """Append one message; returns where it went. Any failure raises and reaches the model."""
        path = self.path()
        record = {"time": datetime.now(UTC).isoformat(timespec="milliseconds"), "message": payload, "meta": meta}
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as out:
                out.write(line)
                out.flush()
                os.fsync(out.fileno())
        return f"appended to {path.name}"


def make_plugin() -> FileChannelPlugin:
    """A fresh plugin per agent (the entry point names this module)."""
    return FileChannelPlugin()
