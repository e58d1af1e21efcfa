"""Input and output channels, and the ``output_send__<name>`` tools generated for outputs.

An *input* channel says how inputs arriving on it are remembered (``no_memory``,
``context_policy``, ``recall_policy``, ``cleaner``). An *output* channel declares its
capabilities (:class:`~homeagent_sdk.types.Caps`) and a ``send`` callable; the kernel turns
each into two tools, ``output_send__<name>`` (``payload``, ``meta``, ``type``) and
``output_send__<name>_help``. Channel names flow into function names, so they are validated
up front: both generated names must match ``^[a-zA-Z0-9_-]{1,64}$``.

``send`` is called as ``send(payload, meta, type)`` (positionally; a callable taking fewer
parameters gets the leading ones), may be ``async``; a plain one runs in a worker thread.
Sync channels (web UI, terminal) also receive the final reply text of turns that came in on
them; async ones (chat apps) only get what the model sends explicitly, and a failed send is
reported to the model as a failed tool result.

Conversations: a chat bridge registers one output channel (``qq``) and injects each
conversation's inputs on ``<channel>:<conversation>`` (``qq:group:678``). Such a name resolves
to the registered channel: its input policy applies, the turn's reply goes to its ``send``
with ``meta["conversation"]`` set to the part after the first ``:``, and a timer or any later
input on the same name reaches the same chat.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Callable
from typing import Any

from homeagent_core.aio import call_maybe_async
from homeagent_sdk.errors import ChannelSendError, PluginValidationError
from homeagent_sdk.types import Caps, ChannelDef, ToolDef, ToolResult

__all__ = [
    "CHANNEL_NAME_RE",
    "CONSOLIDATION_CHANNEL",
    "SEND_PREFIX",
    "ChannelRegistry",
    "ChannelSendError",
    "PluginChannelRegistry",
    "caps_names",
    "split_conversation",
]

log = logging.getLogger(__name__)

SEND_PREFIX = "output_send__"
_HELP_SUFFIX = "_help"
#: Longest channel name whose generated tool names still fit in 64 characters.
MAX_CHANNEL_NAME = 64 - len(SEND_PREFIX) - len(_HELP_SUFFIX)
CHANNEL_NAME_RE = re.compile(rf"^[a-zA-Z0-9_-]{{1,{MAX_CHANNEL_NAME}}}$")

#: Pseudo output channel of internal self-inputs (memory consolidation jobs).
CONSOLIDATION_CHANNEL = "_consolidation_"

_CAP_NAMES: tuple[tuple[Caps, str], ...] = (
    (Caps.TEXT, "text"),
    (Caps.FILE, "file"),
    (Caps.IMAGE, "image"),
    (Caps.AUDIO, "audio"),
    (Caps.STRUCTURED, "structured"),
)


def caps_names(caps: int) -> list[str]:
    """The ``type`` values a channel with capability bits ``caps`` accepts."""
    return [name for flag, name in _CAP_NAMES if caps & flag] or ["text"]


def _arity(fn: Callable[..., Any]) -> int:
    """How many of (payload, meta, type) ``fn`` accepts positionally."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 3
    count = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return 3
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            count += 1
    return min(count, 3)


