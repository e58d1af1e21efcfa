"""MCP beyond tools: a server's resources and prompts, offered to the model as tools.

For a connected server that announces the ``resources`` capability the model gets
``<server>_resource_list()`` (resources and resource templates), ``<server>_resource_read(uri)``
and, when the server offers subscriptions, ``<server>_resource_subscribe(uri)``: updates the
server then announces are listed by ``mcp_servers``. A server with ``prompts`` gives
``<server>_prompt_list()`` and ``<server>_prompt_get(name, arguments)``, which returns the
prompt's messages as text for the model to follow, like a skill; the prompts are also listed in
the system prompt the way the skills index is (:func:`prompts_block`).

Tools that declare ``execution.taskSupport = "required"`` need MCP's task-augmented calls,
which HomeAgent does not make; they are registered with a handler that says so instead of
letting the server answer ``-32601``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from homeagent_sdk import ToolDef, ToolError

__all__ = ["extra_tools", "needs_tasks", "offered", "prompt_index", "prompts_block", "task_refusal"]

METHOD_NOT_FOUND = -32601

Caller = Callable[[str, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]


def needs_tasks(tool: Any) -> bool:
    """True when an MCP tool can only be called as a task."""
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def task_refusal(server: str, tool: str) -> Callable[..., Awaitable[str]]:
    """The handler of a task-only tool: a clear refusal for the model."""

    async def refuse(**_arguments: Any) -> str:
        raise ToolError(
            f"MCP server {server!r}: the tool {tool!r} only runs as an MCP task (execution.taskSupport "
            "= required), and task-augmented calls are not supported by HomeAgent; use another tool"
        )

    return refuse


def _content_text(contents: list[Any]) -> str:
    parts: list[str] = []
    for item in contents:
        text = getattr(item, "text", None)
        if text is not None:
            parts.append(text)
        else:
            blob = getattr(item, "blob", "") or ""
            parts.append(f"[binary {getattr(item, 'mime_type', '') or 'data'}, {len(blob) * 3 // 4} bytes, {item.uri}]")
    return "\n".join(parts)


def _prompt_text(result: Any) -> str:
    lines = []
    if getattr(result, "description", None):
        lines.append(f"# {result.description}")
    for message in result.messages:
        content = message.content
        text = getattr(content, "text", None)
        if text is None:
            resource = getattr(content, "resource", None)
            text = getattr(resource, "text", None) or f"[{getattr(content, 'type', 'content')}]"
        lines.append(f"[{message.role}] {text}")
    return "\n".join(lines)


async def offered(session: Any, capabilities: Any) -> tuple[bool, bool]:
    """Whether the server actually has resources (or templates) and prompts.

    A capability announced with nothing behind it would only add empty tools for the model.
    """

    async def any_of(kind: str, *calls: Callable[[], Awaitable[Any]]) -> bool:
        if getattr(capabilities, kind, None) is None:
            return False
        for fn in calls:
            try:
                page = await fn()
            except Exception:  # an optional listing the server may not implement
                continue
            items = getattr(page, "resources", None) or getattr(page, "resource_templates", None) \
                or getattr(page, "prompts", None)
            if items:
                return True
        return False

    has_resources = await any_of("resources", session.list_resources, session.list_resource_templates)
    has_prompts = await any_of("prompts", session.list_prompts)
    return has_resources, has_prompts


async def prompt_index(session: Any) -> list[tuple[str, str]]:
    """``(name, description)`` of every prompt of a server (first page), for the prompt catalogue."""
    listed = await session.list_prompts()
    return [(p.name, " ".join((p.description or "").split())) for p in listed.prompts]


def prompts_block(catalogue: dict[str, list[tuple[str, str]]], name_of: Callable[[str, str], str]) -> str:
    """The system-prompt block listing MCP prompts like skills ("" when there are none)."""
    lines = [f"- {server}/{name}: {desc or name}（用 {name_of(server, 'prompt_get')} 取得）"
             for server, prompts in sorted(catalogue.items()) for name, desc in prompts]
    if not lines:
        return ""
    return "## MCP 提示（像技能一样：需要时先取得完整内容再照做）\n" + "\n".join(lines)


def extra_tools(
    server: str, offers: tuple[bool, bool], capabilities: Any, call: Caller, name_of: Callable[[str], str]
) -> list[ToolDef]:
    """Resource and prompt tools for one server, per what it offers (see :func:`offered`).

    ``call(label, fn)`` runs ``fn(session)`` with the connection's timeout and error handling;
    ``name_of(suffix)`` makes the model-facing tool name.
    """
    tools: list[ToolDef] = []
    resources = getattr(capabilities, "resources", None) if offers[0] else None
    prompts = getattr(capabilities, "prompts", None) if offers[1] else None
    tag = f"[MCP/{server}]"
    if resources is not None:

        async def resource_list() -> str:
            listed = await call("resources/list", lambda s: s.list_resources())
            rows = [{"uri": str(r.uri), "name": r.name, "description": r.description or "",
                     "mime_type": r.mime_type or ""} for r in listed.resources]
            try:
                templates = await call("resources/templates/list", lambda s: s.list_resource_templates())
                rows += [{"uri_template": t.uri_template, "name": t.name, "description": t.description or ""}
                         for t in templates.resource_templates]
            except ToolError:
                pass  # templates are optional
            return json.dumps(rows, ensure_ascii=False)

        async def resource_read(uri: str) -> str:
            result = await call(f"resources/read {uri}", lambda s: s.read_resource(uri))
            return _content_text(list(getattr(result, "contents", []) or []))

        tools.append(ToolDef(name=name_of("resource_list"), handler=resource_list,
                             description=f"{tag} List the server's resources (URIs, names, templates).",
                             parameters={"type": "object", "properties": {}, "additionalProperties": False}))
        tools.append(ToolDef(name=name_of("resource_read"), handler=resource_read,
                             description=f"{tag} Read one resource by URI (see {name_of('resource_list')}).",
                             parameters={"type": "object", "properties": {"uri": {"type": "string"}},
                                         "required": ["uri"], "additionalProperties": False}))
        if getattr(resources, "subscribe", False):

            async def resource_subscribe(uri: str) -> str:
                await call(f"resources/subscribe {uri}", lambda s: s.subscribe_resource(uri))
                return f"subscribed to {uri}; updates are listed by mcp_servers"

            tools.append(ToolDef(name=name_of("resource_subscribe"), handler=resource_subscribe,
                                 description=f"{tag} Subscribe to updates of one resource.",
                                 parameters={"type": "object", "properties": {"uri": {"type": "string"}},
                                             "required": ["uri"], "additionalProperties": False}))
    if prompts is not None:

        async def prompt_list() -> str:
            listed = await call("prompts/list", lambda s: s.list_prompts())
            return json.dumps([{"name": p.name, "description": p.description or "",
                                "arguments": [{"name": a.name, "required": bool(a.required),
                                               "description": a.description or ""} for a in p.arguments or []]}
                               for p in listed.prompts], ensure_ascii=False)

        async def prompt_get(name: str, arguments: dict[str, Any] | None = None) -> str:
            args = {str(k): str(v) for k, v in (arguments or {}).items()}
            result = await call(f"prompts/get {name}", lambda s: s.get_prompt(name, args))
            return _prompt_text(result)

        tools.append(ToolDef(name=name_of("prompt_list"), handler=prompt_list,
                             description=f"{tag} List the server's prompts (reusable instructions, like skills).",
                             parameters={"type": "object", "properties": {}, "additionalProperties": False}))
        tools.append(ToolDef(name=name_of("prompt_get"), handler=prompt_get,
                             description=f"{tag} Get one prompt filled with its arguments; follow what it says.",
                             parameters={"type": "object", "properties": {
                                 "name": {"type": "string"},
                                 "arguments": {"type": "object", "additionalProperties": {"type": "string"}}},
                                 "required": ["name"], "additionalProperties": False}))
    return tools
