"""In-memory protocol connection for testing out-of-process plugins (``ProcHarness``).

Part of the test kit; import it from :mod:`homeagent_sdk.testing`.
"""

from __future__ import annotations

import asyncio
import importlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from homeagent_sdk.errors import PluginError
from homeagent_sdk.types import StageContext, ToolCall, ToolResult

__all__ = ["ProcHarness"]


class ProcHarness:
    """Runs an out-of-process plugin object over an in-memory protocol connection.

    The plugin side is the SDK's real child runtime (what ``homeagent_sdk.proc.serve`` runs);
    frames travel as NDJSON bytes between two protocol peers on the test's event loop, so
    arguments and results are serialised exactly as over a pipe. The host side answers the
    ``core`` methods (registration, own settings, data dir) and records everything; other
    host services answer with an error naming the method.

    After :meth:`start`: ``tools`` (name -> definition), ``stages`` (stage -> scope),
    ``outputs``, ``inputs``, ``settings``, ``requests`` (every plugin -> host call).
    """

    __test__ = False

    def __init__(self, plugin: object, *, name: str = "plugin", data_dir: Path | str | None = None) -> None:
        self.plugin = plugin
        self.name = name
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="proc-harness-"))
        self._own_dir = data_dir is None
        self.tools: dict[str, dict[str, Any]] = {}
        self.stages: dict[str, str] = {}
        self.outputs: dict[str, dict[str, Any]] = {}
        self.inputs: dict[str, dict[str, Any]] = {}
        self.setting_defs: dict[str, dict[str, Any]] = {}
        self.settings: dict[str, Any] = {}
        self.auto_restart: bool | None = None
        self.requests: list[tuple[str, Any]] = []
        self.runtime: Any = None
        self.host_peer: Any = None

    async def start(self, config: dict[str, Any] | None = None) -> ProcHarness:
        """Connect, handshake, ``plugin.init`` and ``plugin.start`` (the plugin registers now)."""
        wire = importlib.import_module("homeagent_sdk.proc.wire")
        runtime_mod = importlib.import_module("homeagent_sdk.proc.runtime")
        loop = asyncio.get_running_loop()
        self.runtime = runtime_mod.ChildRuntime(self.plugin)
        child_peer = wire.Peer(lambda data: loop.call_soon(self.host_peer.feed, data), label="plugin")
        self.host_peer = wire.Peer(
            lambda data: loop.call_soon(child_peer.feed, data), self._handlers(), label="host"
        )
        self.runtime.attach(child_peer)
        hello = await self.host_peer.call(
            "handshake", {"protocol": wire.PROTOCOL_VERSION, "core_version": "test", "plugin_name": self.name},
            timeout=10,
        )
        if hello.get("protocol") != wire.PROTOCOL_VERSION:
            raise PluginError(f"plugin speaks protocol {hello.get('protocol')}", plugin_name=self.name)
        await self.host_peer.call("plugin.init", {"name": self.name, "config": dict(config or {})}, timeout=30)
        await self.host_peer.call("plugin.start", None, timeout=30)
        return self

    def _handlers(self) -> dict[str, Callable[[Any], Any]]:
        def record(method: str, fn: Callable[[dict[str, Any]], Any]) -> Callable[[Any], Any]:
            async def handler(params: Any) -> Any:
                self.requests.append((method, params))
                return fn(params or {})

            return handler

        def unavailable(method: str) -> Callable[[Any], Any]:
            async def handler(params: Any) -> Any:
                self.requests.append((method, params))
                raise LookupError(f"{method}: not available in the in-memory plugin harness; test it with `agent`")

            return handler

        def setting_set(p: dict[str, Any]) -> None:
            self.settings[p["key"]] = p.get("value")

        handlers: dict[str, Callable[[Any], Any]] = {
            "tool.register": record("tool.register", lambda p: self.tools.__setitem__(p["name"], p.get("def") or {})),
            "stage.register": record(
                "stage.register", lambda p: self.stages.__setitem__(p["stage"], p.get("scope") or "global")
            ),
            "output.register": record(
                "output.register", lambda p: self.outputs.__setitem__(p["name"], p.get("def") or {})
            ),
            "input.register": record(
                "input.register", lambda p: self.inputs.__setitem__(p["name"], p.get("def") or {})
            ),
            "settings.registerDef": record("settings.registerDef", self._define),
            "settings.get": record("settings.get", lambda p: {"value": self.settings.get(p.get("key", ""))}),
            "settings.set": record("settings.set", setting_set),
            "settings.list": record(
                "settings.list",
                lambda p: {
                    "keys": sorted(k for k in self.settings if k.startswith(p.get("prefix") or "")),
                    "values": {k: v for k, v in self.settings.items() if k.startswith(p.get("prefix") or "")},
                },
            ),
            "settings.dataDir": record("settings.dataDir", lambda p: {"dir": str(self.data_dir)}),
            "lifecycle.autoRestart": record(
                "lifecycle.autoRestart", lambda p: setattr(self, "auto_restart", bool(p.get("enabled", True)))
            ),
            "events.subscribe": record("events.subscribe", lambda p: None),
            "events.unsubscribe": record("events.unsubscribe", lambda p: None),
        }
        for method in ("io.injectText", "io.injectTextNoMem", "io.injectInterrupt", "io.injectMedia",
                       "memory.recall", "memory.commit", "doc.query", "doc.insert", "knowledge.search",
                       "llm.chat", "textmemory.append"):
            handlers[method] = unavailable(method)
        return handlers

    def _define(self, params: dict[str, Any]) -> None:
        definition = dict(params.get("def") or {})
        key = str(definition.get("key", ""))
        self.setting_defs[key] = definition
        self.settings.setdefault(key, definition.get("default"))

    async def call_tool(self, name: str, /, **arguments: Any) -> Any:
        """``tool.invoke``; returns the plugin's result (raises ``RemoteError`` on an error answer)."""
        answer = await self.host_peer.call("tool.invoke", {"name": name, "args": arguments}, timeout=30)
        return answer.get("result") if isinstance(answer, dict) else answer

    async def run_stage(
        self, stage: str, ctx: StageContext, *, call: ToolCall | None = None, result: ToolResult | None = None
    ) -> dict[str, Any]:
        """``stage.invoke``: applies the plugin's changes to ``ctx`` / ``call`` / ``result``; returns the answer."""
        params: dict[str, Any] = {"stage": stage, "ctx": ctx.to_dict()}
        if call is not None:
            params["call"] = call.to_dict()
        if result is not None:
            params["result"] = result.to_dict()
        answer: dict[str, Any] = await self.host_peer.call("stage.invoke", params, timeout=30)
        changed = answer.get("changed") or {}
        if changed:
            updated = StageContext.from_dict({**ctx.to_dict(), **changed})
            for key in changed:
                setattr(ctx, key, getattr(updated, key))
        if call is not None and "call" in answer:
            call.arguments = dict(answer["call"].get("arguments") or {})
        if result is not None and "result" in answer:
            result.result = answer["result"].get("result", result.result)
            result.success = bool(answer["result"].get("success", result.success))
        return answer

    async def send(self, channel: str, payload: str, meta: dict[str, Any] | None = None, type: str = "text") -> Any:
        """``output.invoke`` on one of the plugin's output channels."""
        args = {"payload": payload, "type": type, "meta": dict(meta or {})}
        return await self.host_peer.call("output.invoke", {"channel": channel, "args": args}, timeout=30)

    async def stop(self) -> None:
        """``plugin.stop`` (runs the plugin's ``shutdown``) and close both ends."""
        if self.host_peer is not None and self.host_peer.closed is None:
            await self.host_peer.call("plugin.stop", None, timeout=10)
            async with asyncio.timeout(5):
                await self.runtime.done.wait()
            self.host_peer.close(ConnectionResetError("harness stopped"))
            self.runtime.peer.close(ConnectionResetError("harness stopped"))
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
