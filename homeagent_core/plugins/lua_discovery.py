"""Find the Lua plugins under ``<data>/plugins/``: every folder whose entry is ``main.lua``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from homeagent_core.plugins.lua_http import DEFAULT_HTTP_MAX_BYTES, DEFAULT_HTTP_TIMEOUT
from homeagent_core.plugins.lua_plugins import LuaPlugin
from homeagent_sdk.errors import PluginLoadError

__all__ = ["discover_lua_plugins"]

log = logging.getLogger(__name__)


def discover_lua_plugins(
    data_dir: Path | str,
    *,
    instruction_limit: int | None = None,
    memory_limit: int | None = None,
    http_timeout: float = DEFAULT_HTTP_TIMEOUT,
    http_max_bytes: int = DEFAULT_HTTP_MAX_BYTES,
    watch_interval: float = 2.0,
    on_error: Callable[[str, Exception], None] | None = None,
) -> list[tuple[str, LuaPlugin]]:
    """Load every ``<data>/plugins/<name>/`` whose entry is ``main.lua``.

    Returns ``(name, plugin object)`` pairs for the app to register. A plugin that fails to
    load is passed to ``on_error(name, error)`` (default: logged) and skipped.
    """
    root = Path(data_dir) / "plugins"
    found: list[tuple[str, LuaPlugin]] = []
    if not root.is_dir():
        return found
    for directory in sorted(p for p in root.iterdir() if p.is_dir()):
        if not (directory / "main.lua").is_file():
            continue
        try:
            manifest_entry = orjson.loads((directory / "plugin.json").read_bytes()).get("entry", "main.lua")
        except (OSError, orjson.JSONDecodeError, AttributeError):
            manifest_entry = "main.lua"  # read_manifest reports it properly below
        if manifest_entry not in ("main.lua", "", None):
            continue
        started = time.perf_counter()
        try:
            plugin = LuaPlugin(directory, instruction_limit=instruction_limit, memory_limit=memory_limit,
                               http_timeout=http_timeout, http_max_bytes=http_max_bytes,
                               watch_interval=watch_interval)
        except PluginLoadError as exc:
            if on_error is not None:
                on_error(directory.name, exc)
            else:
                log.error("Lua plugin %s not loaded: %s", directory.name, exc)
            continue
        log.debug("Lua plugin %s loaded in %.1f ms", plugin.name, (time.perf_counter() - started) * 1000)
        found.append((plugin.name, plugin))
    return found
