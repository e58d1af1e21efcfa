"""The data functions of a Lua plugin's ``sdk`` table, served by the host.

A script calls ``sdk.memory.recall({"小王"}, 2)``; the glue packs the arguments as JSON and
calls :class:`LuaDataFunctions`, which checks the plugin's capabilities, maps the Lua argument
list onto the scoped SDK's services (the memory, document, knowledge, social and LLM facades,
input injection, settings) and returns ``(result JSON, error text)`` — Lua sees ``(result, err)``.

Rules kept from the original: a capability the manifest does not grant is refused with the
exact denial message; a service the running agent does not have returns an empty value, not
an error (logged once); ``sdk.http`` needs the ``http`` capability even when the list is empty.
Secret settings (API keys, passwords) are never handed to a script, even with
``settings_cross``: they read as ``"****"`` when set and ``dump`` leaves them out.
Data functions run on a thread of the plugin's sandbox (:meth:`LuaSandbox.blocking
<homeagent_core.providers.lua.LuaSandbox.blocking>`: closing it releases the script's caller),
never on the event loop; async services are awaited on the loop the plugin was started on,
with a timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from homeagent_core.agent.policy import guard_setting
from homeagent_core.plugins.lua_glue import as_text, jsonable
from homeagent_core.plugins.lua_http import http_request
from homeagent_core.plugins.lua_manifest import CAPABILITIES
from homeagent_sdk.errors import HomeAgentError
from homeagent_sdk.types import ConfigDef, InjectOptions, Priority, Triple

if TYPE_CHECKING:
    from homeagent_core.plugins.lua_manifest import LuaPluginManifest
    from homeagent_core.plugins.lua_script import LoadedScript
    from homeagent_core.plugins.privileged import KernelAccess

__all__ = ["SERVICE_CALLS", "LuaDataFunctions", "ScriptOwner", "kernel_of", "on_loop"]

Args = tuple[list[Any], dict[str, Any]]


class _Denied(Exception):
    """A capability the plugin did not declare."""


def on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """True when called from ``loop``'s own thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def kernel_of(sdk: Any) -> KernelAccess | None:
    """The running kernel behind a privileged scoped SDK (``sdk.services.kernel``), or None."""
    kernel: KernelAccess | None = getattr(getattr(sdk, "services", None), "kernel", None)
    return kernel


def _io_of(sdk: Any) -> Any:
    kernel = kernel_of(sdk)
    io = getattr(kernel, "io", None)
    if io is not None:
        return io
    try:
        return getattr(sdk, "io", None)
    except HomeAgentError:
        return None


def _is_secret(config: Any, key: str) -> bool:
    """A secret setting (API keys, passwords), including the implicit LLM source fields."""
    definition = config.definition(key)
    return definition is not None and (bool(definition.secret) or definition.type == "password")


def _masked(config: Any, key: str, value: Any) -> Any:
    """What a Lua script sees of a setting: secrets only as ``"****"`` (set) or ``""``."""
    if _is_secret(config, key):
        return "****" if value else ""
    return value


# --------------------------------------------------------------------------- argument mapping


def _arg(args: list[Any], i: int, default: Any = None) -> Any:
    return args[i] if len(args) > i and args[i] is not None else default


def _positional(*defaults: Any) -> Callable[[list[Any]], Args]:
    """The first ``len(defaults)`` Lua arguments, nil replaced by the default (``...`` = required)."""

    def build(args: list[Any]) -> Args:
        out = []
        for i, default in enumerate(defaults):
            value = _arg(args, i, default)
            if value is ...:
                raise ValueError(f"argument {i + 1} is missing")
            out.append(value)
        return out, {}

    return build


def _recall(args: list[Any]) -> Args:
    query = _arg(args, 0, [])
    keywords = [str(k) for k in query] if isinstance(query, list) else [str(query)]
    return [keywords, int(_arg(args, 1, 2) or 2)], {}


def _triples(args: list[Any]) -> Args:
    raw = _arg(args, 0, [])
    if isinstance(raw, dict):  # commit({triples = {...}}) or one triple
        raw = raw.get("triples", [raw] if "subject" in raw else [])
    if not isinstance(raw, list):
        raise ValueError("commit needs a list of triples {subject, relation, object}")
    return [[Triple.from_dict(t) for t in raw if isinstance(t, dict)]], {}


