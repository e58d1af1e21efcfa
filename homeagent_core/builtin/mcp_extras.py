"""MCP beyond tools: a server's resources and prompts, offered to the model as tools.

For a connected server that announces the ``resources`` capability the model gets
``<server>_resource_list()`` (resources and resource templates), ``<server>_resource_read(uri)``
(text as text, cut at :data:`MAX_TEXT_CHARS`; binary contents stored in the media store and
named by digest, or summarised when the agent has no media store) and, when the server offers
subscriptions, ``<server>_resource_subscribe(uri)`` / ``<server>_resource_unsubscribe(uri)``:
each update is published as ``mcp_resource_updated``, arrives as an input in the conversation
that subscribed, and is listed by ``mcp_servers``. A server with ``prompts`` gives
``<server>_prompt_list()`` and ``<server>_prompt_get(name, arguments)``, which returns the
prompt's messages as text for the model to follow, like a skill; the prompts are also listed in
the system prompt the way the skills index is (:func:`prompts_block`).

Tools that declare ``execution.taskSupport = "required"`` need MCP's task-augmented calls,
which HomeAgent does not make; they are registered with a handler that says so instead of
letting the server answer ``-32601``. Error answers become tool errors naming the server
(:func:`mcp_error_text`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from typing import Any

from homeagent_sdk import ToolDef, ToolError

__all__ = [
    "MAX_TEXT_CHARS",
    "extra_tools",
    "mcp_error_text",
    "needs_tasks",
    "offered",
    "prompt_index",
    "prompts_block",
    "task_message",
    "task_refusal",
]

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002
MAX_TEXT_CHARS = 100_000
"""Most characters of one resource or prompt returned to the model (the rest is cut, with a note)."""
MAX_BLOB_BYTES = 50 * 1024 * 1024
"""Largest binary content stored in the media store."""

BlobStore = Callable[[bytes, str, str], Awaitable[str]]
"""Stores ``(data, mime, name)`` in the media store and returns its digest."""

Caller = Callable[[str, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]


def needs_tasks(tool: Any) -> bool:
    """True when an MCP tool can only be called as a task."""
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def task_message(server: str, tool: str) -> str:
    """What the model reads for a tool that needs task-augmented calls."""
    return (
        f"not supported: {server} requires task-augmented calls for {tool!r} (it only runs as an MCP task, "
        "which HomeAgent does not support); use another tool"
    )


def task_refusal(server: str, tool: str) -> Callable[..., Awaitable[str]]:
    """The handler of a task-only tool: a clear refusal for the model."""

    async def refuse(**_arguments: Any) -> str:
        raise ToolError(task_message(server, tool))

    return refuse


def mcp_error_text(server: str, what: str, exc: Any) -> str:
    """A tool error naming the server for a JSON-RPC error answer (``MCPError``)."""
    code, message = getattr(exc, "code", None), getattr(exc, "message", "") or str(exc)
    if code == METHOD_NOT_FOUND:
        return f"MCP server {server!r} does not support {what} (method not found, -32601)"
    if code == RESOURCE_NOT_FOUND:
        return f"MCP server {server!r}: {what}: resource not found ({message})"
    if code == INVALID_PARAMS:
        return f"MCP server {server!r} rejected {what}: {message} (invalid params, -32602)"
    return f"MCP server {server!r}: {what} failed: {message} (error {code})"


def _cut(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… cut: {len(text) - limit} more characters]"


async def _blob_text(store: BlobStore | None, blob: str, mime: str, where: str) -> str:
    """Decode a base64 blob and store it as media, or summarise it when that is not possible."""
    try:
        data = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return f"[{mime} content of {where} is not valid base64; nothing stored]"
    if len(data) > MAX_BLOB_BYTES:
        return f"[{mime}, {len(data)} bytes from {where}: larger than {MAX_BLOB_BYTES} bytes, not stored]"
    if store is None:
        return f"[{mime}, {len(data)} bytes from {where}: binary content, not stored (this agent has no media store)]"
    digest = await store(data, mime, where.rstrip("/").rsplit("/", 1)[-1][:120])
    return f"[{mime}, {len(data)} bytes from {where}, stored as media {digest}]"


async def _content_text(contents: list[Any], uri: str, store: BlobStore | None) -> str:
    if not contents:
        return f"(resource {uri} is empty)"
    parts: list[str] = []
    for item in contents:
        where = str(getattr(item, "uri", "") or uri)
        mime = getattr(item, "mime_type", None) or "application/octet-stream"
        text = getattr(item, "text", None)
        body = _cut(text) if text is not None else await _blob_text(store, getattr(item, "blob", "") or "", mime, where)
        parts.append(body if len(contents) == 1 else f"--- {where} ({mime}) ---\n{body}")
    return "\n".join(parts)


async def _prompt_text(result: Any, name: str, store: BlobStore | None) -> str:
    lines = []
    if getattr(result, "description", None):
        lines.append(f"# {result.description}")
    for message in result.messages:
        content = message.content
        kind = getattr(content, "type", "")
        text = getattr(content, "text", None)
        if kind in ("image", "audio"):
            text = await _blob_text(store, content.data, content.mime_type, f"prompt {name}")
        elif kind == "resource":
            resource = content.resource
            text = getattr(resource, "text", None)
            if text is None:
                mime = resource.mime_type or "application/octet-stream"
                text = await _blob_text(store, resource.blob, mime, str(resource.uri))
        elif kind == "resource_link":
            text = f"[resource {content.uri}]"
        elif text is None:
            text = f"[{kind or 'content'}]"
        lines.append(f"[{message.role}] {text}")
    return _cut("\n".join(lines))


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
    server: str,
    offers: tuple[bool, bool],
    capabilities: Any,
    call: Caller,
    name_of: Callable[[str], str],
    *,
    store: BlobStore | None = None,
    subscribe: Callable[[str], Awaitable[str]] | None = None,
    unsubscribe: Callable[[str], Awaitable[str]] | None = None,
) -> list[ToolDef]:
    """Resource and prompt tools for one server, per what it offers (see :func:`offered`).

    ``call(label, fn)`` runs ``fn(session)`` with the connection's timeout and error handling;
    ``name_of(suffix)`` makes the model-facing tool name; ``store`` keeps binary contents in
    the media store; ``subscribe``/``unsubscribe`` run the connection's subscription handling.
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
            return await _content_text(list(getattr(result, "contents", []) or []), uri, store)

        tools.append(ToolDef(name=name_of("resource_list"), handler=resource_list,
                             description=f"{tag} List the server's resources (URIs, names, templates).",
                             parameters={"type": "object", "properties": {}, "additionalProperties": False}))
        tools.append(ToolDef(name=name_of("resource_read"), handler=resource_read,
                             description=f"{tag} Read one resource by URI (see {name_of('resource_list')}); "
                             "binary contents are stored as media and named by digest.",
                             parameters={"type": "object", "properties": {"uri": {"type": "string"}},
                                         "required": ["uri"], "additionalProperties": False}))
        if getattr(resources, "subscribe", False) and subscribe is not None and unsubscribe is not None:
            uri_only = {"type": "object", "properties": {"uri": {"type": "string"}},
                        "required": ["uri"], "additionalProperties": False}
            tools.append(ToolDef(name=name_of("resource_subscribe"), handler=subscribe, parameters=uri_only,
                                 description=f"{tag} Subscribe to changes of one resource; each change arrives "
                                 "later as an input in this conversation."))
            tools.append(ToolDef(name=name_of("resource_unsubscribe"), handler=unsubscribe, parameters=uri_only,
                                 description=f"{tag} Stop receiving the changes of a subscribed resource."))
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
            return await _prompt_text(result, name, store)

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
