"""The privileged accessors: what built-in plugins may use of the kernel, the plugin host and the supervisor.

A privileged plugin (a built-in, a core plugin, the core's wrappers of out-of-process, Lua and
skill plugins) gets ``sdk.services``; its ``kernel``, ``host`` and ``supervisor`` are typed by
these protocols, so a built-in is type-checked against exactly this surface and never needs to
import the kernel (the ``builtin`` import contract forbids it). Third-party plugins get the
plain SDK (``homeagent_sdk.api``) and none of this.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from homeagent_core.agent.loop import InputHost

if TYPE_CHECKING:
    import asyncio

    import pluggy

    from homeagent_core.agent.approvals import Approvals
    from homeagent_core.agent.channels import ChannelRegistry
    from homeagent_core.agent.people import PeopleRegistry
    from homeagent_core.agent.policy import ToolPolicy
    from homeagent_core.agent.prompt import PromptBuilder
    from homeagent_core.agent.reply import Reply
    from homeagent_core.agent.residents import Residents
    from homeagent_core.agent.subagents import SubAgents
    from homeagent_core.agent.tools import ToolRegistry
    from homeagent_core.agent.turn import Turn
    from homeagent_core.plugins.manager import PluginInfo
    from homeagent_sdk.api import IOAPI
    from homeagent_sdk.types import InjectOptions, Principal

__all__ = ["KernelAccess", "PluginHostAccess", "RightsAccess", "RunningProcPlugin", "SupervisorAccess"]

R = TypeVar("R")


class KernelAccess(InputHost, Protocol):
    """The running kernel, as built-ins use it: registries, inputs, turns, sub-agents, status.

    Where inputs go (``make_item``, ``submit``) is the kernel's :class:`InputHost`.
    """

    @property
    def tools(self) -> ToolRegistry: ...

    @property
    def channels(self) -> ChannelRegistry: ...

    @property
    def residents(self) -> Residents: ...

    @property
    def children(self) -> SubAgents: ...

    @property
    def prompt(self) -> PromptBuilder: ...

    @property
    def provider(self) -> Any:
        """The model: a ``ProviderManager`` in the daemon, any ``ChatProvider`` in library use."""
        ...

    @property
    def turn(self) -> Turn | None:
        """The turn running now (None when idle)."""
        ...

    def modalities(self) -> frozenset[str] | None: ...

    def io_for(self, source: str, *, external: bool = False, shared_door: bool = False) -> IOAPI: ...

    def submit_self_input(self, text: str) -> asyncio.Future[Reply]: ...

    def open_stream(
        self,
        text: str,
        channel: str = "library",
        *,
        options: InjectOptions | None = None,
        source: str = "library",
        parts: bool = False,
    ) -> AsyncIterator[Any]: ...

    def stop(self) -> int: ...

    def status(self) -> dict[str, Any]: ...


class PluginHostAccess(Protocol):
    """The plugin host, for built-ins that list, inspect or mount plugins (webui, pluginmgr, cli)."""

    @property
    def pm(self) -> pluggy.PluginManager: ...

    def plugins(self) -> list[PluginInfo]: ...

    def plugin_names(self) -> list[str]: ...

    def info(self, name: str) -> PluginInfo | None: ...

    def note_contribution(self, plugin_name: str, kind: str, item: str) -> None: ...

    def register_routes(self, make_registry: Callable[[str], R]) -> dict[str, R]: ...


class RunningProcPlugin(Protocol):
    """One out-of-process plugin as the supervisor runs it."""

    def runtime_info(self) -> dict[str, Any]: ...

    async def stop(self) -> None: ...


class SupervisorAccess(Protocol):
    """The out-of-process plugin supervisor (reload, stop, status)."""

    def get(self, name: str) -> RunningProcPlugin | None: ...

    def detach(self, name: str) -> None: ...

    async def reload(self, name: str) -> None: ...

    async def reload_changed(self) -> list[str]: ...

    def status(self) -> list[dict[str, Any]]: ...


class RightsAccess(Protocol):
    """People, tool policy and approvals (``sdk.services.rights``), for the built-in doors and admin tools.

    A door resolves who is speaking with :meth:`resolve`; ``cfgmgr`` refuses guarded settings
    with :meth:`guard_setting`; the web UI and the CLI list and decide approvals through
    ``approvals``.
    """

    @property
    def people(self) -> PeopleRegistry: ...

    @property
    def policy(self) -> ToolPolicy: ...

    @property
    def approvals(self) -> Approvals: ...

    def resolve(self, source: str, claim: Principal | None, *, self_input: bool = False) -> Principal: ...

    def current(self) -> Principal | None:
        """The principal of the turn (or approved call) running in this task, None outside one."""
        ...

    def guard_setting(self, key: str, writer: str) -> None:
        """Raise ``GuardedSetting`` when ``key`` decides rights and ``writer`` may not change it."""
        ...
