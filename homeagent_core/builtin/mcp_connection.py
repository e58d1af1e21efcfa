"""Connections to MCP servers: sessions over stdio / streamable HTTP / SSE, and their supervision.

A :class:`ServerConnection` keeps one configured server connected: it registers the server's
tools (and, through :mod:`homeagent_core.builtin.mcp_extras`, its resources and prompts) while
the server is up, detaches them when it dies, reconnects with exponential backoff and renews
resource subscriptions. The ``mcp`` SDK is imported only when a server is actually used.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from homeagent_core.builtin.mcp_extras import (
    MAX_BLOB_BYTES,
    METHOD_NOT_FOUND,
    BlobStore,
    extra_tools,
    mcp_error_text,
    needs_tasks,
    offered,
    prompt_index,
    task_message,
    task_refusal,
)
from homeagent_sdk import HomeAgentError, ToolDef, ToolError
from homeagent_sdk.types import MediaAttachment, ToolResult

__all__ = [
    "CHANNEL",
    "PLUGIN_NAME",
    "ServerConnection",
    "ServerSpec",
    "describe_error",
    "list_all_tools",
    "open_session",
    "probe",
    "probe_offer",
    "result_output",
    "result_text",
    "tool_name",
]

log = logging.getLogger("homeagent_core.builtin.mcp")

PLUGIN_NAME = "mcp"
CHANNEL = "mcp"
"""Input channel of resource changes when the subscribing turn had no conversation."""

_TOOL_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class ServerSpec:
    """One configured MCP server."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str = ""
    url: str = ""
    transport: str = "stdio"
    headers: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        if self.transport == "stdio":
            return " ".join([self.command, *self.args])
        return f"{self.url} ({self.transport})"


def tool_name(server: str, tool: str) -> str:
    """``<server>_<tool>`` made safe for LLM function names (at most 64 characters)."""
    return _TOOL_CHARS.sub("_", f"{server}_{tool}")[:64]


# --------------------------------------------------------------------------- sessions


@contextlib.asynccontextmanager
async def open_session(
    spec: ServerSpec, *, errlog: TextIO | None = None, timeout: float = 30.0, message_handler: Any = None
) -> AsyncIterator[Any]:
    """Connect to one server and yield an initialised ``mcp.ClientSession``."""
    import sys

    from mcp import ClientSession

    async with contextlib.AsyncExitStack() as stack:
        if spec.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=spec.command, args=list(spec.args), env=dict(spec.env) or None, cwd=spec.cwd or None
            )
            streams = await stack.enter_async_context(stdio_client(params, errlog=errlog or sys.stderr))
        elif spec.transport == "sse":
            from mcp.client.sse import sse_client

            streams = await stack.enter_async_context(
                sse_client(spec.url, headers=dict(spec.headers) or None, timeout=timeout)
            )
        else:
            from mcp.client.streamable_http import streamable_http_client

            client = None
            if spec.headers:
                from mcp.shared._httpx_utils import create_mcp_http_client

                client = await stack.enter_async_context(create_mcp_http_client(headers=dict(spec.headers)))
            streams = await stack.enter_async_context(streamable_http_client(spec.url, http_client=client))
        read, write = streams[0], streams[1]
        extra = {"message_handler": message_handler} if message_handler is not None else {}
        session = await stack.enter_async_context(ClientSession(read, write, **extra))
        async with asyncio.timeout(timeout):
            await session.initialize()
        yield session


async def list_all_tools(session: Any) -> list[Any]:
    """Every tool of the server (following pagination, at most 100 pages)."""
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        if cursor:
            from mcp.types import PaginatedRequestParams

            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        else:
            page = await session.list_tools()
        tools.extend(page.tools)
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            break
    return tools


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(getattr(block, "data", "") or "") * 3 // 4
        return f"[{kind} {getattr(block, 'mime_type', '')}, {size} bytes]"
    if kind == "resource":
        resource = block.resource
        return getattr(resource, "text", None) or f"[resource {resource.uri}]"
    if kind == "resource_link":
        return f"[resource {block.uri}]"
    return str(block)


def _structured(result: Any, parts: list[str]) -> list[str]:
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        return [json.dumps(structured, ensure_ascii=False)]
    return parts


def result_text(result: Any) -> str:
    """Flatten a ``CallToolResult`` into text for the model (images and audio as a size note)."""
    parts = [_block_text(block) for block in getattr(result, "content", None) or []]
    return "\n".join(_structured(result, parts))


