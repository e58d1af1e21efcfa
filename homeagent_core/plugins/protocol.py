"""The ``core.*`` methods a proc plugin may call, served behind their capability gates.

:class:`CoreMethods` answers one plugin's ``core.*`` requests: registrations (tools, stages,
channels), its own settings, io, events, plugin management, other settings (``settings_cross``)
and the conversation log; the memory, doc, knowledge, llm and social methods forward to the
plugin's SDK services (``proc_forwards.py``).

Every method belongs to ``core`` (always allowed) or to one capability group
(``proc_capabilities.py``). A plugin may call ``core`` plus the groups its ``plugin.json``
lists; an empty or absent list grants no group (least privilege: the original's "unrestricted"
default handed every API key to every plugin). A denied call gets the original's explicit
message naming the missing capability and listing all of them — never a silent success. Secret
settings (API keys, tokens, passwords) read as ``****`` through ``settings_cross``; their real
value (``settings.getSecret``) and changing where they are sent (``settings.setCore`` of a
secret or an endpoint key) need ``secrets``. Social access is read-only and event publishing
does not exist out of process.

Where registrations go is :class:`~homeagent_core.plugins.kernel_link.KernelLink`;
:data:`METHOD_CAPABILITIES`, :func:`denial` and ``KernelLink`` stay importable from here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from homeagent_core.agent.policy import guard_setting
from homeagent_core.plugins.kernel_link import KernelLink
from homeagent_core.plugins.proc_capabilities import (
    MASK,
    METHOD_CAPABILITIES,
    denial,
    names_a_secret,
    sends_secrets,
)
from homeagent_core.plugins.proc_forwards import FORWARDS, Arguments
from homeagent_core.plugins.proc_params import inject_options, maybe, params_dict, plain
from homeagent_sdk.errors import HomeAgentError, PluginValidationError
from homeagent_sdk.types import (
    STAGES,
    ChannelDef,
    ConfigDef,
    MediaAttachment,
    StageContext,
    TextEvent,
    ToolDef,
    ToolResult,
)

if TYPE_CHECKING:
    from homeagent_core.plugins.proc import ProcPlugin

__all__ = ["METHOD_CAPABILITIES", "STAGES", "CoreMethods", "KernelLink", "apply_changes", "denial"]

_CTX_FIELDS = frozenset(StageContext.__dataclass_fields__)
_READONLY = frozenset({"phase"})


def apply_changes(ctx: StageContext, changed: dict[str, Any]) -> None:
    """Write back the fields a stage handler changed; ``phase`` is read-only and a response
    already set cannot be un-set."""
    fields = {k: v for k, v in changed.items() if k in _CTX_FIELDS and k not in _READONLY}
    if fields.get("response", "") is None:
        del fields["response"]
    if not fields:
        return
    decoded = StageContext.from_dict(fields)
    for key in fields:
        setattr(ctx, key, getattr(decoded, key))


Handler = Callable[[Any], Awaitable[Any]]


class CoreMethods:
    """Serves the ``core.*`` requests of one :class:`ProcPlugin`."""

    def __init__(self, plugin: ProcPlugin) -> None:
        self.p = plugin

    # ------------------------------------------------------------------ plumbing

    def handlers(self) -> dict[str, Handler]:
        table: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            "tool.register": self.tool_register,
            "stage.register": self.stage_register,
            "output.register": self.output_register,
            "input.register": self.input_register,
            "api.register": self.api_register,
            "settings.get": self.settings_get,
            "settings.set": self.settings_set,
            "settings.list": self.settings_list,
            "settings.defs": self.settings_defs,
            "settings.registerDef": self.settings_register_def,
            "settings.dataDir": self.settings_data_dir,
            "lifecycle.autoRestart": self.auto_restart,
            "io.injectText": self.io_inject_text,
            "io.injectTextNoMem": self.io_inject_text_nomem,
            "io.injectInterrupt": self.io_inject_interrupt,
            "io.injectInputSync": self.io_inject_sync,
            "io.injectMedia": self.io_inject_media,
            "io.injectInterruptMedia": self.io_inject_interrupt_media,
            "events.subscribe": self.events_subscribe,
            "events.unsubscribe": self.events_unsubscribe,
            "events.publish": self.events_publish,
            "plugin.reloadOne": self.plugin_reload,
            "plugin.listLoaded": self.plugin_list,
            "plugin.isDisabled": self.plugin_is_disabled,
            "settings.getCore": self.core_get,
            "settings.setCore": self.core_set,
            "settings.listCore": self.core_list,
            "settings.getPlugin": self.other_get,
            "settings.setPlugin": self.other_set,
            "settings.listPlugin": self.other_list,
            "settings.dump": self.settings_dump,
            "settings.plugins": self.settings_plugins,
            "settings.getSecret": self.secret_get,
            "textmemory.append": self.text_append,
        }
        for method, (service, attr, build, shape) in FORWARDS.items():
            table[method] = self._forward(method, service, attr, build, shape)
        for method in ("social.setTrait", "social.addRelation", "social.removePerson"):
            table[method] = self._read_only(method)
        return {m: self._gate(m, fn) for m, fn in table.items()}

    def _gate(self, method: str, fn: Callable[[dict[str, Any]], Awaitable[Any]]) -> Handler:
        capability = METHOD_CAPABILITIES.get(method)
        caps = self.p.capabilities

        async def handler(params: Any) -> Any:
            if capability is not None and capability not in caps:
                raise PermissionError(denial(self.p.name, method, capability))
            return await fn(params_dict(params, method))

        return handler

    def _unavailable(self, method: str, what: str) -> HomeAgentError:
        return HomeAgentError(
            f"{method}: {what} 能力在当前内核实例中不可用 ({what} is not available in this agent; "
            "start it with that service enabled)"
        )

    def _service(self, method: str, name: str) -> Any:
        sdk = self.p.sdk
        service = None
        if name == "io":
            service = self.p.link.io if self.p.link is not None else None
        if service is None and sdk is not None:
            service = getattr(sdk, name, None)
        if service is None or type(service).__name__ == "_Missing":
            raise self._unavailable(method, name)
        return service

    def _member(self, method: str, service: str, attr: str) -> Any:
        obj = self._service(method, service)
        try:
            fn = getattr(obj, attr)
        except (AttributeError, HomeAgentError):
            raise self._unavailable(method, f"{service}.{attr}") from None
        return fn

    def _forward(
        self,
        method: str,
        service: str,
        attr: str,
        build: Arguments,
        shape: Callable[[Any], Any],
    ) -> Callable[[dict[str, Any]], Awaitable[Any]]:
        async def handler(params: dict[str, Any]) -> Any:
            fn = self._member(method, service, attr)
            try:
                args, kwargs = build(params)
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"参数解析失败: {method}: {exc}") from None
            return plain(shape(await maybe(fn(*args, **kwargs))))

        return handler

    def _read_only(self, method: str) -> Callable[[dict[str, Any]], Awaitable[Any]]:
        async def handler(params: dict[str, Any]) -> Any:
            raise PermissionError(f"{method}: social access is read-only for out-of-process plugins")

        return handler

    @property
    def _config(self) -> Any:
        sdk = self.p.sdk
        config = getattr(sdk, "config", None) or getattr(getattr(sdk, "services", None), "config", None)
        if config is None:
            raise HomeAgentError("settings are not available: the plugin was started without a config store")
        return config

    def _key(self, key: Any) -> str:
        if not isinstance(key, str) or not key:
            raise ValueError("参数解析失败: key must be a non-empty string")
        prefix = f"plugin.{self.p.name}."
        return key if key.startswith(prefix) else prefix + key

    def _link(self) -> Any:
        if self.p.link is None:
            raise HomeAgentError("registrations are only accepted while the plugin starts")
        return self.p.link

    # ------------------------------------------------------------------ registration (core)

    async def tool_register(self, params: dict[str, Any]) -> None:
        raw = params.get("def")
        if not isinstance(raw, dict):
            raise ValueError("参数解析失败: tool.register needs a def object")
        tool = ToolDef.from_dict(raw)
        tool.name = str(params.get("name") or tool.name)
        tool.plugin = self.p.name
        tool.handler = self._tool_handler(tool.name)
        try:
            self._link().add_tool(tool, self.p.name)
        except PluginValidationError as exc:
            raise ValueError(f"tool {tool.name} already registered or invalid: {exc}") from None

    def _tool_handler(self, name: str) -> Callable[..., Awaitable[Any]]:
        plugin = self.p

        async def handler(**arguments: Any) -> Any:
            answer = await plugin.call("tool.invoke", {"name": name, "args": arguments}) or {}
            if answer.get("success") is False:
                return ToolResult("", name, False, str(answer.get("result", "")))
            return answer.get("result")

        return handler

    async def stage_register(self, params: dict[str, Any]) -> None:
        stage = params.get("stage")
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        scope = params.get("scope") or "global"
        if scope not in ("global", "own_tools"):
            raise ValueError(f"stage scope must be 'global' or 'own_tools', got {scope!r}")
        self.p.stages[stage] = scope

    def _channel(self, params: dict[str, Any]) -> ChannelDef:
        raw = dict(params.get("def") or {})
        raw["name"] = str(params.get("name") or raw.get("name") or "")
        if "caps" in params:
            raw["caps"] = int(params["caps"])
        if params.get("desc") and not raw.get("description"):
            raw["description"] = str(params["desc"])
        if "NoMemory" in raw:
            raw["no_memory"] = bool(raw.pop("NoMemory"))
        return ChannelDef.from_dict(raw)

    async def output_register(self, params: dict[str, Any]) -> None:
        channel = self._channel(params)
        plugin = self.p
        name = channel.name

        async def send(payload: str, meta: dict[str, Any], type: str) -> Any:
            answer = await plugin.call(
                "output.invoke", {"channel": name, "args": {"payload": payload, "type": type, "meta": meta}}
            )
            if isinstance(answer, dict):
                answer.setdefault("status", "sent")
            return answer

        channel.send = send
        try:
            self._link().add_output(channel, self.p.name)
        except PluginValidationError as exc:
            raise ValueError(str(exc)) from None

    async def input_register(self, params: dict[str, Any]) -> None:
        try:
            self._link().add_input(self._channel(params), self.p.name)
        except PluginValidationError as exc:
            raise ValueError(str(exc)) from None

    async def api_register(self, params: dict[str, Any]) -> None:
        raise HomeAgentError(
            "api.register is not supported by this core; declare HTTP endpoints as proxies in plugin.json"
        )

    async def auto_restart(self, params: dict[str, Any]) -> None:
        self.p.auto_restart = bool(params.get("enabled", True))

    # ------------------------------------------------------------------ own settings (core)

    async def settings_get(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"value": self._config.get(self._key(params.get("key")))}

    async def settings_set(self, params: dict[str, Any]) -> None:
        key = self._key(params.get("key"))
        guard_setting(key, f"plugin {self.p.name!r} (settings.set)")
        self._config.set(key, params.get("value"))

    async def settings_list(self, params: dict[str, Any]) -> dict[str, Any]:
        prefix = f"plugin.{self.p.name}."
        values = self._config.items(prefix + str(params.get("prefix") or ""))
        rel = {k[len(prefix) :]: v for k, v in values.items()}
        return {"keys": sorted(rel), "values": rel}

    async def settings_defs(self, params: dict[str, Any]) -> dict[str, Any]:
        prefix = f"plugin.{self.p.name}." + str(params.get("prefix") or "")
        return {"defs": [d.to_dict() for d in self._config.definitions(prefix)]}

    async def settings_register_def(self, params: dict[str, Any]) -> None:
        raw = params.get("def")
        if not isinstance(raw, dict) or not raw.get("key"):
            raise ValueError("参数解析失败: settings.registerDef needs def with a key")
        self._config.define_plugin(self.p.name, ConfigDef.from_dict(raw))

    async def settings_data_dir(self, params: dict[str, Any]) -> dict[str, Any]:
        data_dir = getattr(self.p.sdk, "data_dir", None)
        if data_dir is None:
            raise self._unavailable("settings.dataDir", "data_dir")
        return {"dir": str(data_dir)}

    # ------------------------------------------------------------------ io

    def _io(self, method: str) -> Any:
        return self._service(method, "io")

    async def io_inject_text(self, params: dict[str, Any]) -> None:
        await maybe(
            self._io("io.injectText").inject_text(
                str(params.get("text", "")), str(params.get("channel", "")), inject_options(params)
            )
        )

    async def io_inject_text_nomem(self, params: dict[str, Any]) -> None:
        await self.io_inject_text({**params, "no_memory": True})

    async def io_inject_interrupt(self, params: dict[str, Any]) -> None:
        io = self._io("io.injectInterrupt")
        await maybe(
            io.inject_interrupt(
                str(params.get("text", "")), str(params.get("channel", "")), inject_options(params, interrupt=True)
            )
        )

    async def io_inject_sync(self, params: dict[str, Any]) -> dict[str, Any]:
        io = self._io("io.injectInputSync")
        kwargs: dict[str, Any] = {}
        if params.get("timeout"):
            kwargs["timeout"] = float(params["timeout"])
        reply = await maybe(
            io.inject_input_sync(
                str(params.get("text", "")), str(params.get("channel", "")), inject_options(params), **kwargs
            )
        )
        return {"reply": reply if isinstance(reply, str) else str(getattr(reply, "text", reply))}

    def _attachments(self, params: dict[str, Any]) -> list[MediaAttachment]:
        return [MediaAttachment.from_dict(a) for a in params.get("attachments") or params.get("blocks") or []]

    async def io_inject_media(self, params: dict[str, Any]) -> None:
        io = self._io("io.injectMedia")
        attachments = self._attachments(params)
        await maybe(
            io.inject_media(
                str(params.get("text", "")), attachments, str(params.get("channel", "")), inject_options(params)
            )
        )

    async def io_inject_interrupt_media(self, params: dict[str, Any]) -> None:
        io = self._io("io.injectInterruptMedia")
        options = inject_options(params, interrupt=True)
        await maybe(
            io.inject_media(
                str(params.get("text", "")), self._attachments(params), str(params.get("channel", "")), options
            )
        )

    # ------------------------------------------------------------------ events

    async def events_subscribe(self, params: dict[str, Any]) -> None:
        types = frozenset(str(t) for t in params.get("types") or [])
        current = self.p.event_types
        if current is None or not types:
            self.p.event_types = types if current is None else frozenset()
        elif current:
            self.p.event_types = current | types

    async def events_unsubscribe(self, params: dict[str, Any]) -> None:
        return None  # subscriptions end with the process, as in the original

    async def events_publish(self, params: dict[str, Any]) -> None:
        raise PermissionError("events.publish: event publishing is not available to out-of-process plugins")

    # ------------------------------------------------------------------ plugin_mgr

    async def plugin_reload(self, params: dict[str, Any]) -> None:
        name = str(params.get("name", ""))
        if name == self.p.name:
            raise ValueError("a plugin cannot reload itself; ask the user or another plugin")
        try:
            await self.p.supervisor.reload(name)
        except KeyError:
            raise ValueError(f"plugin {name!r} is not a loaded out-of-process plugin") from None

    async def plugin_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"plugins": self.p.supervisor.status()}

    async def plugin_is_disabled(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"disabled": str(params.get("name", "")) in self._config.disabled_plugins()}

    # ------------------------------------------------------------------ settings_cross

    def _secret(self, key: str) -> bool:
        definition = self._config.definition(key)
        if definition is not None and (definition.secret or definition.type == "password"):
            return True
        return names_a_secret(key)

    def _masked(self, key: str) -> dict[str, Any]:
        value = self._config.get(key)
        if self._secret(key):
            return {"value": MASK if value else "", "secret": True}
        return {"value": value}

    def _need_secrets(self, method: str, key: str, why: str) -> None:
        if "secrets" not in self.p.capabilities:
            raise PermissionError(f"{denial(self.p.name, method, 'secrets')} ({key} {why})")

    async def core_get(self, params: dict[str, Any]) -> dict[str, Any]:
        key = str(params.get("key", ""))
        if not key.startswith("core."):
            raise ValueError(f"settings.getCore: {key!r} is not a core.* key")
        return self._masked(key)

    async def core_set(self, params: dict[str, Any]) -> None:
        key = str(params.get("key", ""))
        if not key.startswith("core."):
            raise ValueError(f"settings.setCore: {key!r} is not a core.* key")
        if self._secret(key):
            self._need_secrets("settings.setCore", key, "is a secret")
        elif sends_secrets(key):
            self._need_secrets("settings.setCore", key, "decides where secrets are sent")
        guard_setting(key, f"plugin {self.p.name!r} (settings.setCore)")
        self._config.set(key, params.get("value"))

    async def secret_get(self, params: dict[str, Any]) -> dict[str, Any]:
        key = str(params.get("key", ""))
        if not key.startswith(("core.", "plugin.")):
            raise ValueError(f"settings.getSecret: {key!r} is not a core.* or plugin.* key")
        return {"value": self._config.get(key)}

    async def core_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"keys": sorted(self._config.items("core." + str(params.get("prefix") or "")))}

    async def other_get(self, params: dict[str, Any]) -> dict[str, Any]:
        key = f"plugin.{params.get('plugin')}.{params.get('key')}"
        return self._masked(key) if params.get("plugin") != self.p.name else {"value": self._config.get(key)}

    async def other_set(self, params: dict[str, Any]) -> None:
        key = f"plugin.{params.get('plugin')}.{params.get('key')}"
        if params.get("plugin") != self.p.name and (self._secret(key) or sends_secrets(key)):
            self._need_secrets("settings.setPlugin", key, "is a secret or decides where one is sent")
        guard_setting(key, f"plugin {self.p.name!r} (settings.setPlugin)")
        self._config.set(key, params.get("value"))

    async def other_list(self, params: dict[str, Any]) -> dict[str, Any]:
        prefix = f"plugin.{params.get('plugin')}."
        return {"keys": sorted(k[len(prefix) :] for k in self._config.items(prefix + str(params.get("prefix") or "")))}

    async def settings_dump(self, params: dict[str, Any]) -> dict[str, Any]:
        rows = self._config.describe(str(params.get("prefix") or ""))
        for row in rows:
            if row["value"] not in ("", MASK, None) and self._secret(str(row["key"])):
                row["value"], row["default"] = MASK, None
        return {"settings": rows}

    async def settings_plugins(self, params: dict[str, Any]) -> dict[str, Any]:
        names = {k.split(".")[1] for k in self._config.items("plugin.")}
        return {"plugins": sorted(names)}

    # ------------------------------------------------------------------ text memory

    async def text_append(self, params: dict[str, Any]) -> dict[str, Any]:
        """Append a ``TextEvent`` to the conversation log, recorded as coming from this plugin."""
        try:
            append = self._member("textmemory.append", "memory", "append_text")
        except HomeAgentError:
            raise self._unavailable("textmemory.append", "text_memory") from None
        event = params.get("event")
        if not isinstance(event, dict) or not event.get("role"):
            raise ValueError(
                "参数解析失败: textmemory.append needs event {role, content, timestamp?, channel?}, "
                f"got {event!r:.120}"
            )
        try:
            record = TextEvent.from_dict({"timestamp": 0.0, "content": "", **event})
        except TypeError as exc:
            raise ValueError(f"参数解析失败: textmemory.append: {exc}") from None
        return {"id": await maybe(append(record, source=self.p.name))}


