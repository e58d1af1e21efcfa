"""__plugin_name__: an out-of-process HomeAgent plugin (tool, stage handler, output channel)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from homeagent_sdk import ChannelDef, ChannelRegistry, PluginSDK, StageContext, ToolRegistryProtocol, hookimpl


class Plugin:
    """Greets people, formats :wave: in replies, and keeps an outbox file."""

    name = "__plugin_name__"

    def __init__(self) -> None:
        self.outbox = Path("outbox.txt")

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.__ident___greet)

    async def __ident___greet(self, who: str) -> str:
        """Greet someone by name."""
        return f"Hello, {who}!"

    @hookimpl
    def register_output_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChannelDef(name="__ident___outbox", description="appends messages to outbox.txt", send=self.send))

    def send(self, payload: str, meta: dict[str, Any], type: str) -> dict[str, Any]:
        with self.outbox.open("a", encoding="utf-8") as fh:
            fh.write(payload + "\n")
        return {"status": "sent", "bytes": len(payload.encode("utf-8"))}

    @hookimpl
    def startup(self, sdk: PluginSDK) -> None:
        self.outbox = Path(sdk.data_dir) / "outbox.txt"

    @hookimpl
    async def before_output(self, ctx: StageContext) -> None:
        ctx.final_text = ctx.final_text.replace(":wave:", "👋")