async def result_output(result: Any, where: str, store: BlobStore | None = None) -> tuple[str, list[MediaAttachment]]:
    """A ``CallToolResult`` as text plus its images and audio as media attachments.

    Each image or audio block is decoded, kept in the media store when there is one (its text
    names the media digest) and attached with its bytes, so a model that takes images gets the
    image like an upload right after the tool result. A block that is not valid base64 or is
    over :data:`MAX_BLOB_BYTES` is only described.
    """
    parts: list[str] = []
    media: list[MediaAttachment] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind not in ("image", "audio"):
            parts.append(_block_text(block))
            continue
        mime = str(getattr(block, "mime_type", "") or f"{kind}/*")
        try:
            data = base64.b64decode(getattr(block, "data", "") or "", validate=True)
        except ValueError:
            parts.append(f"[{kind} {mime} from {where} is not valid base64; dropped]")
            continue
        if len(data) > MAX_BLOB_BYTES:
            parts.append(f"[{kind} {mime}, {len(data)} bytes from {where}: over {MAX_BLOB_BYTES} bytes, dropped]")
            continue
        name = f"{where}-{len(media) + 1}.{mime.rsplit('/', 1)[-1].split('+')[0] or 'bin'}"
        digest, kept = "", ", not stored (this agent has no media store)"
        if store is not None:
            try:
                digest = await store(data, mime, name)
            except HomeAgentError as exc:
                kept = f", not stored: {exc}"
            else:
                kept = f", stored as media {digest}"
        parts.append(f"[{kind} {mime}, {len(data)} bytes{kept}; attached below]")
        media.append(MediaAttachment(digest=digest, mime=mime, data=data, name=name))
    return "\n".join(_structured(result, parts)), media


async def probe(spec: ServerSpec, *, timeout: float = 30.0, errlog: TextIO | None = None) -> list[dict[str, Any]]:
    """Connect once and return the server's tools (``name``, ``description``, ``input_schema``)."""
    tools, _ = await probe_offer(spec, timeout=timeout, errlog=errlog)
    return tools


