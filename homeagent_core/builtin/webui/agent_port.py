"""How the web UI talks to the rest of the agent: one place that knows the kernel's API."""

from __future__ import annotations

import asyncio
import os
import resource
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from homeagent_core.workers import run_blocking
from homeagent_sdk.errors import HomeAgentError
from homeagent_sdk.types import InjectOptions, MediaAttachment, Principal, Priority

if TYPE_CHECKING:
    from homeagent_core.plugins.privileged import KernelAccess
    from homeagent_core.plugins.sdk import Services

__all__ = [
    "ask",
    "ask_with_media",
    "interrupt",
    "kernel_status",
    "llm_configured",
    "memory_tools",
    "persona",
    "plugin_rows",
    "set_persona",
    "stream",
]

ASK_TIMEOUT_S = 300.0


def _reply_dict(reply: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"response": str(reply)}
    if getattr(reply, "reasoning_content", ""):
        out["reasoning_content"] = reply.reasoning_content
    if getattr(reply, "usage", None):
        out["usage"] = reply.usage
    if getattr(reply, "skipped", False):
        out["skipped"] = True
    return out


async def ask(
    kernel: KernelAccess,
    text: str,
    *,
    channel: str,
    source: str,
    no_memory: bool = False,
    principal: Principal | None = None,
) -> dict[str, Any]:
    """Inject ``text`` and wait for the reply (``principal`` None: the owner's login).

    Raises:
        TimeoutError: no reply within 300 s.
    """
    options = InjectOptions(no_memory=no_memory, principal=principal)
    reply = await kernel.io_for(source).inject_input_sync(text, channel, options, timeout=ASK_TIMEOUT_S)
    return _reply_dict(reply)


async def ask_with_media(
    kernel: KernelAccess,
    text: str,
    data: bytes,
    mime: str,
    name: str,
    *,
    channel: str,
    source: str,
    principal: Principal | None = None,
) -> dict[str, Any]:
    """Inject ``text`` with one attachment and wait for the reply (``principal`` None: the owner's login)."""
    attachment = MediaAttachment(mime=mime, data=data, name=name)
    options = InjectOptions(principal=principal) if principal is not None else None
    item = kernel.submit(
        kernel.make_item(text, channel, source=source, options=options, attachments=[attachment], reply=True)
    )
    assert item.reply is not None  # made with reply=True
    async with asyncio.timeout(ASK_TIMEOUT_S):
        reply = await asyncio.shield(item.reply)
    return _reply_dict(reply)


def stream(
    kernel: KernelAccess,
    text: str,
    *,
    channel: str,
    source: str,
    no_memory: bool = False,
    principal: Principal | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Inject ``text`` now and return an iterator of this input's own deltas as they arrive.

    Yields ``{"kind": "content" | "reasoning", "text"}`` items, then one
    ``{"kind": "done", "response", "usage"?, "reasoning_content"?}``. Subscribed before the
    input is queued, so no delta is lost; deltas of other turns are never mixed in.

    Raises:
        InputQueueFull: the agent is busy; raised here, before any response is started.
    """
    options = InjectOptions(no_memory=no_memory, principal=principal)
    return _stream_dicts(kernel.open_stream(text, channel, options=options, source=source, parts=True))


async def _stream_dicts(parts: AsyncIterator[Any]) -> AsyncIterator[dict[str, Any]]:
    async for part in parts:
        if part.kind == "done":
            yield {"kind": "done", **_reply_dict(part.reply)}
        else:
            yield {"kind": part.kind, "text": part.text}


async def interrupt(kernel: KernelAccess, text: str, *, channel: str, source: str) -> None:
    await kernel.io_for(source).inject_interrupt(text, channel, InjectOptions(no_memory=True, priority=Priority.L2))


def llm_configured(services: Services) -> bool:
    """Whether any LLM source has an API key or is a local (keyless) endpoint."""
    config = services.config
    if config.get("core.llm.api_key"):
        return True
    for key, value in config.items("core.llm.sources.").items():
        if key.endswith(".api_key") and value:
            return True
        if key.endswith(".base_url") and isinstance(value, str) and ("127.0.0.1" in value or "localhost" in value):
            return True
    return False


def plugin_rows(services: Services) -> list[dict[str, Any]]:
    host = services.host
    if host is None:
        return []
    disabled = services.config.disabled_plugins()
    rows = []
    for info in host.plugins():
        row = info.to_dict()
        row["disabled"] = info.name in disabled
        rows.append(row)
    return rows


async def kernel_status(services: Services, *, sse_clients: int = 0) -> dict[str, Any]:
    """The snapshot behind ``GET /api/v1/kernel`` (and the CLI's ``/status``).

    What lives on the event loop (tasks, the kernel, the plugins) is read there; the parts that
    touch files or wait for store locks (the health history, memory's status) run in the
    ``memory`` worker pool, so a status poll never stalls the loop behind a writer's fsync.
    """
    status = _loop_status(services, sse_clients)
    status.update(await run_blocking("memory", _blocking_status, services))
    return status


def _loop_status(services: Services, sse_clients: int) -> dict[str, Any]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    status: dict[str, Any] = {
        "plugins": plugin_rows(services),
        "runtime": {"pid": os.getpid(), "max_rss_mb": round(usage.ru_maxrss / 1024, 1),
                    "tasks": len(asyncio.all_tasks())},
        "llm_configured": llm_configured(services),
        "sse_clients": sse_clients,
    }
    kernel = services.kernel
    if kernel is not None:
        status["kernel"] = kernel.status()
        status["tools"] = sorted(kernel.tools.names())
        provider = kernel.provider
        if hasattr(provider, "list_sources"):
            status["llm_sources"] = provider.list_sources()
    return status


def _blocking_status(services: Services) -> dict[str, Any]:
    from homeagent_core.builtin.healthcheck import read_history

    status: dict[str, Any] = {}
    try:
        points = read_history(services.data_dir)["points"]
    except HomeAgentError as exc:
        status["healthcheck"] = {"error": str(exc)}
    else:
        status["healthcheck"] = {"last": points[-1] if points else None, "kept": len(points)}
    extra = getattr(services, "status_extra", None)
    if callable(extra):
        status.update(extra())
    return status


MEMORY_TOOL_OWNERS = ("memory", "knowledge")


def memory_tools(kernel: KernelAccess) -> dict[str, Any]:
    """The memory and knowledge tools the model has, and the tool catalogue of its prompt."""
    groups = kernel.tools.by_plugin()
    tools = [
        {"name": t.name, "plugin": t.plugin, "description": t.description, "parameters": t.parameters}
        for owner in MEMORY_TOOL_OWNERS
        for t in groups.get(owner, ())
    ]
    return {"tools": tools, "tool_prompt": kernel.prompt.catalogue(kernel.tools)}


def persona(kernel: KernelAccess) -> str:
    """The persona text the running kernel puts in its prompt."""
    return str(kernel.prompt.persona)


def set_persona(kernel: KernelAccess, text: str) -> None:
    """Use ``text`` as the persona from the next turn on (no restart)."""
    kernel.prompt.persona = text
