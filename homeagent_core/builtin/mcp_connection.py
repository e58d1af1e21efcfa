"""Connections to MCP servers: sessions over stdio / streamable HTTP / SSE, and their supervision.

A :class:`ServerConnection` keeps one configured server connected: it registers the server's
tools (and, through :mod:`homeagent_core.builtin.mcp_extras`, its resources and prompts) while
the server is up, detaches them when it dies, reconnects with exponential backoff and renews
resource subscriptions. It negotiates protocol 2026-07-28 (``server/discover``; changes on a
``subscriptions/listen`` stream) with servers that speak it, and the 2025-era ``initialize``
handshake (``resources/subscribe``, notifications) with the others. The ``mcp`` SDK is imported
only when a server is actually used.
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
    "is_modern",
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
            await _negotiate(session)
        yield session


async def _negotiate(session: Any) -> None:
    """``server/discover`` (protocol 2026-07-28) when the server speaks it, else the ``initialize``
    handshake of the 2025-era versions (a server that does not know ``server/discover`` answers
    it with an error)."""
    from mcp import MCPError

    try:
        await session.discover()
    except MCPError:
        await session.initialize()


def is_modern(session: Any) -> bool:
    """Whether the session negotiated protocol 2026-07-28 or later (``server/discover``): no
    ``ping``, no ``resources/subscribe``; changes arrive on ``subscriptions/listen`` streams."""
    return getattr(session, "discover_result", None) is not None


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
    #: Set when the subscribed URIs changed: the ``subscriptions/listen`` stream is opened again.
    _relisten: asyncio.Event = field(default_factory=asyncio.Event)
    #: Requests to open the listen stream again (a counter), and the last request the stream
    #: answered with the URIs it was acknowledged for (None while no stream runs).
    _listen_wanted: int = 0
    _listening: tuple[int, frozenset[str]] | None = None
    _listened: asyncio.Condition = field(default_factory=asyncio.Condition)
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
            modern = is_modern(session)
            listener = asyncio.create_task(self._listen(session, capabilities)) if modern else None
            try:
                if not modern:
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
                        # 2026-07-28 has no ping: a discover at the negotiated version is the cheapest request
                        await (session.send_discover(session.protocol_version) if modern else session.send_ping())
            finally:
                if listener is not None:
                    listener.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await listener
                self._listening = None

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
        """Notifications of a 2025-era session: a subscribed resource changed, or a list changed."""
        if self._session is not None and is_modern(self._session):
            return  # a 2026-07-28 session's changes arrive on its listen stream (see _listen)
        root = getattr(message, "root", message)
        method = getattr(root, "method", "")
        if method == "notifications/resources/updated":
            await self._resource_updated(str(root.params.uri))
        elif self.publish is not None and method.endswith("/list_changed"):
            self.publish("mcp_list_changed", {"server": self.spec.name, "method": method})

    async def _on_event(self, event: Any) -> None:
        """An event of the ``subscriptions/listen`` stream (2026-07-28): the same as its notification."""
        from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated

        if isinstance(event, ResourceUpdated):
            await self._resource_updated(str(event.uri))
            return
        kind = {PromptsListChanged: "prompts", ResourcesListChanged: "resources"}.get(type(event), "tools")
        if self.publish is not None:
            self.publish("mcp_list_changed", {"server": self.spec.name, "method": f"notifications/{kind}/list_changed"})

    async def _resource_updated(self, uri: str) -> None:
        """A subscribed resource changed: a bus event, and an input telling the model to read it again."""
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

    async def _listen(self, session: Any, capabilities: Any) -> None:
        """Keep one ``subscriptions/listen`` stream open for the subscribed URIs and the list
        changes the server announces, opening it again whenever the URIs change (the stream's
        filter is fixed) or the server drops it."""
        from mcp import MCPError
        from mcp.client.subscriptions import SubscriptionLost, listen

        def changes(kind: str) -> bool:
            return bool(getattr(getattr(capabilities, kind, None), "list_changed", False))

        tools, prompts, resources = changes("tools"), changes("prompts"), changes("resources")
        while True:
            self._relisten.clear()
            wanted, uris = self._listen_wanted, sorted(self.subscriptions)
            if not uris and not (tools or prompts or resources):
                await self._set_listening(wanted, frozenset())
                await self._relisten.wait()
                continue
            try:
                async with listen(
                    session,
                    resource_subscriptions=uris,
                    tools_list_changed=tools,
                    prompts_list_changed=prompts,
                    resources_list_changed=resources,
                ) as stream:
                    await self._set_listening(wanted, frozenset(stream.honored.resource_subscriptions or ()))
                    consume = asyncio.create_task(self._consume(stream))
                    relisten = asyncio.create_task(self._relisten.wait())
                    try:
                        await asyncio.wait({consume, relisten}, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for task in (consume, relisten):
                            task.cancel()
                        await asyncio.gather(consume, relisten, return_exceptions=True)
                    failure = consume.exception() if consume.done() and not consume.cancelled() else None
                    if failure is not None:
                        raise failure
            except (MCPError, SubscriptionLost, TimeoutError) as exc:
                await self._set_listening(wanted, frozenset())
                log.warning("MCP server %s: subscriptions/listen: %s", self.spec.name, _describe(exc))
                with contextlib.suppress(TimeoutError):  # retry after a second, or at once on a change
                    async with asyncio.timeout(1.0):
                        await self._relisten.wait()

    async def _consume(self, stream: Any) -> None:
        async for event in stream:
            await self._on_event(event)

    async def _set_listening(self, request: int, uris: frozenset[str]) -> None:
        async with self._listened:
            self._listening = (request, uris)
            self._listened.notify_all()

    def _listened_uris(self) -> frozenset[str]:
        return self._listening[1] if self._listening is not None else frozenset()

    async def _listened_for(self, uri: str, wanted: bool) -> bool:
        """Open the listen stream again and wait (bounded by the call timeout) until it answered
        this request; whether ``uri`` is then among its acknowledged URIs as ``wanted``."""
        self._listen_wanted += 1
        request = self._listen_wanted
        self._relisten.set()

        def answered() -> bool:
            return self._listening is not None and self._listening[0] >= request

        try:
            async with asyncio.timeout(self.call_timeout), self._listened:
                await self._listened.wait_for(answered)
        except TimeoutError:
            return False
        return (uri in self._listened_uris()) == wanted

    async def subscribe(self, uri: str) -> str:
        """Subscribe to a resource; its changes come back as inputs in the calling conversation.

        On a 2026-07-28 session the URI joins the ``subscriptions/listen`` stream's filter (the
        stream is opened again and must acknowledge it); on an older one ``resources/subscribe``
        is sent, the method those protocol versions define.
        """
        if not uri.strip():
            raise ToolError(f"give the uri of a resource of MCP server {self.spec.name!r} to subscribe to")
        conversation = self.conversation() if self.conversation is not None else ""
        if self._session is not None and is_modern(self._session):
            had = uri in self.subscriptions
            self.subscriptions[uri] = conversation
            if not await self._listened_for(uri, True):
                if not had:
                    del self.subscriptions[uri]
                    self._relisten.set()
                raise ToolError(
                    f"MCP server {self.spec.name!r} did not accept a subscription to {uri!r} "
                    f"(subscriptions/listen acknowledged: {sorted(self._listened_uris()) or 'nothing'})"
                )
        else:
            await self.session_call(f"resources/subscribe {uri}", lambda s: _subscription(s, uri, True))
            self.subscriptions[uri] = conversation
        return f"subscribed to {uri} on MCP server {self.spec.name}; its changes will arrive as inputs"

    async def unsubscribe(self, uri: str) -> str:
        """Stop the changes of a subscribed resource."""
        if uri not in self.subscriptions:
            known = ", ".join(sorted(self.subscriptions)) or "none"
            raise ToolError(f"not subscribed to {uri!r} on MCP server {self.spec.name!r}; subscribed: {known}")
        if self._session is not None and is_modern(self._session):
            del self.subscriptions[uri]
            await self._listened_for(uri, False)
        else:
            await self.session_call(f"resources/unsubscribe {uri}", lambda s: _subscription(s, uri, False))
            del self.subscriptions[uri]
        return f"unsubscribed from {uri} on MCP server {self.spec.name}"

    async def _resubscribe(self, session: Any) -> None:
        """Renew the subscriptions after a reconnect to a 2025-era server (a failure is logged,
        the URI kept); a 2026-07-28 session opens its listen stream with them instead."""
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
    """``resources/subscribe`` / ``unsubscribe`` on a 2025-era session only.

    These are the subscription methods of the protocol versions that session negotiated; the
    SDK marks them deprecated because 2026-07-28 removed them (for ``subscriptions/listen``,
    which :meth:`ServerConnection._listen` uses whenever the server speaks that version). Only
    that deprecation warning is silenced here, only for this call.
    """
    import warnings

    from mcp.shared.exceptions import MCPDeprecationWarning

    if is_modern(session):
        raise RuntimeError("resources/subscribe does not exist in protocol 2026-07-28; use subscriptions/listen")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return await (session.subscribe_resource(uri) if on else session.unsubscribe_resource(uri))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text


describe_error = _describe