def _purge(args: list[Any]) -> Args:
    criteria = _arg(args, 0, {})
    if not isinstance(criteria, dict) or not criteria:
        raise ValueError("purge needs a criteria table, e.g. {subject_contains = \"小王\"}")
    return [criteria, "hard" if _arg(args, 1, False) is True else "soft"], {}


def _doc_insert(args: list[Any]) -> Args:
    doc = _arg(args, 0, None)
    if not isinstance(doc, dict):
        raise ValueError("insert needs a document table {title = ..., content = ...}")
    return [str(doc.get("title") or ""), str(doc.get("content") or "")], {}


def _chat(args: list[Any]) -> Args:
    first = _arg(args, 0, ...)
    if first is ...:
        raise ValueError("chat needs a prompt string or a list of {role, content} messages")
    messages = [{"role": "user", "content": str(first)}] if isinstance(first, str) else first
    options = _arg(args, 1, {})
    return [messages], dict(options) if isinstance(options, dict) else {}


def _identity(value: Any) -> Any:
    return value


def _key(name: str) -> Callable[[Any], dict[str, Any]]:
    return lambda value: {name: value}


#: op -> (service attribute of the scoped SDK, method, argument mapping, result shape,
#: the empty value returned when the running agent does not have the service).
SERVICE_CALLS: dict[str, tuple[str, str, Callable[[list[Any]], Args], Callable[[Any], Any], Any]] = {
    "memory.recall": ("memory", "recall", _recall, _identity, {"entities": [], "relations": []}),
    "memory.commit": ("memory", "commit", _triples, _identity, None),
    "memory.introspect": ("memory", "introspect", _positional(), _identity, {}),
    "memory.merge": ("memory", "merge", _positional(..., ...), _identity, {"merged": 0}),
    "memory.purge": ("memory", "purge", _purge, _key("purged"), {"purged": 0}),
    "memory.entities": ("memory", "entities", _positional("", 50), _identity, []),
    "memory.relations": ("memory", "relations", _positional(...), _identity, []),
    "doc.query": ("doc", "query", _positional(..., 5), _identity, []),
    "doc.insert": ("doc", "commit", _doc_insert, _identity, None),
    "doc.remove": ("doc", "remove", _positional(...), _identity, None),
    "doc.stats": ("doc", "stats", _positional(), _identity, {}),
    "knowledge.search": ("knowledge", "search", _positional(..., 5), _identity, []),
    "knowledge.add": ("knowledge", "create", _positional(..., ...), _identity, None),
    "knowledge.list": ("knowledge", "list", _positional(), _identity, []),
    "text_memory.append": ("memory", "append_text", _positional(...), _identity, None),
    "llm.list_sources": ("llm", "list_sources", _positional(), _identity, []),
    "llm.set_source": ("llm", "set_source", _positional(...), lambda v: True, None),
    "llm.current_source": ("llm", "current_source", _positional(), _identity, ""),
    "llm.chat": ("llm", "chat", _chat, _identity, {}),
    "social.get_person": ("social", "person", _positional(...), _identity, {}),
    "social.get_network": ("social", "network", _positional(..., 2), _identity, {}),
    "social.get_trait": ("social", "trait", _positional(..., ...),
                         lambda v: {"value": v, "found": v is not None}, {"value": None, "found": False}),
    "social.get_relations": ("social", "relations", _positional(...), _identity, []),
    "social.list_persons": ("social", "persons", _positional(), _identity, []),
}

_GROUP_CAPABILITY = {"memory": "memory", "doc": "doc_memory", "knowledge": "knowledge",
                     "text_memory": "text_memory", "llm": "llm", "social": "social"}


class ScriptOwner(Protocol):
    """What the data functions use of the Lua plugin they serve (``LuaPlugin``)."""

    name: str
    manifest: LuaPluginManifest
    sdk: Any
    loop: asyncio.AbstractEventLoop | None
    loading: LoadedScript | None
    log: logging.Logger
    call_timeout: float
    http_timeout: float
    http_max_bytes: int