class ChannelRegistry:
    """The input and output channels of every plugin."""

    def __init__(self) -> None:
        self.inputs: dict[str, ChannelDef] = {}
        self.outputs: dict[str, ChannelDef] = {}
        self._arity: dict[str, int] = {}
        self.version = 0
        #: The output channel the person last talked on; proactive replies (a timer firing) go there.
        self.last_active: str | None = None

    # ------------------------------------------------------------------ registration

    def add_input(self, channel: ChannelDef, plugin: str) -> ChannelDef:
        """Register an input channel for ``plugin``.

        Raises:
            PluginValidationError: invalid name, or the name is taken by another plugin.
        """
        return self._add(self.inputs, channel, plugin, "input")

    def add_output(self, channel: ChannelDef, plugin: str) -> ChannelDef:
        """Register an output channel for ``plugin``.

        Raises:
            PluginValidationError: invalid name (the generated tool names would be
                invalid), a name taken by another plugin, or no ``send`` callable.
        """
        if channel.send is None:
            raise PluginValidationError(
                f"output channel {channel.name!r} of plugin {plugin!r} has no send callable; set ChannelDef(send=...)",
                plugin_name=plugin,
            )
        stored = self._add(self.outputs, channel, plugin, "output")
        assert stored.send is not None
        self._arity[stored.name] = _arity(stored.send)
        return stored

    def _add(self, table: dict[str, ChannelDef], channel: ChannelDef, plugin: str, kind: str) -> ChannelDef:
        if not isinstance(channel, ChannelDef):
            raise PluginValidationError(
                f"plugin {plugin!r}: {kind} channel registry.add() takes a ChannelDef, got {type(channel).__name__}",
                plugin_name=plugin,
            )
        name = channel.name
        if not isinstance(name, str) or not CHANNEL_NAME_RE.match(name):
            raise PluginValidationError(
                f"{kind} channel name {name!r} of plugin {plugin!r} is invalid: channel names become tool "
                f"names ({SEND_PREFIX}<name>{_HELP_SUFFIX}), so use 1-{MAX_CHANNEL_NAME} characters "
                "from a-z, A-Z, 0-9, '_' and '-'",
                plugin_name=plugin,
            )
        existing = table.get(name)
        if existing is not None:
            raise PluginValidationError(
                f"{kind} channel {name!r} of plugin {plugin!r} is already registered by plugin "
                f"{existing.plugin!r}; choose another name",
                plugin_name=plugin,
            )
        channel.plugin = plugin
        table[name] = channel
        self.version += 1
        return channel

    def remove_plugin(self, plugin: str) -> list[str]:
        """Remove every channel of ``plugin``; returns the removed output channel names."""
        outputs = [n for n, c in self.outputs.items() if c.plugin == plugin]
        for name in outputs:
            del self.outputs[name]
            self._arity.pop(name, None)
        for name in [n for n, c in self.inputs.items() if c.plugin == plugin]:
            del self.inputs[name]
        self.version += 1
        return outputs

    def input(self, name: str) -> ChannelDef | None:
        """The input channel ``name``, or the channel of a conversation name ``<channel>:<conversation>``."""
        return self.inputs.get(name) or self.inputs.get(split_conversation(name)[0])

    def output(self, name: str) -> ChannelDef | None:
        """The output channel ``name``, or the channel of a conversation name ``<channel>:<conversation>``."""
        return self.outputs.get(name) or self.outputs.get(split_conversation(name)[0])

    # ------------------------------------------------------------------ sending

    async def send(self, name: str, payload: str, meta: dict[str, Any] | None = None, type: str = "text") -> Any:
        """Deliver ``payload`` to output channel ``name``; returns what ``send`` returned.

        Raises:
            ChannelSendError: unknown channel, a ``type`` the channel cannot carry, or the
                channel's ``send`` raised or reported failure (returned ``False``).
        """
        meta = dict(meta or {})
        if name not in self.outputs:
            base, conversation = split_conversation(name)
            if conversation and base in self.outputs:
                name = base
                meta.setdefault("conversation", conversation)
        channel = self.outputs.get(name)
        if channel is None or channel.send is None:
            known = ", ".join(sorted(self.outputs)) or "none"
            raise ChannelSendError(f"output channel {name!r} does not exist (channels: {known})")
        allowed = caps_names(channel.caps)
        if type not in allowed:
            raise ChannelSendError(
                f"output channel {name!r} cannot send type {type!r}; it accepts {', '.join(allowed)}"
            )
        args = (payload, meta, type)[: self._arity.get(name, 3)]
        try:
            result = await call_maybe_async(channel.send, *args)
        except Exception as exc:
            log.warning("output channel %s (plugin %s): send failed", name, channel.plugin, exc_info=True)
            raise ChannelSendError(f"send to output channel {name!r} failed: {type_name(exc)}: {exc}") from exc
        if result is False:
            raise ChannelSendError(f"send to output channel {name!r} failed: the channel reported failure")
        return result

    # ------------------------------------------------------------------ generated tools

    def tools_for(self, name: str) -> list[ToolDef]:
        """The ``output_send__<name>`` and ``output_send__<name>_help`` tools of one channel."""
        channel = self.outputs[name]
        types_ = caps_names(channel.caps)

        tool_name = f"{SEND_PREFIX}{name}"

        async def send_tool(payload: str, type: str = "text", meta: str = "") -> ToolResult:
            try:
                result = await self.send(name, payload, _decode_meta(meta), type)
            except ChannelSendError as exc:
                return ToolResult("", tool_name, False, f"发送失败（delivery failed）：{exc}")
            detail = "" if result in (None, True) else f"：{result}"
            return ToolResult("", tool_name, True, f"已发送到通道 {name}{detail}")

        def help_tool() -> str:
            return self.help_text(name)

        description = channel.description or f"output channel {name}"
        return [
            ToolDef(
                name=tool_name,
                description=f"发送消息到输出通道 {name}（{description}）。能力：{', '.join(types_)}。"
                f"meta 的格式见 {SEND_PREFIX}{name}{_HELP_SUFFIX}。",
                parameters={
                    "type": "object",
                    "properties": {
                        "payload": {"type": "string", "description": "消息内容（文本，或文件/媒体的路径或 URL）"},
                        "meta": {"type": "string", "description": "JSON 对象字符串：路由元数据（可为空）"},
                        "type": {"type": "string", "enum": types_, "description": "载荷类型"},
                    },
                    "required": ["payload", "type"],
                    "additionalProperties": False,
                },
                plugin=channel.plugin,
                handler=send_tool,
            ),
            ToolDef(
                name=f"{SEND_PREFIX}{name}{_HELP_SUFFIX}",
                description=f"说明输出通道 {name} 的 meta 格式与 type 取值",
                parameters={"type": "object", "properties": {}, "additionalProperties": False},
                plugin=channel.plugin,
                parallel_safe=True,
                handler=help_tool,
            ),
        ]

    def help_text(self, name: str) -> str:
        channel = self.outputs[name]
        lines = [
            f"通道 {name}（插件 {channel.plugin}）：{channel.description or '无描述'}",
            f"type 取值：{' | '.join(caps_names(channel.caps))}",
            f"同步通道：{'是（本通道输入的回复会自动送达）' if channel.sync else '否（必须显式调用发送工具）'}",
        ]
        lines.append(f"meta：{channel.help}" if channel.help else "meta：无需路由元数据，可留空")
        return "\n".join(lines)

    def describe_outputs(self) -> list[dict[str, Any]]:
        """What ``output_list_channels`` returns."""
        return [
            {
                "name": c.name,
                "plugin": c.plugin,
                "description": c.description,
                "types": caps_names(c.caps),
                "sync": c.sync,
                "tool": f"{SEND_PREFIX}{c.name}",
            }
            for c in self.outputs.values()
        ]

    def describe_inputs(self) -> list[dict[str, Any]]:
        """What ``input_channels`` returns."""
        return [
            {
                "name": c.name,
                "plugin": c.plugin,
                "description": c.description,
                "no_memory": c.no_memory,
                "context_policy": c.context_policy or "none",
                "recall_policy": c.recall_policy or "auto",
            }
            for c in self.inputs.values()
        ]


