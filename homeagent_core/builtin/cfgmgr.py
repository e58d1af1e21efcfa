"""Built-in ``cfgmgr``: lets the model read and change settings through tools.

Scopes are ``core`` (keys ``core.*``) or a plugin name (keys ``plugin.<name>.*``). Secrets are
never returned; every write goes through the config store's validation, so a wrong type or an
unknown key comes back to the model as a clear error. Guarded settings (who may run programs,
read files, log in, install plugins; the model sources and keys; people and their rights) are
refused whoever's turn it is: only the owner changes them, with ``homeagent config set`` or on
the web UI (docs/PEOPLE.md).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from homeagent_sdk import HomeAgentError, ToolError, ToolRegistryProtocol, hookimpl

if TYPE_CHECKING:
    from homeagent_core.config import ConfigStore
    from homeagent_core.plugins.privileged import RightsAccess
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "cfgmgr"

__all__ = ["CfgMgr", "make_plugin"]


class CfgMgr:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._config: ConfigStore | None = None
        self._rights: RightsAccess | None = None

    @property
    def config(self) -> ConfigStore:
        if self._config is None:
            raise ToolError("cfgmgr has not started yet")
        return self._config

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        if sdk.config is None:
            raise ToolError("cfgmgr needs the privileged config accessor of a built-in plugin")
        self._config = sdk.config
        self._rights = sdk.services.rights if sdk.services is not None else None

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        for fn in (
            self.config_list_plugins,
            self.config_get,
            self.config_set,
            self.config_list_keys,
            self.config_get_defs,
            self.config_dump,
            self.config_batch_set,
        ):
            registry.add(fn)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _prefix(scope: str) -> str:
        scope = scope.strip()
        if not scope:
            raise ToolError("scope is empty; use 'core' or a plugin name")
        return "core." if scope == "core" else f"plugin.{scope}."

    def _full_key(self, scope: str, key: str) -> str:
        prefix = self._prefix(scope)
        return key if key.startswith(prefix) else prefix + key

    def _guard(self, key: str, tool: str) -> None:
        """Refuse a guarded setting: a model tool never changes who may do what."""
        if self._rights is None:
            raise ToolError(f"{tool} cannot tell which settings are guarded (no person registry); nothing changed")
        try:
            self._rights.guard_setting(key, f"{tool} (a model tool)")
        except HomeAgentError as exc:
            raise ToolError(str(exc)) from None

    def _rows(self, prefix: str) -> list[dict[str, Any]]:
        return self.config.describe(prefix)

    # ------------------------------------------------------------------ tools

    def config_list_plugins(self) -> str:
        """List the scopes that have settings: 'core' and every plugin with declared keys."""
        scopes = {"core"}
        for definition in self.config.definitions("plugin."):
            scopes.add(definition.key.split(".")[1])
        return json.dumps(sorted(scopes), ensure_ascii=False)

    def config_get(self, scope: str, key: str) -> str:
        """Read one setting.

        Args:
            scope: 'core' or a plugin name.
            key: the key, with or without the scope prefix (e.g. 'agent.max_tool_turns').
        """
        full = self._full_key(scope, key)
        rows = [r for r in self._rows(full) if r["key"] == full]
        if not rows:
            raise ToolError(f"unknown setting {full!r}; list keys with config_list_keys")
        return json.dumps(rows[0], ensure_ascii=False, default=str)

    def config_set(self, scope: str, key: str, value: str) -> str:
        """Change one setting; the value is validated against the setting's type.

        Args:
            scope: 'core' or a plugin name.
            key: the key, with or without the scope prefix.
            value: the new value as text (numbers, true/false, durations like 30s are parsed).
        """
        full = self._full_key(scope, key)
        self._guard(full, "config_set")
        typed = self.config.set(full, value)
        definition = self.config.definition(full)
        note = " (takes effect after a restart)" if definition and definition.restart_required else ""
        shown = "****" if definition and definition.secret else typed
        return f"{full} = {shown}{note}"

    def config_list_keys(self, scope: str, prefix: str = "") -> str:
        """List the keys of a scope (optionally only those starting with prefix) and their values."""
        rows = self._rows(self._full_key(scope, prefix) if prefix else self._prefix(scope))
        return json.dumps({r["key"]: r["value"] for r in rows}, ensure_ascii=False, default=str)

    def config_get_defs(self, scope: str, prefix: str = "") -> str:
        """Describe the settings of a scope: type, default, options, range, description."""
        full = self._full_key(scope, prefix) if prefix else self._prefix(scope)
        defs = [d.to_dict() for d in self.config.definitions(full)]
        for d in defs:
            if d.get("secret"):
                d["default"] = None
        return json.dumps(defs, ensure_ascii=False, default=str)

    def config_dump(self) -> str:
        """Every setting with its value and where it comes from (secrets masked)."""
        return json.dumps(self._rows(""), ensure_ascii=False, default=str)

    def config_batch_set(self, items: list[dict[str, str]]) -> str:
        """Change several settings at once; all are validated first, then written.

        Args:
            items: objects with 'scope', 'key' and 'value'.
        """
        planned: list[tuple[str, str]] = []
        for index, item in enumerate(items):
            try:
                full = self._full_key(str(item["scope"]), str(item["key"]))
                value = str(item["value"])
            except KeyError as exc:
                raise ToolError(f"items[{index}] lacks {exc.args[0]!r}; each item needs scope, key and value") from None
            try:
                self._guard(full, "config_batch_set")
                self.config.validate(full, value)  # validate everything before writing anything
            except HomeAgentError as exc:
                raise ToolError(f"items[{index}]: {exc}; nothing was changed") from None
            planned.append((full, value))
        for full, value in planned:
            self.config.set(full, value)
        return f"{len(planned)} settings changed: {', '.join(k for k, _ in planned)}"


def make_plugin() -> CfgMgr:
    return CfgMgr()
