"""A node's own data directory: ``node.json`` (what it is and allows) and its device token.

``node.json`` is written by ``homeagent node join`` and edited by the device's owner; the node is
authoritative for what it allows: the home side only sees the capabilities the node offers.
The token is kept in ``<node data>/token`` with mode 0600 and never printed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from homeagent_sdk._atomic import atomic_write
from homeagent_sdk.errors import ConfigError

__all__ = ["CONFIG_NAME", "DEFAULT_CAPABILITIES", "TOKEN_NAME", "NodeConfig", "default_node_dir"]

CONFIG_NAME = "node.json"
TOKEN_NAME = "token"

#: What a fresh node allows: its status and notifications. ``run``, ``files``, ``clipboard``,
#: ``screenshot`` and ``camera_snap`` stay off until the device's owner enables them.
DEFAULT_CAPABILITIES: dict[str, dict[str, Any]] = {
    "status": {"enabled": True},
    "notify": {"enabled": True},
    "run": {"enabled": False, "commands": {}, "timeout_s": 30, "max_output_bytes": 65536},
    "files": {"enabled": False, "folder": "sandbox", "max_file_bytes": 1048576},
    "clipboard": {"enabled": False},
    "screenshot": {"enabled": False},
    "camera_snap": {"enabled": False},
}


def default_node_dir() -> Path:
    """``$HOMEAGENT_NODE_HOME`` if set, else ``~/.homeagent-node``."""
    env = os.environ.get("HOMEAGENT_NODE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".homeagent-node"


@dataclass
class NodeConfig:
    """The parsed ``node.json`` of one node data directory."""

    folder: Path
    name: str = ""
    url: str = ""
    capabilities: dict[str, dict[str, Any]] = field(default_factory=dict)
    plugins: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.folder / CONFIG_NAME

    @classmethod
    def load(cls, folder: Path) -> NodeConfig:
        """Read ``<folder>/node.json``.

        Raises:
            ConfigError: no such file (the node has not joined), or it is not valid.
        """
        path = folder / CONFIG_NAME
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(
                f"{path} does not exist: this node has not joined a home yet; run "
                "`homeagent node join URL CODE` with a code from `homeagent nodes pair NAME` on the home machine"
            ) from None
        except ValueError as exc:
            raise ConfigError(f"{path} is not valid JSON ({exc}); fix it or join again") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path} must hold a JSON object")
        caps = raw.get("capabilities", {})
        plugins = raw.get("plugins", [])
        if not isinstance(caps, dict) or not all(isinstance(v, dict) for v in caps.values()):
            raise ConfigError(f'{path}: "capabilities" must map each capability name to an object')
        if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
            raise ConfigError(f'{path}: "plugins" must be a list of "module:factory" strings')
        return cls(folder, str(raw.get("name") or ""), str(raw.get("url") or ""), caps, plugins)

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        body = {"name": self.name, "url": self.url, "capabilities": self.capabilities, "plugins": self.plugins}
        atomic_write(self.path, json.dumps(body, indent=2) + "\n", mode=0o600)

    def section(self, capability: str) -> dict[str, Any] | None:
        """The settings of ``capability`` when it is enabled, else None."""
        section = self.capabilities.get(capability)
        return section if section is not None and section.get("enabled") else None

    # ------------------------------------------------------------------ token

    def token(self) -> str:
        """The device token.

        Raises:
            ConfigError: no token (join first).
        """
        try:
            return (self.folder / TOKEN_NAME).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise ConfigError(f"{self.folder / TOKEN_NAME} is missing; join again with `homeagent node join`") from None

    def save_token(self, token: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(self.folder / TOKEN_NAME, token + "\n", mode=0o600)