def split_conversation(name: str) -> tuple[str, str]:
    """``"qq:group:678"`` -> ``("qq", "group:678")``; a name without ``:`` -> ``(name, "")``.

    A name without ``:`` may also be written ``<channel>/<conversation>`` (``device/lap``: the
    node ``lap`` of the ``device`` channel); channel names never contain ``/``.
    """
    base, sep, conversation = name.partition(":")
    if not sep and "/" in name:
        base, _, conversation = name.partition("/")
    return base, conversation


def _decode_meta(meta: str) -> dict[str, Any]:
    if not meta or not meta.strip():
        return {}
    try:
        value = json.loads(meta)
    except json.JSONDecodeError as exc:
        raise ChannelSendError(f'meta must be a JSON object string such as {{"to": "..."}} ({exc.msg})') from None
    if not isinstance(value, dict):
        raise ChannelSendError('meta must be a JSON object string such as {"to": "..."}')
    return value


def type_name(exc: BaseException) -> str:
    return type(exc).__name__


class PluginChannelRegistry:
    """The registry handed to one plugin's ``register_input_channels`` / ``register_output_channels``."""

    def __init__(self, registry: ChannelRegistry, plugin: str, kind: str, on_add: Callable[[ChannelDef], None]) -> None:
        self._registry = registry
        self.plugin = plugin
        self.kind = kind
        self._on_add = on_add
        self.added: list[ChannelDef] = []

    def add(self, channel: ChannelDef) -> None:
        """Declare a channel of this plugin."""
        if self.kind == "output":
            stored = self._registry.add_output(channel, self.plugin)
        else:
            stored = self._registry.add_input(channel, self.plugin)
        self.added.append(stored)
        self._on_add(stored)
