"""The scoped SDK each plugin's ``startup(sdk)`` receives.

Every plugin gets its own object: its settings table (``plugin.<name>.*``), its data dir
``<data>/plugin_data/<name>/``, a logger named after it, and the shared services (input
injection, events, memory, documents, knowledge, people, the model). A service the running
agent does not have raises a :class:`HomeAgentError` saying which one and why, instead of
silently doing nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.datadir import plugin_data_dir
from homeagent_sdk.errors import HomeAgentError

if TYPE_CHECKING:
    from homeagent_core.config import ConfigStore
    from homeagent_core.events import EventBus
    from homeagent_core.memory.system import MemorySystem
    from homeagent_core.plugins.privileged import KernelAccess, PluginHostAccess, RightsAccess, SupervisorAccess
    from homeagent_sdk.api import IOAPI, LLMAPI, DocAPI, KnowledgeAPI, MediaAPI, MemoryAPI, SocialAPI

__all__ = ["PluginSettingsView", "ScopedSDK", "Services"]


class PluginSettingsView:
    """A plugin's own settings; keys are relative (``"addr"`` means ``plugin.<name>.addr``)."""

    def __init__(self, plugin: str, config: ConfigStore) -> None:
        self._prefix = f"plugin.{plugin}."
        self._config = config

    def _key(self, key: str) -> str:
        return key if key.startswith(self._prefix) else self._prefix + key

    def get(self, key: str, default: Any = None) -> Any:
        return self._config.get(self._key(key), default)

    def set(self, key: str, value: Any) -> None:
        self._config.set(self._key(key), value)

    def all(self) -> dict[str, Any]:
        n = len(self._prefix)
        return {k[n:]: v for k, v in self._config.items(self._prefix).items()}


class _Missing:
    """Stands in for a service this agent does not run; any use raises a clear error."""

    def __init__(self, service: str, reason: str) -> None:
        self._service, self._reason = service, reason

    def __getattr__(self, attr: str) -> Any:
        raise HomeAgentError(f"sdk.{self._service}.{attr}: {self._service} is not available here ({self._reason})")


def _service(service: str, value: Any) -> Any:
    """``value``, or a :class:`_Missing` stand-in when this agent does not run the service."""
    return value if value is not None else _Missing(service, "the kernel is not running")


@dataclass
class Services:
    """The shared services the app hands to plugins (None = not running in this agent)."""

    config: ConfigStore
    bus: EventBus
    data_dir: Path
    io: Any = None
    memory: Any = None
    doc: Any = None
    knowledge: Any = None
    social: Any = None
    media: Any = None
    llm: Any = None
    #: The running kernel (tools, channels, io) for privileged wrappers of proc/Lua/skill plugins.
    kernel: KernelAccess | None = None
    #: Where network-facing built-ins listen, from ``homeagent serve --host/--port``.
    #: False in library use without ``web=True``: built-ins open no network listeners.
    listen_network: bool = True
    listen_host: str | None = None
    listen_port: int | None = None
    #: Extra status for status pages (memory counts, tiers): a callable returning a dict.
    status_extra: Any = None
    #: The out-of-process plugin supervisor (pluginmgr, status pages).
    supervisor: SupervisorAccess | None = None
    #: The plugin host, for built-ins that list or reload plugins (webui, pluginmgr).
    host: PluginHostAccess | None = None
    #: Starts and stops installed packages while running (:class:`~homeagent_core.live.LivePlugins`).
    live: Any = None
    #: The durable conversation log (``TextLog``) for built-ins that show the conversation
    #: (the web UI's chat history); None without memory.
    conversation_log: Any = None
    #: The media store itself (records, sizes, blobs), for the senses built-in; None without memory.
    media_store: Any = None
    #: The opened memory layers, for the core ``memory`` and ``knowledge`` plugins; None without memory.
    memory_system: MemorySystem | None = None
    #: People, tool policy, guarded settings and approvals (``homeagent_core.agent.approvals.Rights``).
    rights: RightsAccess | None = None


class _Events:
    def __init__(self, bus: EventBus, plugin: str) -> None:
        self._bus, self._plugin = bus, plugin

    def publish(self, name: str, data: dict[str, Any]) -> None:
        self._bus.publish(name, data, source=self._plugin)

    def subscribe(self, callback: Any, *names: str) -> Any:
        return self._bus.subscribe(callback, *names, label=self._plugin)


class ScopedSDK:
    """What one plugin sees; built by :meth:`for_plugin`."""

    def __init__(self, name: str, services: Services, *, privileged: bool = False, external: bool = True) -> None:
        self.name = name
        self.data_dir = plugin_data_dir(services.data_dir, name)
        self.log = logging.getLogger(f"homeagent.plugin.{name}")
        self.settings = PluginSettingsView(name, services.config)
        self.events = _Events(services.bus, name)
        io = services.kernel.io_for(name, external=external) if services.kernel is not None else services.io
        self.io: IOAPI = _service("io", io)
        self.memory: MemoryAPI = _service("memory", services.memory)
        self.doc: DocAPI = _service("doc", services.doc)
        self.knowledge: KnowledgeAPI = _service("knowledge", services.knowledge)
        self.social: SocialAPI = _service("social", services.social)
        self.media: MediaAPI = _service("media", services.media)
        self.llm: LLMAPI = _service("llm", services.llm)
        # Built-ins are granted the whole config store explicitly (cfgmgr, webui settings).
        self.config: ConfigStore | None = services.config if privileged else None
        self.services = services if privileged else None

    @classmethod
    def for_plugin(cls, name: str, services: Services, *, privileged: bool = False, external: bool = True) -> ScopedSDK:
        return cls(name, services, privileged=privileged, external=external)
