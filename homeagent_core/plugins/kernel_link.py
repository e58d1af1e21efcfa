"""Where a proc plugin's registrations go: the kernel's registries, or private ones.

:class:`KernelLink` is the single adapter between out-of-process plugins and the kernel's
registries (tools, channels, io); without a kernel (tests, ``hmapdev run``) it keeps private
registries, so a plugin starts the same way in both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from homeagent_sdk.types import ChannelDef, ToolDef

if TYPE_CHECKING:
    from homeagent_core.plugins.privileged import KernelAccess

__all__ = ["KernelLink"]


class KernelLink:
    """Where a proc plugin's registrations go: the kernel's registries, or private ones."""

    def __init__(self, kernel: Any = None, plugin: str = "") -> None:
        if kernel is None or getattr(kernel, "tools", None) is None:
            from homeagent_core.agent.channels import ChannelRegistry
            from homeagent_core.agent.tools import ToolRegistry

            self.kernel = None
            self.tools: Any = ToolRegistry()
            self.channels: Any = ChannelRegistry()
            self.io: Any = None
        else:
            self.kernel = kernel
            self.tools = kernel.tools
            self.channels = kernel.channels
            io_for = getattr(kernel, "io_for", None)
            # Out-of-process plugins inject as themselves, clamped to interrupt level L3, within a door's share.
            if callable(io_for) and plugin:
                self.io = io_for(plugin, external=True, shared_door=True)
            else:
                self.io = getattr(kernel, "io", None)

    @classmethod
    def for_sdk(cls, sdk: Any, plugin: str = "") -> KernelLink:
        kernel: KernelAccess | None = getattr(getattr(sdk, "services", None), "kernel", None)
        return cls(kernel, plugin)

    def add_tool(self, tool: ToolDef, plugin: str) -> None:
        self.tools.add(tool, plugin=plugin)

    def add_output(self, channel: ChannelDef, plugin: str) -> None:
        stored = self.channels.add_output(channel, plugin)
        for tool in self.channels.tools_for(stored.name):
            if tool.name not in self.tools:
                self.tools.add(tool, plugin=plugin)

    def add_input(self, channel: ChannelDef, plugin: str) -> None:
        self.channels.add_input(channel, plugin)

    def tool_names(self, plugin: str) -> list[str]:
        return [t.name for t in self.tools.tools() if t.plugin == plugin]

    def detach(self, plugin: str) -> None:
        detach = getattr(self.kernel, "detach_plugin", None)
        if callable(detach):
            detach(plugin)
            return
        self.channels.remove_plugin(plugin)
        self.tools.remove_plugin(plugin)
