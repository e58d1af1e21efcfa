"""What one loaded version of a Lua plugin's ``main.lua`` registered, buffered until the hooks ask.

:class:`~homeagent_core.plugins.lua_plugins.LuaPlugin` loads the script into a fresh sandbox,
collects its ``sdk.register_*`` calls here, and on reload compares the old and the new
:class:`LoadedScript` to attach and detach only what changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from homeagent_sdk.types import ChannelDef, ConfigDef, ToolDef

if TYPE_CHECKING:
    from homeagent_core.providers.lua import LuaSandbox

__all__ = ["LoadedScript", "ScriptChannel", "ScriptStage", "ScriptTool"]


@dataclass
class ScriptTool:
    """A tool the script registered: its definition, Lua handler and optional result cleaner."""

    definition: ToolDef
    handler: Any
    cleaner: Any


@dataclass
class ScriptStage:
    """A stage handler the script registered, with the scope it runs in."""

    handler: Any
    scope: str


@dataclass
class ScriptChannel:
    """An input or output channel the script registered, with its Lua handler and cleaner."""

    definition: ChannelDef
    handler: Any
    cleaner: Any


class LoadedScript:
    """One loaded version of ``main.lua``: its sandbox and what it registered."""

    def __init__(self) -> None:
        self.sandbox: LuaSandbox | None = None
        self.api: Any = None
        self.sdk_table: Any = None
        self.module: Any = None
        self.tools: dict[str, ScriptTool] = {}
        self.stages: dict[str, list[ScriptStage]] = {}
        self.outputs: dict[str, ScriptChannel] = {}
        self.inputs: dict[str, ScriptChannel] = {}
        self.apis: list[str] = []
        self.setting_defs: list[ConfigDef] = []
        self.auto_restart = False
        self.fingerprint = ""
