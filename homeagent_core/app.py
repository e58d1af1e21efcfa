"""Assembles a running HomeAgent from a data directory: the only place parts are wired.

``App`` owns the config store, the event bus and the plugin host, starts plugins in the
discovery order, hands each its scoped SDK, and stops everything in reverse order. The
daemon (``homeagent serve``) and the library ``Agent`` both run an ``App``.
"""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import os
import signal
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core import loopwatch
from homeagent_core.agent.approvals import Approvals, Rights
from homeagent_core.agent.kernel import Kernel, KernelSettings
from homeagent_core.agent.people import PeopleRegistry, default_owner_name
from homeagent_core.agent.settings import ResidentLimits
from homeagent_core.config import ConfigStore
from homeagent_core.datadir import prepare_data_dir
from homeagent_core.events import EventBus
from homeagent_core.live import LivePlugins
from homeagent_core.memory.facades import LLMFacade
from homeagent_core.plugins.manager import HookHandler, PluginHost, create_plugin_manager
from homeagent_core.plugins.registries import AdapterFolders, EmbeddingFactories, PluginSettings
from homeagent_core.plugins.sdk import ScopedSDK, Services
from homeagent_sdk.api import ChatProvider
from homeagent_sdk.embeddings import EmbeddingProvider
from homeagent_sdk.errors import HomeAgentError, PluginValidationError
from homeagent_sdk.types import Event, InjectOptions, Principal

if TYPE_CHECKING:
    from homeagent_core.memory.system import MemorySystem

__all__ = ["MEMORY_PLUGINS", "App", "configure_logging"]

log = logging.getLogger(__name__)

#: Core plugins registered whenever memory is on, whatever the list of built-ins says: they
#: contribute memory's tools and heartbeats. Disabling ``memory`` (the first) runs the agent
#: without memory, and so without the others.
MEMORY_PLUGINS: tuple[str, ...] = ("homeagent_core.memory.plugin", "homeagent_core.memory.knowledge.tools")


def configure_logging(data_dir: Path | None, level: str = "info") -> None:
    """Log to stderr and, with a data dir, to ``<data>/log/homeagent.log`` (rotated)."""
    numeric = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING}.get(level, logging.ERROR)
    root = logging.getLogger()
    root.setLevel(numeric)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not any(getattr(h, "_homeagent", False) for h in root.handlers):
        stream = logging.StreamHandler()
        stream.setFormatter(fmt)
        stream._homeagent = True  # type: ignore[attr-defined]
        root.addHandler(stream)
        if data_dir is not None:
            file = logging.handlers.RotatingFileHandler(
                data_dir / "log" / "homeagent.log", maxBytes=10 * 1024 * 1024, backupCount=5, encoding="utf-8"
            )
            file.setFormatter(fmt)
            file._homeagent = True  # type: ignore[attr-defined]
            root.addHandler(file)


