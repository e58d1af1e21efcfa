"""``plugin.json`` of a Lua plugin: the fields it uses, checked with errors that say what to fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from homeagent_sdk.errors import PluginLoadError
from homeagent_sdk.types import ConfigDef

__all__ = ["CAPABILITIES", "LuaPluginManifest", "read_manifest"]

#: Capability groups a Lua plugin may declare (as for out-of-process plugins, plus ``http``).
CAPABILITIES: tuple[str, ...] = (
    "doc_memory", "events", "http", "io", "knowledge", "llm", "memory", "plugin_mgr",
    "settings_cross", "social", "text_memory",
)


@dataclass
class LuaPluginManifest:
    """The fields of ``plugin.json`` a Lua plugin uses (unknown keys are ignored)."""

    name: str
    version: str
    entry: str = "main.lua"
    description: str = ""
    capabilities: list[str] = field(default_factory=list)
    settings: list[ConfigDef] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)


def read_manifest(directory: Path) -> LuaPluginManifest:
    """Read and check ``<directory>/plugin.json``.

    Raises:
        PluginLoadError: missing or malformed file, missing ``name``/``version``, an entry
            other than ``main.lua``, or an unknown capability (the message lists valid ones).
    """
    path = directory / "plugin.json"
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise PluginLoadError(f"{path} is missing: a Lua plugin needs plugin.json next to main.lua",
                              plugin_name=directory.name) from None
    except orjson.JSONDecodeError as exc:
        raise PluginLoadError(f"{path} is not valid JSON: {exc}", plugin_name=directory.name) from None
    if not isinstance(data, dict):
        raise PluginLoadError(f"{path} must hold a JSON object", plugin_name=directory.name)
    name = data.get("name") or directory.name
    version = data.get("version")
    if not isinstance(name, str) or not isinstance(version, str) or not version:
        raise PluginLoadError(f"{path}: 'name' and 'version' must be non-empty strings "
                              f'(e.g. {{"name": "{directory.name}", "version": "0.1.0", "entry": "main.lua"}})',
                              plugin_name=directory.name)
    entry = data.get("entry") or "main.lua"
    if entry != "main.lua":
        raise PluginLoadError(f"{path}: entry is {entry!r}; a Lua plugin's entry must be 'main.lua'",
                              plugin_name=name)
    caps = data.get("capabilities") or []
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise PluginLoadError(f"{path}: 'capabilities' must be a list of strings", plugin_name=name)
    unknown = sorted(set(caps) - set(CAPABILITIES) - {"core"})
    if unknown:
        raise PluginLoadError(f"{path}: unknown capabilities {unknown}; valid: {', '.join(CAPABILITIES)}",
                              plugin_name=name)
    settings: list[ConfigDef] = []
    for i, spec in enumerate(data.get("settings") or []):
        if not isinstance(spec, dict) or not isinstance(spec.get("key"), str):
            raise PluginLoadError(f"{path}: settings[{i}] must be an object with a 'key' "
                                  '(e.g. {"key": "city", "type": "string", "default": "杭州"})', plugin_name=name)
        settings.append(ConfigDef.from_dict(spec))
    return LuaPluginManifest(name=name, version=version, entry=entry, description=str(data.get("description") or ""),
                             capabilities=list(caps), settings=settings, raw=data)

