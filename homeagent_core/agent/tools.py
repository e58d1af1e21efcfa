"""The tool registry: tools from plugins, schemas for the model, validated execution.

A tool is either an explicit :class:`~homeagent_sdk.types.ToolDef` or a plain typed function:
the name comes from ``__name__``, the description from the docstring (up to its ``Args:`` /
``:param`` section, whose entries describe the parameters) and the JSON schema from the
signature. Calls are validated against the schema before the handler runs; a wrong or
missing argument, a timeout or an exception becomes a failed :class:`ToolResult` the model
can read, never an exception that ends the turn. Plain (sync) handlers run in the ``tools``
worker pool (:mod:`homeagent_core.workers`), apart from stage handlers and store calls: one
that hangs past its timeout keeps its thread, and a plugin with two such calls still running
is refused until one returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
import typing
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Unpack

from homeagent_core.agent.arguments import describe_value, is_loaded, load_validator, validate_arguments
from homeagent_core.aio import call_in_pool
from homeagent_sdk.errors import HomeAgentError, PluginValidationError, UsageError
from homeagent_sdk.schema import TOOL_NAME_RE, tool_from_function
from homeagent_sdk.schema import check_tool_name as _check_name
from homeagent_sdk.types import ToolCall, ToolDef, ToolOptions, ToolResult

__all__ = [
    "TOOL_NAME_RE",
    "PluginToolRegistry",
    "ToolRegistry",
    "run_batch",
    "tool_from_function",
    "validate_arguments",
]

log = logging.getLogger(__name__)

_MAX_RESULT_LOG = 200


# --------------------------------------------------------------------------- validation


def _signature_hint(schema: Mapping[str, Any]) -> str:
    props: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    parts = []
    for name, sub in props.items():
        kind = sub.get("type", "any") if isinstance(sub, dict) else "any"
        parts.append(f"{name} ({kind}{', required' if name in required else ''})")
    return ", ".join(parts) or "none"


# --------------------------------------------------------------------------- registry


def _result_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and hasattr(value, "to_dict"):
        value = value.to_dict()
    return json.dumps(value, ensure_ascii=False, default=str)


class ToolRegistry:
    """Every tool the model can call, owned by plugins (the kernel's own are owned by ``kernel``).

    :param default_timeout: seconds a call may run when its tool declares no ``timeout``.
    :param on_add: called with each tool after it was added (e.g. to note the
        contribution on the plugin host).
    :param on_remove: called with each tool after it was removed.
    """

    def __init__(
        self,
        *,
        default_timeout: float = 60.0,
        on_add: Callable[[ToolDef], None] | None = None,
        on_remove: Callable[[ToolDef], None] | None = None,
    ) -> None:
        self.default_timeout = default_timeout
        self._tools: dict[str, ToolDef] = {}
        self._on_add = on_add
        self._on_remove = on_remove
        self.version = 0
        self._schemas: tuple[int, list[dict[str, Any]]] = (-1, [])

    # ------------------------------------------------------------------ contents

    def add(self, tool: ToolDef | Callable[..., Any], *, plugin: str, **options: Unpack[ToolOptions]) -> ToolDef:
        """Register one tool for ``plugin``; returns the stored :class:`ToolDef`.

        Raises:
            PluginValidationError: the name is taken (both owners are named), or a
                ``ToolDef`` has no handler.
            UsageError: the function cannot become a tool (see :func:`tool_from_function`).
        """
        if isinstance(tool, ToolDef):
            if tool.handler is None:
                raise PluginValidationError(
                    f"tool {tool.name!r} of plugin {plugin!r} has no handler; set ToolDef(handler=...)",
                    plugin_name=plugin,
                )
            definition = dataclasses.replace(tool.with_options(options), plugin=plugin)
            _check_name(definition.name, plugin)
        elif callable(tool):
            definition = tool_from_function(tool, plugin=plugin, **options)
        else:
            raise UsageError(
                f"plugin {plugin!r}: registry.add() takes a ToolDef or a function, got {type(tool).__name__}"
            )
        existing = self._tools.get(definition.name)
        if existing is not None:
            raise PluginValidationError(
                f"tool {definition.name!r} of plugin {plugin!r} is already registered by plugin "
                f"{existing.plugin!r}; rename one of them (registry.add(fn, name='...'))",
                plugin_name=plugin,
            )
        self._tools[definition.name] = definition
        self.version += 1
        if self._on_add is not None:
            self._on_add(definition)
        return definition

    def remove(self, name: str) -> ToolDef | None:
        """Unregister one tool by name; returns it (None when unknown)."""
        tool = self._tools.pop(name, None)
        if tool is not None:
            self.version += 1
            if self._on_remove is not None:
                self._on_remove(tool)
        return tool

    def remove_plugin(self, plugin: str) -> list[str]:
        """Unregister every tool of ``plugin``; returns their names."""
        names = [n for n, t in self._tools.items() if t.plugin == plugin]
        for name in names:
            self.remove(name)
        return names

    def get(self, name: str) -> ToolDef | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[ToolDef]:
        return list(self._tools.values())

    def by_plugin(self) -> dict[str, list[ToolDef]]:
        """Tools grouped by owning plugin, in registration order."""
        out: dict[str, list[ToolDef]] = {}
        for tool in self._tools.values():
            out.setdefault(tool.plugin, []).append(tool)
        return out

    def schemas(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI ``tools[]`` entries (all tools cached per registry version, or a subset)."""
        if names is not None:
            return [self._tools[n].openai_schema() for n in names if n in self._tools]
        if self._schemas[0] != self.version:
            self._schemas = (self.version, [t.openai_schema() for t in self._tools.values()])
        return self._schemas[1]

    # ------------------------------------------------------------------ execution

    def timeout_for(self, tool: ToolDef | None) -> float:
        if tool is not None and tool.timeout:
            return float(tool.timeout)
        return self.default_timeout

    async def execute(
        self, call: ToolCall, *, timeout: float | None = None, allowed: Collection[str] | None = None
    ) -> ToolResult:
        """Validate and run one call; every failure becomes a failed result for the model.

        ``allowed`` is the set of tool names this run may call (None: every registered tool).
        A run only offers the model its allowed tools, but a model may name any tool anyway;
        such a call is refused here, whatever the prompt said.
        """
        tool = self._tools.get(call.name)
        if tool is None or (allowed is not None and call.name not in allowed):
            usable = sorted(self._tools if allowed is None else (n for n in allowed if n in self._tools))
            known = ", ".join(usable) or "none"
            if tool is None:
                text = f"未知工具 {call.name}（unknown tool）；可用工具：{known}"
            else:
                log.warning("tool %s refused: not in the tools of this run", call.name)
                text = (
                    f"工具 {call.name} 在本次运行中不可用（not allowed in this run: it was not offered to you）；"
                    f"可用工具：{known}"
                )
            return ToolResult(call.id, call.name, False, text, tool.plugin if tool is not None else call.plugin)
        call.plugin = tool.plugin
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        props = tool.parameters.get("properties", {})
        if not isinstance(call.arguments, dict):
            problems = [f"arguments must be a JSON object, got {describe_value(call.arguments)}"]
        elif set(arguments) == {"raw"} and "raw" not in props and isinstance(arguments["raw"], str):
            problems = [f"arguments are not valid JSON: {describe_value(arguments['raw'])}"]
        else:
            if not is_loaded():
                await asyncio.to_thread(load_validator)  # its import would stall the loop ~0.1 s
            problems = validate_arguments(tool.parameters, arguments)
        if problems:
            return ToolResult(
                call.id,
                call.name,
                False,
                f"工具 {call.name} 参数错误（invalid arguments）：{'; '.join(problems)}。"
                f"参数定义：{_signature_hint(tool.parameters)}",
                tool.plugin,
            )
        seconds = timeout if timeout is not None else self.timeout_for(tool)
        assert tool.handler is not None
        started = time.perf_counter()
        try:
            async with asyncio.timeout(seconds):
                value = await call_in_pool("tools", tool.plugin, tool.handler, **arguments)
        except TimeoutError:
            log.warning("tool %s (plugin %s) timed out after %g s", call.name, tool.plugin, seconds)
            return ToolResult(
                call.id, call.name, False, f"工具 {call.name} 执行超时（{seconds:g}秒），已取消", tool.plugin
            )
        except asyncio.CancelledError:
            raise
        except HomeAgentError as exc:  # a deliberate, explained refusal: no traceback, not a crash
            log.info("tool %s (plugin %s) refused: %s", call.name, tool.plugin, exc)
            return ToolResult(call.id, call.name, False, f"工具 {call.name} 失败：{exc}", tool.plugin)
        except Exception as exc:
            log.error("tool %s (plugin %s) raised", call.name, tool.plugin, exc_info=True)
            return ToolResult(
                call.id, call.name, False, f"工具 {call.name} 执行崩溃：{type(exc).__name__}: {exc}", tool.plugin
            )
        if isinstance(value, ToolResult):
            value.call_id, value.name, value.plugin = call.id, call.name, tool.plugin
            return value
        try:
            text = _result_text(value)
        except RecursionError:
            return self._unserialisable(call, tool, "it is nested too deeply to encode as JSON")
        except (TypeError, ValueError) as exc:  # e.g. a circular reference
            return self._unserialisable(call, tool, f"{type(exc).__name__}: {exc}")
        log.debug(
            "tool %s ran in %.1f ms: %s", call.name, (time.perf_counter() - started) * 1000, text[:_MAX_RESULT_LOG]
        )
        return ToolResult(call.id, call.name, True, text, tool.plugin)

    @staticmethod
    def _unserialisable(call: ToolCall, tool: ToolDef, why: str) -> ToolResult:
        """A result that cannot become text is one failed call, not a failed turn."""
        log.warning("tool %s (plugin %s) returned a result that cannot be encoded: %s", call.name, tool.plugin, why)
        return ToolResult(
            call.id,
            call.name,
            False,
            f"工具 {call.name} 的结果无法转换为文本（the tool's result could not be encoded: {why}）；"
            "请换一种参数再试或改用其他工具",
            tool.plugin,
        )

    def batch_is_parallel(self, calls: Sequence[ToolCall]) -> bool:
        """True when every tool of the batch is ``parallel_safe`` and none is ``serial``."""
        if len(calls) < 2:
            return False
        for call in calls:
            tool = self._tools.get(call.name)
            if tool is None or not tool.parallel_safe or tool.serial:
                return False
        return True


_R = typing.TypeVar("_R")


async def run_batch(
    calls: Sequence[ToolCall],
    run_one: Callable[[ToolCall], Awaitable[_R]],
    *,
    parallel: bool,
) -> list[_R]:
    """Run ``run_one`` for each call: concurrently when ``parallel``, else one after another."""
    if parallel:
        return list(await asyncio.gather(*(run_one(c) for c in calls)))
    return [await run_one(c) for c in calls]


class PluginToolRegistry:
    """The registry handed to one plugin's ``register_tools``: stamps its name on each tool."""

    def __init__(self, registry: ToolRegistry, plugin: str) -> None:
        self._registry = registry
        self.plugin = plugin
        self.added: list[ToolDef] = []

    def add(self, tool: ToolDef | Callable[..., Any], **options: Unpack[ToolOptions]) -> ToolDef:
        """Register a tool (a typed function or a ``ToolDef``) for this plugin."""
        definition = self._registry.add(tool, plugin=self.plugin, **options)
        self.added.append(definition)
        return definition