class App:
    """One HomeAgent instance over one data directory."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        load_entrypoints: bool = True,
        builtins: Sequence[str] | None = None,
        plugins: Iterable[object] = (),
        block: Iterable[str] = (),
        overrides: dict[str, Any] | None = None,
        provider: ChatProvider | None = None,
        memory: bool = True,
        embedder: EmbeddingProvider | None = None,
        local_plugins: bool = True,
    ) -> None:
        self.data_dir = prepare_data_dir(data_dir)
        self.config = ConfigStore(self.data_dir / "config.db")
        self.bus = EventBus()
        self.host: PluginHost = create_plugin_manager(
            load_entrypoints=load_entrypoints,
            builtins=builtins,
            plugins=plugins,
            block=[*block, *self.config.disabled_plugins()],
        )
        self.supervisor: Any = None
        if memory:
            for module_path in MEMORY_PLUGINS:
                if module_path != MEMORY_PLUGINS[0] and self.host.pm.get_plugin("memory") is None:
                    break  # the other core plugins work on what memory opens
                self.host.load_module(module_path, kind="core")
        if local_plugins:
            self._discover_local_plugins()
        self.overrides = dict(overrides or {})
        self.provider: Any = provider
        self.memory: MemorySystem | None = None
        # Memory runs only with its plugin: HOMEAGENT_DISABLE_PLUGINS=memory turns all of it off.
        self.with_memory = memory and self.host.pm.get_plugin("memory") is not None
        self.embedder = embedder
        self.kernel: Kernel | None = None
        self.people: PeopleRegistry | None = None
        self.rights: Rights | None = None
        self.services = Services(
            config=self.config, bus=self.bus, data_dir=self.data_dir, host=self.host, supervisor=self.supervisor
        )
        self.services.live = LivePlugins(self)
        self.settings: dict[str, PluginSettings] = {}
        self.embedding_factories: dict[str, EmbeddingFactories] = {}
        self.adapter_folders: dict[str, AdapterFolders] = {}
        self._unsubscribe: list[Any] = []
        self.started = False

    # ------------------------------------------------------------------ lifecycle

    def _discover_local_plugins(self) -> None:
        """Plugins installed in the data dir: out-of-process, Lua, then skills (DESIGN §4 order)."""
        from homeagent_core.plugins.lua_discovery import discover_lua_plugins
        from homeagent_core.plugins.skills import SkillsPlugin, discover_skills

        host = self.host
        from homeagent_core.plugins.proc import discover_proc_plugins
        from homeagent_core.plugins.supervisor import Supervisor

        disabled = self.config.disabled_plugins()
        self.supervisor = Supervisor(is_disabled=lambda name: name in self.config.disabled_plugins())
        errors: dict[str, str] = {}
        procs = discover_proc_plugins(self.data_dir, supervisor=self.supervisor, disabled=disabled, errors=errors)
        for name, error in errors.items():
            host.record_failure(name, error, kind="proc")
        found: list[tuple[str, object, str]] = [(name, plugin, "proc") for name, plugin in procs]
        lua = discover_lua_plugins(
            self.data_dir, on_error=lambda name, exc: host.record_failure(name, exc, kind="lua")
        )
        found += [(name, plugin, "lua") for name, plugin in lua]
        for name, plugin, kind in found:
            if host.pm.is_blocked(name):
                continue
            try:
                version = str(getattr(getattr(plugin, "manifest", None), "version", "") or "")
                host.register(plugin, name=name, kind=kind, version=version)
            except PluginValidationError as exc:
                host.record_failure(name, exc, kind=kind)
        index = discover_skills(self.data_dir, disabled=self.config.disabled_plugins())
        if not host.pm.is_blocked("skills"):
            host.register(SkillsPlugin(index), name="skills", kind="skill")

    def declare_settings(self) -> None:
        """Run ``register_settings`` so every plugin key is known (also used by the CLI)."""
        self.settings = self.host.register_settings(lambda name: PluginSettings(name, self.config, self.host))

    def register_contributions(self) -> None:
        """Collect what plugins contribute besides tools and channels (also used by the CLI)."""
        self.embedding_factories = self.host.register_embedding_providers(
            lambda name: EmbeddingFactories(name, host=self.host)
        )
        self.adapter_folders = self.host.register_adapters(AdapterFolders)

    def kernel_settings(self) -> KernelSettings:
        """Kernel tunables from ``core.agent.*`` / ``core.llm.*``."""
        get = self.config.get
        window = get(f"core.llm.sources.{get('core.llm.provider')}.context_window") or 0
        return KernelSettings(
            max_tool_turns=get("core.agent.max_tool_turns"),
            tool_timeout=get("core.agent.tool_timeout"),
            stage_timeout=get("core.agent.stage_timeout"),
            max_context_size=get("core.agent.max_context_size"),
            child_max_depth=get("core.agent.child_max_depth"),
            child_max_per_turn=get("core.agent.child_max_per_turn"),
            residents=ResidentLimits(
                max_residents=get("core.agent.residents.max"),
                turns_per_hour=get("core.agent.residents.turns_per_hour"),
                tokens_per_hour=get("core.agent.residents.tokens_per_hour"),
                max_tool_turns=get("core.agent.residents.max_tool_turns"),
                context_size=get("core.agent.residents.context_size"),
                report=get("core.agent.residents.report"),
            ),
            offload_after=get("core.agent.offload_after"),
            offload_max_inputs=get("core.agent.offload_max_inputs"),
            system_prompt=get("core.agent.system_prompt"),
            personal_prompt=get("core.agent.personal_prompt"),
            temperature=get("core.llm.temperature"),
            max_tokens=get("core.llm.max_tokens"),
            context_window=int(window) if window else KernelSettings.context_window,
        )

    async def _open_memory(self) -> None:
        from homeagent_core.memory.facades import (
            DocFacade,
            KnowledgeFacade,
            MediaFacade,
            MemoryFacade,
            SocialFacade,
        )
        from homeagent_core.memory.system import MemorySystem

        factories = {n: f for registry in self.embedding_factories.values() for n, f in registry.factories.items()}
        self.memory = await MemorySystem.open(
            self.data_dir, self.config, extra_factories=factories, embedder=self.embedder
        )
        self.services.memory = MemoryFacade(self.memory)
        self.services.doc = DocFacade(self.memory)
        self.services.knowledge = KnowledgeFacade(self.memory)
        self.services.social = SocialFacade(self.memory)
        self.services.conversation_log = self.memory.textlog
        self.services.media = MediaFacade(self.memory)
        self.services.media_store = self.memory.media
        self.services.memory_system = self.memory
        self.services.status_extra = lambda: {"memory": self.memory.status() if self.memory else None}

    async def open_memory(self) -> MemorySystem:
        """Open this data directory's memory without starting plugins or the kernel.

        For offline use of the memory tools (``homeagent mcp serve``); :meth:`stop` closes it.

        Raises:
            HomeAgentError: memory is off (``memory=False``, or the ``memory`` plugin is disabled).
        """
        if not self.with_memory:
            raise HomeAgentError("memory is off in this agent (the memory plugin is disabled or memory=False)")
        if self.memory is None:
            self.declare_settings()
            self.register_contributions()
            await self._open_memory()
        assert self.memory is not None
        return self.memory

    def _build_kernel(self) -> Kernel:
        if self.provider is None:
            from homeagent_core.providers import ProviderManager, deploy_bundled_adapters

            deploy_bundled_adapters(self.data_dir)
            folders = [f for registry in self.adapter_folders.values() for f in registry.folders]
            self.provider = ProviderManager.from_config(self.config, self.data_dir, adapter_dirs=folders)
        return Kernel(
            self.host,
            self.bus,
            self.provider,
            settings=self.kernel_settings(),
            memory=self.memory,
            data_dir=self.data_dir,
        )

    async def _memory_knows_people(self) -> None:
        """Tell memory who the owner is and whose turn runs; the graph's rows from before people become the owner's."""
        from homeagent_core.agent.approvals import CURRENT_PRINCIPAL

        assert self.memory is not None and self.people is not None
        owner = self.people.owner()
        self.memory.owner_name = owner.name if owner is not None else ""
        self.memory.current_principal = CURRENT_PRINCIPAL.get
        await self.memory.claim_graph_for_owner()

    def _open_rights(self) -> Rights:
        """The person registry (owner created at first start), tool policy and approvals."""
        people = PeopleRegistry.open(self.data_dir)
        people.ensure_owner(default_owner_name())
        self.people = people

        def timeout() -> float:
            return float(self.config.get("core.people.approval_timeout") or 600)

        async def deliver(principal: Principal, channel: str, text: str) -> None:
            kernel = self.kernel
            if kernel is None or not kernel.started:
                return
            options = InjectOptions(principal=principal)
            kernel.submit(kernel.make_item(text, channel, source="approvals", options=options))

        def is_external(source: str) -> bool:
            info = self.host.info(source)
            return info is not None and info.kind not in ("builtin", "core")

        return Rights(people, Approvals(people, self.bus, timeout=timeout, deliver=deliver), is_external=is_external)

    def sdk_for(self, name: str) -> ScopedSDK:
        info = self.host.info(name)
        kind = info.kind if info is not None else ""
        # Built-ins, the core plugins (memory, knowledge) and the core's own wrappers of
        # Lua/skill/out-of-process plugins get the privileged services (the wrapped code itself
        # stays sandboxed); everything that is not built in is clamped to interrupt level L3.
        privileged = kind in ("builtin", "core", "lua", "skill", "proc")
        external = kind not in ("builtin", "core")
        return ScopedSDK.for_plugin(name, self.services, privileged=privileged, external=external)

    async def start(self) -> None:
        """Declare settings, start every plugin, subscribe ``on_event`` impls."""
        if self.started:
            return
        self.declare_settings()
        for key, value in self.overrides.items():
            self.config.set(key, value)
        self.register_contributions()
        if self.with_memory:
            await self._open_memory()
        self.kernel = self._build_kernel()
        self.services.kernel = self.kernel
        self.rights = self._open_rights()
        self.kernel.rights = self.rights
        if self.memory is not None:
            await self._memory_knows_people()
        self.services.rights = self.rights
        self.services.llm = LLMFacade(self.provider)
        await self.kernel.start()
        await self.host.startup(self.sdk_for)
        await self.rights.approvals.recover()
        for handler in self.host.event_handlers():
            self._unsubscribe.append(self.bus.subscribe(self._deliverer(handler), label=handler.plugin_name))
        self.started = True
        self.bus.publish("system", {"type": "started", "plugins": self.host.plugin_names()})

    def _deliverer(self, handler: HookHandler) -> Callable[[Event], Awaitable[None]]:
        """The bus callback that hands each event to one plugin's ``on_event``."""

        def deliver(event: Event) -> Awaitable[None]:
            return self.host.deliver_event(handler, event)

        return deliver

    async def stop(self) -> None:
        """Shut plugins down in reverse start order, then close the bus and the config."""
        if not self.started:
            if self.memory is not None:  # opened alone (open_memory)
                await self.memory.aclose()
                self.memory = None
            self.config.close()
            return
        self.started = False
        self.bus.publish("system", {"type": "stopping"})
        await self.host.shutdown()
        if self.supervisor is not None:
            await self.supervisor.stop_all()
        if self.rights is not None:
            await self.rights.approvals.aclose()
        if self.kernel is not None:
            await self.kernel.aclose()
        if self.people is not None:
            self.people.close()
        if self.memory is not None:
            await self.memory.aclose()
        if self.provider is not None and hasattr(self.provider, "aclose"):
            await self.provider.aclose()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        await self.bus.aclose()
        self.config.close()

    async def __aenter__(self) -> App:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def status(self) -> dict[str, Any]:
        """What is running: plugins by status."""
        plugins = [p.to_dict() for p in self.host.plugins()]
        return {
            "data_dir": str(self.data_dir),
            "plugins": plugins,
            "started": [p["name"] for p in plugins if p["status"] == "started"],
            "failed": [p["name"] for p in plugins if p["status"] == "failed"],
        }

    async def run_until_signalled(self) -> None:
        """Start, run until SIGINT/SIGTERM, then stop cleanly."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        watch = loopwatch.from_env(loop)  # HOMEAGENT_DEBUG / HOMEAGENT_LOOP_WATCH_MS: log loop stalls
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await self.start()
            status = self.status()
            log.info(
                "HomeAgent running on %s — %d plugins started (%s)%s",
                self.data_dir,
                len(status["started"]),
                ", ".join(status["started"]),
                f"; failed: {', '.join(status['failed'])}" if status["failed"] else "",
            )
            await stop.wait()
            log.info("stopping")
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await self.stop()
            if watch is not None:
                watch.stop()
            log.info("stopped")
