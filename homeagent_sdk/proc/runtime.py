"""The child side of the out-of-process protocol: ``serve(plugin)``.

A Python plugin written for the in-process hooks runs unchanged in its own process::

    from homeagent_sdk import hookimpl
    from homeagent_sdk.proc import serve

    class Weather:
        @hookimpl
        def register_tools(self, registry):
            registry.add(self.weather_now)

        async def weather_now(self, city: str) -> str:
            "Current weather of a city."
            return f"sunny in {city}"

    if __name__ == "__main__":
        serve(Weather())

On ``plugin.start`` the runtime calls the plugin's ``register_*`` hooks with registries that
forward each contribution to the host, declares the stages the plugin implements, then calls
``startup(sdk)`` with a :class:`~homeagent_sdk.proc.facade.RemoteSDK` — the same ``PluginSDK``
shape in-process plugins get, whose calls travel to the host. Handlers may be sync (run in a
worker thread) or ``async def``. A tool or input channel declared with a cleaner
(``ToolDef(cleaner=...)``, ``ChannelDef(cleaner=...)``) is registered with ``has_cleaner: true``
and the host asks for the cleaned text with ``cleaner.invoke`` when it files that tool's output
or that channel's input in memory. stdout carries the protocol only: ``serve`` moves it aside
and points file descriptor 1 at stderr, so a stray ``print`` cannot corrupt the wire.
The process exits after ``plugin.stop`` or when stdin closes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Unpack

import pluggy

from homeagent_sdk import hookspecs
from homeagent_sdk._names import PROJECT_NAME
from homeagent_sdk._version import __version__
from homeagent_sdk.proc.facade import RemoteSDK
from homeagent_sdk.proc.wire import PROTOCOL_VERSION, FrameBatcher, Peer, dumps, loads
from homeagent_sdk.schema import function_schema
from homeagent_sdk.types import (
    STAGES,
    ChannelDef,
    ConfigDef,
    Event,
    StageContext,
    ToolCall,
    ToolDef,
    ToolOptions,
    ToolResult,
)

__all__ = ["STAGES", "ChildRuntime", "serve"]

log = logging.getLogger("homeagent.plugin")

_CTX_FIELDS: tuple[str, ...] = tuple(StageContext.__dataclass_fields__)
_CTX_NAMES = frozenset(_CTX_FIELDS)
_READONLY = frozenset({"phase"})
#: Fields whose values are immutable JSON scalars: compared directly, no snapshot needed.
_SCALAR_FIELDS: tuple[str, ...] = tuple(
    f for f, spec in StageContext.__dataclass_fields__.items() if spec.default_factory is dataclasses.MISSING
)
#: Fields holding lists/dicts a handler may mutate in place: snapshotted as one JSON blob.
_MUTABLE_FIELDS: tuple[str, ...] = tuple(f for f in _CTX_FIELDS if f not in _SCALAR_FIELDS)
_IMMUTABLE = frozenset({str, int, float, bool, type(None)})
#: Tool results sent as they are (no ``to_dict`` to look for).
_JSON_TYPES = frozenset({str, int, float, bool, type(None), dict, list})


_NESTED: dict[str, Any] = {"tool_calls": ToolCall, "tool_results": ToolResult}


def _wire_ctx(raw: dict[str, Any]) -> StageContext:
    """StageContext from its wire form; the generic ``from_dict`` is too slow for every stage.

    The host sends exactly the dataclass fields, so the direct constructor call is tried first;
    unknown keys, nested items with extra keys and attachments take the slower paths.
    """
    try:
        try:
            ctx = StageContext(**raw)
        except TypeError:
            ctx = StageContext(**{k: v for k, v in raw.items() if k in _CTX_NAMES})
        for key, cls in _NESTED.items():
            items = getattr(ctx, key)
            if items:
                try:
                    setattr(ctx, key, [cls(**item) for item in items])
                except TypeError:
                    names = cls.__dataclass_fields__
                    setattr(ctx, key, [cls(**{k: v for k, v in item.items() if k in names}) for item in items])
        if ctx.attachments:
            return StageContext.from_dict(raw)
        return ctx
    except (TypeError, AttributeError):
        return StageContext.from_dict(raw)


def _check_async(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


#: ``_check_async`` answers per callable; bound methods are keyed by their function.
_ASYNC: dict[Any, bool] = {}


def _is_async(fn: Any) -> bool:
    key = getattr(fn, "__func__", fn)
    try:
        return _ASYNC[key]
    except KeyError:
        pass
    except TypeError:  # unhashable callable
        return _check_async(fn)
    answer = _ASYNC[key] = _check_async(fn)
    if len(_ASYNC) > 4096:  # callables made per call (partials, lambdas) must not pile up
        _ASYNC.clear()
    return answer


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await ``fn`` when async, else run it in a worker thread."""
    if _is_async(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(functools.partial(fn, *args, **kwargs))
    if inspect.isawaitable(result):
        result = await result
    return result


class _ToolRegistry:
    """``register_tools`` registry of the child: keeps handlers, sends definitions."""

    def __init__(self, runtime: ChildRuntime) -> None:
        self._rt = runtime

    def add(self, tool: ToolDef | Callable[..., Any], **options: Unpack[ToolOptions]) -> ToolDef:
        if isinstance(tool, ToolDef):
            if tool.handler is None:
                raise TypeError(f"tool {tool.name!r} has no handler; set ToolDef(handler=...)")
            definition = tool.with_options({**options, "name": options.get("name") or None})
        else:
            tool_name = options.get("name") or getattr(tool, "__name__", "")
            if not tool_name or tool_name == "<lambda>":
                raise TypeError("a lambda cannot name a tool: pass name='...' to registry.add()")
            desc, parameters = function_schema(tool, tool_name)
            definition = ToolDef(name=tool_name, description=desc, parameters=parameters, handler=tool)
            definition = definition.with_options({**options, "name": tool_name})
        self._rt.tools[definition.name] = definition
        payload: dict[str, Any] = {"name": definition.name, "def": definition.to_dict()}
        if definition.cleaner is not None:
            self._rt.cleaners[("tool", definition.name)] = definition.cleaner
            payload["has_cleaner"] = True
        self._rt.registrations.append(("tool.register", payload))
        return definition


class _ChannelRegistry:
    def __init__(self, runtime: ChildRuntime, kind: str) -> None:
        self._rt, self._kind = runtime, kind

    def add(self, channel: ChannelDef) -> None:
        if not isinstance(channel, ChannelDef):
            raise TypeError(f"{self._kind} channel registry.add() takes a ChannelDef, got {type(channel).__name__}")
        if self._kind == "output":
            if channel.send is None:
                raise TypeError(f"output channel {channel.name!r} has no send callable; set ChannelDef(send=...)")
            self._rt.outputs[channel.name] = channel
            method = "output.register"
        else:
            method = "input.register"
        payload: dict[str, Any] = {"name": channel.name, "def": channel.to_dict()}
        if self._kind == "input" and channel.cleaner is not None:
            self._rt.cleaners[("input", channel.name)] = channel.cleaner
            payload["has_cleaner"] = True
        self._rt.registrations.append((method, payload))


class _SettingsRegistry:
    def __init__(self, runtime: ChildRuntime) -> None:
        self._rt = runtime

    def add(self, definition: ConfigDef) -> None:
        if not isinstance(definition, ConfigDef):
            raise TypeError(f"register_settings expects ConfigDef objects, got {type(definition).__name__}")
        self._rt.registrations.append(("settings.registerDef", {"def": definition.to_dict()}))


class ChildRuntime:
    """Serves one plugin object over a :class:`Peer`; transport-free, so tests can drive it."""

    def __init__(self, plugin: object) -> None:
        if isinstance(plugin, type):
            raise TypeError(f"serve() got the class {plugin.__qualname__}; pass an instance — did you forget ()?")
        self.plugin = plugin
        self.pm = pluggy.PluginManager(PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.pm.register(plugin, name="plugin")
        self.pm.check_pending()
        self.name = getattr(plugin, "name", "") or type(plugin).__name__
        self.config: dict[str, Any] = {}
        self.tools: dict[str, ToolDef] = {}
        self.outputs: dict[str, ChannelDef] = {}
        #: (scope, name) -> cleaner of a tool ("tool") or an input channel ("input").
        self.cleaners: dict[tuple[str, str], Callable[[str], Any]] = {}
        self.registrations: list[tuple[str, dict[str, Any]]] = []
        self.sdk: RemoteSDK | None = None
        self.done = asyncio.Event()
        self.exit_code = 0
        self._stopped = False
        self.peer: Peer | None = None
        self._stage_impls: dict[str, tuple[Callable[..., Any], tuple[str, ...]] | None] = {}

    def attach(self, peer: Peer) -> None:
        self.peer = peer
        peer.unknown_method = "未实现的 method"
        peer.handlers.update(
            {
                "handshake": self._handshake,
                "plugin.init": self._init,
                "plugin.start": self._start,
                "plugin.stop": self._stop,
                "plugin.ping": self._ping,
                "tool.invoke": self._tool,
                "cleaner.invoke": self._clean,
                "stage.invoke": self._stage,
                "output.invoke": self._output,
                "event.deliver": self._event,
            }
        )

    def _impl(self, hook: str) -> Callable[..., Any] | None:
        impls = getattr(self.pm.hook, hook).get_hookimpls()
        return impls[0].function if impls else None

    # ------------------------------------------------------------------ lifecycle

    async def _ping(self, params: Any) -> dict[str, Any]:
        """Liveness: answered by a task on this loop, so a blocked loop misses the deadline."""
        return {}

    async def _handshake(self, params: Any) -> dict[str, Any]:
        core = int((params or {}).get("protocol", 0) or 0)
        if core != PROTOCOL_VERSION:
            self.exit_code = 3
            asyncio.get_running_loop().call_later(0.05, self.done.set)
            message = (
                f"协议版本不匹配（内核 {core}，插件 {PROTOCOL_VERSION}）——请用配套 hmapdev 重编 "
                f"(protocol mismatch: core speaks {core}, this plugin {PROTOCOL_VERSION}; "
                "rebuild the plugin with the hmapdev matching the core)"
            )
            log.error(message)
            raise RuntimeError(message)
        self.name = (params or {}).get("plugin_name") or self.name
        return {"protocol": PROTOCOL_VERSION, "sdk_version": __version__, "plugin_name": self.name, "pid": os.getpid()}

    async def _init(self, params: Any) -> None:
        params = params or {}
        self.name = params.get("name") or self.name
        self.config = dict(params.get("config") or {})
        configure = getattr(self.plugin, "configure", None)
        if callable(configure):
            await _call(configure, self.name, self.config)

    async def _start(self, params: Any) -> None:
        assert self.peer is not None
        for hook, registry in (
            ("register_settings", _SettingsRegistry(self)),
            ("register_tools", _ToolRegistry(self)),
            ("register_input_channels", _ChannelRegistry(self, "input")),
            ("register_output_channels", _ChannelRegistry(self, "output")),
        ):
            impl = self._impl(hook)
            if impl is not None:
                impl(registry)
        for method, payload in self.registrations:
            await self.peer.call(method, payload)
        scope = str(getattr(self.plugin, "scope", "") or "global")
        for stage in STAGES:
            impl = self._impl(stage)
            if impl is not None:
                stage_scope = str(getattr(impl, "scope", "") or scope)
                await self.peer.call("stage.register", {"stage": stage, "scope": stage_scope})
        if self._impl("on_event") is not None:
            names = getattr(self.plugin, "event_names", None)
            await self.peer.call("events.subscribe", {"types": list(names or [])})
        data_dir = (await self.peer.call("settings.dataDir")) or {}
        settings = (await self.peer.call("settings.list", {"prefix": ""})) or {}
        self.sdk = RemoteSDK(self.peer, self.name, Path(data_dir.get("dir") or "."), settings.get("values") or {})
        self.sdk.plugin_config = self.config
        startup = self._impl("startup")
        if startup is not None:
            await _call(startup, self.sdk)
        await self.peer.call("lifecycle.autoRestart", {"enabled": bool(getattr(self.plugin, "auto_restart", True))})

    async def shutdown(self) -> None:
        """Run the plugin's ``shutdown`` hook once."""
        if self._stopped:
            return
        self._stopped = True
        impl = self._impl("shutdown")
        if impl is not None:
            try:
                await _call(impl)
            except Exception:
                log.exception("shutdown of %s failed", self.name)

    async def _stop(self, params: Any) -> None:
        await self.shutdown()
        asyncio.get_running_loop().call_soon(self.done.set)

    # ------------------------------------------------------------------ kernel -> plugin calls

    async def _tool(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name", "")
        tool = self.tools.get(name)
        if tool is None or tool.handler is None:
            raise LookupError(f"未注册的工具: {name} (tool {name!r} is not registered by this plugin)")
        args = params.get("args") or {}
        handler = tool.handler
        value = await handler(**args) if _is_async(handler) else await _call(handler, **args)
        if type(value) in _JSON_TYPES:
            return {"result": value}
        if isinstance(value, ToolResult):
            return {"result": value.result, "success": value.success}
        to_dict = getattr(value, "to_dict", None)
        return {"result": to_dict() if callable(to_dict) else value}

    async def _clean(self, params: dict[str, Any]) -> dict[str, Any]:
        """``cleaner.invoke {scope, name, text}`` -> ``{text}``; ``scope`` is ``tool`` or ``input``
        (absent: a tool's cleaner, else an input channel's)."""
        scope, name, text = params.get("scope") or "", params.get("name", ""), params.get("text")
        if not isinstance(text, str):
            raise ValueError(f"参数解析失败: cleaner.invoke needs text (a string), got {type(text).__name__}")
        if scope:
            cleaner = self.cleaners.get((scope, name))
        else:
            cleaner = self.cleaners.get(("tool", name)) or self.cleaners.get(("input", name))
        if cleaner is None:
            what = f"{scope or 'tool'} {name}"
            raise LookupError(f"{what} 未注册 Cleaner (no cleaner was registered for {what})")
        value = await _call(cleaner, text)
        if not isinstance(value, str):
            raise TypeError(f"the cleaner of {scope or 'tool'} {name} returned {type(value).__name__}, not a string")
        return {"text": value}

    def _stage_impl(self, stage: str) -> tuple[Callable[..., Any], tuple[str, ...]] | None:
        """The plugin's handler of ``stage`` and its argument names (looked up once)."""
        try:
            return self._stage_impls[stage]
        except KeyError:
            pass
        impls = getattr(self.pm.hook, stage).get_hookimpls() if stage in STAGES else []
        found = (impls[0].function, tuple(impls[0].argnames)) if impls else None
        self._stage_impls[stage] = found
        return found

    async def _stage(self, params: dict[str, Any]) -> dict[str, Any]:
        found = self._stage_impl(params.get("stage", ""))
        if found is None:
            return {"changed": {}}
        impl, argnames = found
        ctx = _wire_ctx(params.get("ctx") or {})
        # Scalars are immutable: keeping the objects is the snapshot. Lists and dicts may be
        # mutated in place, so they are snapshotted as one JSON blob and compared field by
        # field only when that blob changed.
        scalars = [getattr(ctx, f) for f in _SCALAR_FIELDS]
        odd = {f: dumps(v) for f, v in zip(_SCALAR_FIELDS, scalars, strict=True) if type(v) not in _IMMUTABLE}
        mutable_before = dumps([getattr(ctx, f) for f in _MUTABLE_FIELDS])
        kwargs: dict[str, Any] = {"ctx": ctx}
        call = result = None
        if "call" in params:
            call = ToolCall.from_dict(params["call"])
            call_before = dumps(call.arguments)
            kwargs["call"] = call
        if "result" in params:
            result = ToolResult.from_dict(params["result"])
            result_before = dumps([result.result, result.success])
            kwargs["result"] = result
        returned = await _call(impl, **{k: v for k, v in kwargs.items() if k in argnames})
        changed: dict[str, Any] = {}
        for f, old in zip(_SCALAR_FIELDS, scalars, strict=True):
            if f in _READONLY:
                continue
            value = getattr(ctx, f)
            if f in odd or (value is not old and (type(value) is not type(old) or value != old)):
                encoded = dumps(value)
                if encoded != odd.get(f) and encoded != dumps(old):
                    changed[f] = loads(encoded)
        mutable_after = dumps([getattr(ctx, f) for f in _MUTABLE_FIELDS])
        if mutable_after != mutable_before:
            for f, old, new in zip(_MUTABLE_FIELDS, loads(mutable_before), loads(mutable_after), strict=True):
                if f not in _READONLY and dumps(new) != dumps(old):
                    changed[f] = new
        if changed.get("response", "") is None:
            del changed["response"]  # a plugin cannot un-set a response
        out: dict[str, Any] = {"changed": changed}
        if call is not None and dumps(call.arguments) != call_before:
            out["call"] = {"arguments": call.arguments}
        if result is not None and dumps([result.result, result.success]) != result_before:
            out["result"] = {"result": result.result, "success": result.success}
        if isinstance(returned, str):
            out["reject"] = returned
        return out

    async def _output(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("channel", "")
        channel = self.outputs.get(name)
        if channel is None or channel.send is None:
            raise LookupError(f"output channel {name!r} is not registered by this plugin")
        args = params.get("args") or {}
        payload, meta, type_ = args.get("payload", ""), args.get("meta") or {}, args.get("type", "text")
        try:
            arity = len(
                [
                    p
                    for p in inspect.signature(channel.send).parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                ]
            )
        except (TypeError, ValueError):
            arity = 3
        value = await _call(channel.send, *(payload, meta, type_)[: max(1, min(arity, 3))])
        if value is False:
            raise RuntimeError(f"output channel {name!r} reported failure")
        out = dict(value) if isinstance(value, dict) else ({} if value in (None, True) else {"result": value})
        out.setdefault("status", "sent")
        return out

    async def _event(self, params: dict[str, Any]) -> None:
        event = Event.from_dict(params.get("event") or {})
        impl = self._impl("on_event")
        if impl is not None:
            await _call(impl, event)
        if self.sdk is not None:
            for names, callback in list(self.sdk.events.callbacks):
                if not names or event.name in names:
                    await _call(callback, event)


class _StdinProtocol(asyncio.Protocol):
    def __init__(self, peer: Peer, on_eof: Callable[[], None]) -> None:
        self.peer, self.on_eof = peer, on_eof

    def data_received(self, data: bytes) -> None:
        self.peer.feed(data)

    def eof_received(self) -> bool:
        self.on_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_eof()


async def _serve_async(plugin: object, wire_out: int) -> int:
    loop = asyncio.get_running_loop()
    runtime = ChildRuntime(plugin)
    writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(wire_out, "wb", buffering=0))
    batcher = FrameBatcher(writer)
    peer = Peer(batcher.write, label=f"plugin {runtime.name}")
    runtime.attach(peer)

    stopping: list[asyncio.Task[None]] = []

    def on_eof() -> None:
        if not runtime.done.is_set() and not stopping:
            stopping.append(loop.create_task(_eof_stop(runtime)))

    reader, _ = await loop.connect_read_pipe(
        lambda: _StdinProtocol(peer, on_eof), os.fdopen(0, "rb", buffering=0, closefd=False)
    )
    await runtime.done.wait()
    reader.close()
    for _ in range(1000):  # let the last answers reach the host (bounded: 1 s)
        if not batcher.pending and not writer.get_write_buffer_size():
            break
        await asyncio.sleep(0.001)
    writer.close()
    return runtime.exit_code


async def _eof_stop(runtime: ChildRuntime) -> None:
    await runtime.shutdown()
    runtime.done.set()


def serve(plugin: object) -> None:
    """Run ``plugin`` as an out-of-process plugin on stdin/stdout; returns never (exits)."""
    sys.stdout.flush()
    wire_out = os.dup(1)
    os.dup2(2, 1)  # stray writes to fd 1 (print, C libraries) now land on stderr
    sys.stdout = sys.stderr
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[plugin] %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(handler)
        root.setLevel(logging.INFO)
    try:
        import uvloop

        code = uvloop.run(_serve_async(plugin, wire_out))
    except ImportError:  # pragma: no cover - platforms without uvloop
        code = asyncio.run(_serve_async(plugin, wire_out))
    sys.stderr.flush()
    os._exit(code)