async def probe_offer(
    spec: ServerSpec, *, timeout: float = 30.0, errlog: TextIO | None = None
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Connect once: the server's tools, and how many resources, resource templates and prompts it has."""
    from mcp import MCPError

    counts: dict[str, int] = {}
    async with asyncio.timeout(timeout), open_session(spec, errlog=errlog, timeout=timeout) as session:
        capabilities = session.server_capabilities
        tools = await list_all_tools(session) if getattr(capabilities, "tools", None) is not None else []
        listings = (
            ("resources", "resources", session.list_resources),
            ("resources", "resource_templates", session.list_resource_templates),
            ("prompts", "prompts", session.list_prompts),
        )
        for capability, attribute, list_page in listings:
            if getattr(capabilities, capability, None) is not None:
                with contextlib.suppress(MCPError):  # an optional listing the server lacks
                    counts[attribute] = len(getattr(await list_page(), attribute))
    rows = [{"name": t.name, "description": t.description or "", "input_schema": t.input_schema} for t in tools]
    return rows, counts


# --------------------------------------------------------------------------- supervision


ToolSink = Any  # the kernel's ToolRegistry: add(ToolDef, plugin=...) and remove(name)


@dataclass
class ServerConnection:
    """Keeps one server connected and its tools registered while it is up."""

    spec: ServerSpec
    tools: ToolSink
    call_timeout: float = 60.0
    ping_interval: float = 15.0
    max_backoff: float = 60.0
    connect_timeout: float = 30.0
    errlog: TextIO | None = None
    #: Publishes a bus event (``sdk.events.publish``); None outside an agent.
    publish: Callable[[str, dict[str, Any]], None] | None = None
    #: Injects a text input ``(text, channel)`` when a subscribed resource changes.
    inject: Callable[[str, str], Awaitable[None]] | None = None
    #: Stores binary content ``(data, mime, name)`` in the media store and returns its digest.
    media: Callable[[bytes, str, str], Awaitable[str]] | None = None
    #: The conversation of the turn calling a tool (``<channel>:<conversation>``), or "".
    conversation: Callable[[], str] | None = None
    state: str = "starting"
    last_error: str = ""
    connects: int = 0
    registered: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: URIs of subscribed resources the server said changed (newest last, at most 100).
    updates: list[str] = field(default_factory=list)
    #: ``(name, description)`` of the server's prompts while it is connected.
    prompts: list[tuple[str, str]] = field(default_factory=list)
    #: Subscribed resource URIs and the conversation each change goes to (kept across reconnects).
    subscriptions: dict[str, str] = field(default_factory=dict)
    _session: Any = None
    _broken: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _up: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp-{self.spec.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._detach()
        self.state = "stopped"

    async def wait_connected(self, timeout: float = 30.0) -> None:
        async with asyncio.timeout(timeout):
            await self._up.wait()

    def status(self) -> dict[str, Any]:
        return {
            "name": self.spec.name,
            "server": self.spec.describe(),
            "transport": self.spec.transport,
            "state": self.state,
            "tools": list(self.registered),
            "skipped_tools": list(self.skipped),
            "resource_updates": list(self.updates),
            "subscriptions": sorted(self.subscriptions),
            "connects": self.connects,
            "last_error": self.last_error,
        }

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self._serve_once()
                failures = 0
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # ExceptionGroups from the SDK's task groups included
                self.last_error = _describe(exc)
                log.warning("MCP server %s: %s", self.spec.name, self.last_error)
            finally:
                self._session = None
                self._up.clear()
                self._detach()
            self.state = "reconnecting"
            delay = min(self.max_backoff, 2.0 ** min(failures, 16))
            failures += 1
            await asyncio.sleep(delay)

    async def _serve_once(self) -> None:
        self.state = "connecting"
        async with open_session(
            self.spec, errlog=self.errlog, timeout=self.connect_timeout, message_handler=self._on_message
        ) as session:
            capabilities = session.server_capabilities
            tools = await list_all_tools(session) if getattr(capabilities, "tools", True) is not None else []
            self._session = session
            self._broken.clear()
            self._attach(tools)
            offers = await offered(session, capabilities)
            self._attach_extras(capabilities, offers)
            await self._resubscribe(session)
            if offers[1]:
                with contextlib.suppress(Exception):
                    self.prompts = await prompt_index(session)
            self.state = "connected"
            self.connects += 1
            self.last_error = ""
            self._up.set()
            log.info("MCP server %s connected: %d tools", self.spec.name, len(self.registered))
            while True:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.ping_interval):
                        await self._broken.wait()
                if self._broken.is_set():
                    raise ConnectionError("a call found the connection broken")
                async with asyncio.timeout(max(5.0, self.ping_interval)):
                    await session.send_ping()

    def _attach(self, tools: list[Any]) -> None:
        self.skipped = []
        for tool in tools:
            name = tool_name(self.spec.name, tool.name)
            schema = dict(tool.input_schema or {"type": "object", "properties": {}})
            schema.pop("title", None)
            description = f"[MCP/{self.spec.name}] {(tool.description or tool.name).strip()}"
            handler = task_refusal(self.spec.name, tool.name) if needs_tasks(tool) else self._handler(tool.name)
            definition = ToolDef(
                name=name,
                description=description,
                parameters=schema,
                timeout=self.call_timeout + 5,
                handler=handler,
            )
            self._add(definition, tool.name)

    def _add(self, definition: ToolDef, label: str) -> None:
        try:
            self.tools.add(definition, plugin=PLUGIN_NAME)
        except Exception as exc:
            self.skipped.append(f"{label}: {exc}")
            log.warning("MCP server %s: tool %s not registered: %s", self.spec.name, label, exc)
            return
        self.registered.append(definition.name)

    def _attach_extras(self, capabilities: Any, offers: tuple[bool, bool]) -> None:
        names = lambda suffix: tool_name(self.spec.name, suffix)  # noqa: E731
        extras = extra_tools(
            self.spec.name, offers, capabilities, self.session_call, names,
            store=self.media, subscribe=self.subscribe, unsubscribe=self.unsubscribe,
        )
        for definition in extras:
            definition.timeout = self.call_timeout + 5
            self._add(definition, definition.name)

    async def _on_message(self, message: Any) -> None:
        """Server notifications: a subscribed resource changed (event + input), or a list changed (event)."""
        root = getattr(message, "root", message)
        method = getattr(root, "method", "")
        if method == "notifications/resources/updated":
            uri = str(root.params.uri)
            self.updates = [*self.updates, uri][-100:]
            if self.publish is not None:
                self.publish("mcp_resource_updated", {"server": self.spec.name, "uri": uri})
            if self.inject is not None and uri in self.subscriptions:
                text = (
                    f"[MCP/{self.spec.name}] the subscribed resource {uri} changed; "
                    f"read it with {tool_name(self.spec.name, 'resource_read')}"
                )
                try:
                    await self.inject(text, self.subscriptions[uri] or CHANNEL)
                except Exception as exc:  # a full queue must not break the connection
                    log.warning("MCP server %s: change of %s not delivered: %s", self.spec.name, uri, _describe(exc))
        elif self.publish is not None and method.endswith("/list_changed"):
            self.publish("mcp_list_changed", {"server": self.spec.name, "method": method})

    async def subscribe(self, uri: str) -> str:
        """Subscribe to a resource; its changes come back as inputs in the calling conversation."""
        if not uri.strip():
            raise ToolError(f"give the uri of a resource of MCP server {self.spec.name!r} to subscribe to")
        await self.session_call(f"resources/subscribe {uri}", lambda s: _subscription(s, uri, True))
        self.subscriptions[uri] = self.conversation() if self.conversation is not None else ""
        return f"subscribed to {uri} on MCP server {self.spec.name}; its changes will arrive as inputs"

    async def unsubscribe(self, uri: str) -> str:
        """Stop the changes of a subscribed resource."""
        if uri not in self.subscriptions:
            known = ", ".join(sorted(self.subscriptions)) or "none"
            raise ToolError(f"not subscribed to {uri!r} on MCP server {self.spec.name!r}; subscribed: {known}")
        await self.session_call(f"resources/unsubscribe {uri}", lambda s: _subscription(s, uri, False))
        del self.subscriptions[uri]
        return f"unsubscribed from {uri} on MCP server {self.spec.name}"

    async def _resubscribe(self, session: Any) -> None:
        """Renew the subscriptions after a reconnect (a failure is logged, the URI kept)."""
        for uri in list(self.subscriptions):
            try:
                async with asyncio.timeout(self.connect_timeout):
                    await _subscription(session, uri, True)
            except Exception as exc:
                log.warning("MCP server %s: subscribing again to %s failed: %s", self.spec.name, uri, _describe(exc))

    async def session_call(self, label: str, fn: Callable[[Any], Awaitable[Any]]) -> Any:
        """Run ``fn(session)`` with the call timeout; failures become :class:`ToolError`."""
        session = self._session
        if session is None:
            last = self.last_error or "none"
            raise ToolError(f"MCP server {self.spec.name!r} is not connected ({self.state}; last error: {last})")
        try:
            async with asyncio.timeout(self.call_timeout):
                return await fn(session)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.spec.name!r}: {label} did not answer within {self.call_timeout:g}s"
            ) from None
        except Exception as exc:
            raise self._failure(label, exc) from None

    def _failure(self, label: str, exc: Exception) -> ToolError:
        from mcp import MCPError

        if isinstance(exc, MCPError):
            return ToolError(mcp_error_text(self.spec.name, label, exc))
        if isinstance(exc, RuntimeError) and "InputRequiredResult" in str(exc):
            return ToolError(f"not supported: {self.spec.name} asked for more input during {label}")
        self._broken.set()  # transport trouble: let the supervisor reconnect
        return ToolError(f"MCP server {self.spec.name!r}: {label} failed: {_describe(exc)}")

    def _detach(self) -> None:
        for name in self.registered:
            self.tools.remove(name)
        self.registered = []
        self.prompts = []

    def _handler(self, remote: str) -> Callable[..., Awaitable[str | ToolResult]]:
        async def call(**arguments: Any) -> str | ToolResult:
            return await self.call(remote, arguments)

        call.__name__ = tool_name(self.spec.name, remote)
        return call

    async def call(self, remote: str, arguments: dict[str, Any]) -> str | ToolResult:
        """Call a tool of this server; failures become :class:`ToolError` for the model.

        Returns its text, or a :class:`ToolResult` carrying the images and audio it returned as
        media attachments (see :func:`result_output`).
        """
        session = self._session
        if session is None:
            last = self.last_error or "none"
            raise ToolError(f"MCP server {self.spec.name!r} is not connected ({self.state}; last error: {last})")
        try:
            async with asyncio.timeout(self.call_timeout):
                result = await session.call_tool(remote, arguments, read_timeout_seconds=self.call_timeout)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.spec.name!r}: {remote} did not answer within {self.call_timeout:g}s"
            ) from None
        except Exception as exc:
            if getattr(exc, "code", None) == METHOD_NOT_FOUND:  # how a tool that needs a task answers a plain call
                raise ToolError(f"{task_message(self.spec.name, remote)} (the server answered -32601)") from None
            raise self._failure(remote, exc) from None
        if getattr(result, "is_error", False):
            text = result_text(result)
            raise ToolError(f"MCP server {self.spec.name!r}: {text or remote + ' reported an error'}")
        text, media = await result_output(result, tool_name(self.spec.name, remote), self.media)
        return ToolResult("", remote, True, text, attachments=media) if media else text


async def _subscription(session: Any, uri: str, on: bool) -> Any:
    """``resources/subscribe`` / ``unsubscribe`` (the initialize-era API; the SDK marks it deprecated)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return await (session.subscribe_resource(uri) if on else session.unsubscribe_resource(uri))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text


describe_error = _describe