class LuaDataFunctions:
    """Serves the data functions of one :class:`~homeagent_core.plugins.lua_plugins.LuaPlugin`.

    Called (through the glue) as ``functions(op, args_json)``; returns ``(result JSON, error)``.
    """

    def __init__(self, plugin: ScriptOwner) -> None:
        self.plugin = plugin
        self._warned: set[str] = set()

    @property
    def name(self) -> str:
        return self.plugin.name

    def __call__(self, op: Any, args_json: Any) -> tuple[str | None, str | None]:
        op = as_text(op)
        try:
            args = orjson.loads(as_text(args_json) or "[]")
            if isinstance(args, dict):  # an empty Lua array encodes as {}
                args = []
            value = self.dispatch(op, args)
        except _Denied as exc:
            return None, str(exc)
        except (HomeAgentError, ValueError, TypeError, KeyError, OSError, TimeoutError) as exc:
            return None, f"{op}: {exc}"
        if value is None:
            return None, None
        return orjson.dumps(value, default=jsonable).decode(), None

    def allowed(self, op: str, capability: str) -> None:
        """Refuse ``op`` unless the manifest grants ``capability`` (empty list = all but http)."""
        caps = self.plugin.manifest.capabilities
        if capability == "http":
            if "http" not in caps:
                raise _Denied(f'插件 {self.name} 调用 {op} 被拒：缺少 "http" 能力。请在 plugin.json 的 capabilities '
                              f'数组中声明它 (plugin {self.name} may not use sdk.http: add "http" to the '
                              "capabilities array of plugin.json)")
            return
        if caps and capability not in caps:
            raise _Denied(f'插件 {self.name} 调用 {op} 被拒：缺少 "{capability}" 能力。请在 plugin.json 的 '
                          f"capabilities 数组中声明它（可用能力：{', '.join(c for c in CAPABILITIES if c != 'http')}）")

    def dispatch(self, op: str, args: list[Any]) -> Any:
        """Run one data function; the value is JSON-encoded for Lua by the caller."""
        group, _, method = op.partition(".")
        if op in ("get_setting", "set_setting"):
            return self._own_setting(op, args)
        if op == "settings.register_def" and self.plugin.sdk is None:
            spec = args[0] if args and isinstance(args[0], dict) else {}
            self._loading_script().setting_defs.append(ConfigDef.from_dict(spec))
            return True
        if op.startswith("inject_"):
            return self._inject(op, args)
        if group == "http":
            self.allowed(op, "http")
            return http_request(method, args, timeout=self.plugin.http_timeout,
                                max_bytes=self.plugin.http_max_bytes)
        if group == "settings":
            return self._settings(method, args)
        capability = _GROUP_CAPABILITY.get(group)
        if capability is None or op not in SERVICE_CALLS:
            raise ValueError(f"unknown data function sdk.{op}")
        self.allowed(op, capability)
        return self._service(op, args)

    # ------------------------------------------------------------------ plumbing

    def _loading_script(self) -> Any:
        script = self.plugin.loading
        if script is None:
            raise HomeAgentError("settings.register_def: no script is loading")
        return script

    def _config(self) -> Any:
        sdk = self.plugin.sdk
        return getattr(sdk, "config", None) or getattr(getattr(sdk, "services", None), "config", None)

    def _require_sdk(self, op: str) -> Any:
        if self.plugin.sdk is None:
            raise HomeAgentError(f"sdk.{op} is only available once the plugin is started (call it from start() "
                                 "or a handler, not at load time)")
        return self.plugin.sdk

    def run_async(self, coro: Any) -> Any:
        """Run a coroutine of the (async) SDK from the sandbox thread a data function runs on."""
        loop = self.plugin.loop
        if loop is None or loop.is_closed():
            coro.close()
            raise HomeAgentError("the plugin's event loop is not running")
        if on_loop(loop):
            coro.close()
            raise HomeAgentError("Lua data functions cannot run on the event-loop thread")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=self.plugin.call_timeout)

    # ------------------------------------------------------------------ settings and io

    def _own_setting(self, op: str, args: list[Any]) -> Any:
        """``get_setting(key)`` / ``set_setting(key, value)`` in ``plugin.<name>.*``.

        A key the plugin did not declare is declared on first write as a ``json`` setting
        (Lua plugins own their namespace, as in the original); reading one gives nil.
        """
        from homeagent_sdk.errors import ConfigError, UnknownConfigKey

        settings = self._require_sdk(op).settings
        key = str(args[0]) if args else ""
        if not key:
            raise ValueError(f"{op} needs a key")
        if op == "get_setting":
            try:
                return settings.get(key)
            except ConfigError:
                return None
        value = args[1] if len(args) > 1 else None
        try:
            settings.set(key, value)
        except UnknownConfigKey:
            config = self._config()
            if config is None:
                raise
            config.define_plugin(self.name, ConfigDef(key=key, type="json", description="set by the Lua script"))
            settings.set(key, value)
        return True

    def _inject(self, op: str, args: list[Any]) -> Any:
        self.allowed(op, "io")
        sdk = self._require_sdk(op)
        source, channel, body = [*args, None, None, None][:3]
        if body is None:  # inject_text(channel, text) short form
            source, channel, body = None, source, channel
        channel = str(channel or self.name)
        io = _io_of(sdk)
        if io is None:
            raise HomeAgentError("input injection is not available here (the kernel is not running)")
        if op == "inject_interrupt":
            opts = InjectOptions(priority=Priority.L1, no_memory=True)
            self.run_async(io.inject_interrupt(str(body), channel, opts))
        else:
            opts = InjectOptions(no_memory=op == "inject_text_no_memory")
            self.run_async(io.inject_text(str(body), channel, opts))
        if source:
            self.plugin.log.debug("injected on %s from %s", channel, source)
        return True

    def _settings(self, method: str, args: list[Any]) -> Any:
        sdk = self._require_sdk(f"settings.{method}")
        a = [*args, None, None, None]
        if method == "list":
            return sdk.settings.all()
        config = self._config()
        if method == "register_def":
            spec = a[0] if isinstance(a[0], dict) else {}
            if config is None:
                raise HomeAgentError("settings.register_def: the config store is not available to this plugin")
            return config.define_plugin(self.name, ConfigDef.from_dict(spec)).to_dict()
        self.allowed(f"settings.{method}", "settings_cross")
        if config is None:
            raise HomeAgentError(f"settings.{method}: the config store is not available to this plugin")
        if method == "defs":
            return [d.to_dict() for d in config.definitions(f"plugin.{self.name}.{a[0] or ''}")]
        if method == "get_core":
            key = f"core.{a[0]}"
            return _masked(config, key, config.get(key))
        if method == "set_core":
            guard_setting(f"core.{a[0]}", f"Lua plugin {self.name!r}")
            config.set(f"core.{a[0]}", a[1])
            return True
        if method == "list_core":
            return {k: _masked(config, k, v) for k, v in config.items(f"core.{a[0] or ''}").items()}
        if method == "get_plugin":
            key = f"plugin.{a[0]}.{a[1]}"
            return _masked(config, key, config.get(key))
        if method == "set_plugin":
            guard_setting(f"plugin.{a[0]}.{a[1]}", f"Lua plugin {self.name!r}")
            config.set(f"plugin.{a[0]}.{a[1]}", a[2])
            return True
        if method == "list_plugin":
            return {k: _masked(config, k, v) for k, v in config.items(f"plugin.{a[0]}.{a[1] or ''}").items()}
        if method == "dump":
            return {k: v for k, v in config.items("").items() if not _is_secret(config, k)}
        if method == "plugins":
            return sorted({k.split(".")[1] for k in config.items("plugin.") if k.count(".") >= 2})
        raise ValueError(f"unknown settings function {method!r}")

    # ------------------------------------------------------------------ services

    def _service(self, op: str, args: list[Any]) -> Any:
        """Call the scoped SDK's service for ``op``; the empty value when it is not running."""
        attr, name, build, shape, empty = SERVICE_CALLS[op]
        sdk = self._require_sdk(op)
        fn = None
        try:
            service = getattr(sdk, attr, None)
            fn = getattr(service, name, None) if service is not None else None
        except HomeAgentError:  # a service the running agent does not have
            fn = None
        if fn is None:
            if op not in self._warned:
                self._warned.add(op)
                self.plugin.log.warning("sdk.%s: %s is not available in this agent; returning an empty value",
                                        op, attr)
            return empty
        call_args, kwargs = build(args)
        if op == "text_memory.append":
            kwargs["source"] = self.name
        value = fn(*call_args, **kwargs)
        if asyncio.iscoroutine(value):
            value = self.run_async(value)
        return shape(value)
