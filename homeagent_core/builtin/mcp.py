"""Built-in ``mcp``: use the tools of Model Context Protocol servers.

Servers come from ``plugin.mcp.servers``, a JSON array of objects: ``{name, command, args,
env, cwd}`` for a server started as a subprocess speaking stdio, or ``{name, url, transport,
headers}`` for a remote one (``transport`` ``"http"`` = streamable HTTP, the default, or
``"sse"``; a URL ending in ``/sse`` implies SSE). Each remote tool is registered as
``<server>_<tool>`` with the description ``[MCP/<server>] …`` and the server's input schema,
so the kernel validates arguments before they travel.

Each server has its own supervisor task: connect, list tools, register them, then watch the
connection (a ping every ``ping_interval``; a failed call also counts). When a server dies
its tools are detached at once, and the supervisor reconnects with exponential backoff (1 s,
2 s, 4 s … up to ``max_backoff``), registering the tools again when it is back.

A server's resources and prompts become tools too (``<server>_resource_read`` …, see
:mod:`homeagent_core.builtin.mcp_extras`); tools that only run as MCP tasks answer that
HomeAgent does not support task-augmented calls.

The ``mcp`` SDK is imported only when a server is actually used.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from homeagent_core.builtin.mcp_extras import (
    METHOD_NOT_FOUND,
    extra_tools,
    mcp_error_text,
    needs_tasks,
    offered,
    prompt_index,
    prompts_block,
    task_message,
    task_refusal,
)
from homeagent_core.builtin.mcp_server import build_server, serve_stdio
from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail
from homeagent_sdk import ChannelDef, ConfigDef, HomeAgentError, ToolDef, ToolError, hookimpl
from homeagent_sdk.errors import ConfigError
from homeagent_sdk.types import InjectOptions

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "mcp"
CHANNEL = "mcp"
"""Input channel of resource changes when the subscribing turn had no conversation."""

__all__ = [
    "MCPPlugin",
    "ServerConnection",
    "ServerSpec",
    "build_cli",
    "build_server",
    "make_plugin",
    "open_session",
    "parse_servers",
    "probe",
    "serve_stdio",
    "tool_name",
]

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_TOOL_CHARS = re.compile(r"[^A-Za-z0-9_-]")


# --------------------------------------------------------------------------- configuration


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


def parse_servers(value: Any) -> list[ServerSpec]:
    """Validate the ``plugin.mcp.servers`` value (a list, a JSON string, or empty).

    Raises:
        ConfigError: not a list of objects, a missing/invalid/duplicate name, neither or both
            of ``command`` and ``url``, or fields of the wrong type (the entry is named).
    """
    if value in (None, "", []):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"plugin.mcp.servers is not valid JSON: {exc}", key="plugin.mcp.servers") from None
    if not isinstance(value, list):
        raise ConfigError(
            'plugin.mcp.servers must be a JSON array such as [{"name": "time", "command": "uvx", '
            '"args": ["mcp-server-time"]}]',
            key="plugin.mcp.servers",
        )
    specs: list[ServerSpec] = []
    for index, item in enumerate(value):
        where = f"plugin.mcp.servers[{index}]"

        def bad(message: str, where: str = where) -> ConfigError:
            return ConfigError(f"{where}: {message}", key="plugin.mcp.servers")

        if not isinstance(item, dict):
            raise bad("must be an object with a name and a command or a url")
        name = item.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise bad(f"name {name!r} is invalid; use 1-40 characters from a-z, A-Z, 0-9, '_' and '-'")
        if any(s.name == name for s in specs):
            raise bad(f"the name {name!r} is used twice")
        command, url = item.get("command") or "", item.get("url") or ""
        if bool(command) == bool(url):
            raise bad("give either 'command' (a stdio server) or 'url' (an HTTP/SSE server), not both or neither")
        args, env, headers = item.get("args") or [], item.get("env") or {}, item.get("headers") or {}
        if not isinstance(command, str) or not isinstance(url, str):
            raise bad("'command' and 'url' must be strings")
        if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
            raise bad("'args' must be an array of strings")
        for label, mapping in (("env", env), ("headers", headers)):
            if not isinstance(mapping, dict) or not all(isinstance(v, str | int | float) for v in mapping.values()):
                raise bad(f"'{label}' must be an object of string values")
        transport = "stdio"
        if url:
            if not url.startswith(("http://", "https://")):
                raise bad(f"url {url!r} must start with http:// or https://")
            transport = str(item.get("transport") or ("sse" if url.rstrip("/").endswith("/sse") else "http"))
            if transport not in ("http", "sse", "streamable-http", "streamable_http"):
                raise bad(f"transport {transport!r} is unknown; use 'http' (streamable HTTP) or 'sse'")
            transport = "sse" if transport == "sse" else "http"
        specs.append(
            ServerSpec(
                name=name,
                command=command,
                args=tuple(str(a) for a in args),
                env=tuple((str(k), str(v)) for k, v in env.items()),
                cwd=str(item.get("cwd") or ""),
                url=url,
                transport=transport,
                headers=tuple((str(k), str(v)) for k, v in headers.items()),
            )
        )
    return specs


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


def result_text(result: Any) -> str:
    """Flatten a ``CallToolResult`` into text for the model."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(getattr(block, "data", "") or "") * 3 // 4
            parts.append(f"[{kind} {getattr(block, 'mime_type', '')}, {size} bytes]")
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(str(block))
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts)


async def probe(spec: ServerSpec, *, timeout: float = 30.0, errlog: TextIO | None = None) -> list[dict[str, Any]]:
    """Connect once and return the server's tools (``name``, ``description``, ``input_schema``)."""
    async with asyncio.timeout(timeout), open_session(spec, errlog=errlog, timeout=timeout) as session:
        tools = await list_all_tools(session)
    return [{"name": t.name, "description": t.description or "", "input_schema": t.input_schema} for t in tools]


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

    def _handler(self, remote: str) -> Callable[..., Awaitable[str]]:
        async def call(**arguments: Any) -> str:
            return await self.call(remote, arguments)

        call.__name__ = tool_name(self.spec.name, remote)
        return call

    async def call(self, remote: str, arguments: dict[str, Any]) -> str:
        """Call a tool of this server; failures become :class:`ToolError` for the model."""
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
        text = result_text(result)
        if getattr(result, "is_error", False):
            raise ToolError(f"MCP server {self.spec.name!r}: {text or remote + ' reported an error'}")
        return text


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


# --------------------------------------------------------------------------- the plugin


class MCPPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self.connections: dict[str, ServerConnection] = {}
        self._errlog: TextIO | None = None

    @hookimpl
    def register_settings(self, registry: Any) -> None:
        registry.add(ConfigDef(
            key="servers", type="json", default=None, restart_required=True,
            description='MCP servers: JSON array of {"name", "command", "args", "env"} (stdio) '
            'or {"name", "url", "transport": "http"|"sse", "headers"}.',
        ))
        registry.add(ConfigDef(
            key="call_timeout", type="duration", default="60s", min=1, max=3600,
            description="How long one remote tool call may take.",
        ))
        registry.add(ConfigDef(
            key="ping_interval", type="duration", default="15s", min=0.05, max=3600,
            description="How often a connected server is pinged to notice that it died.",
        ))
        registry.add(ConfigDef(
            key="max_backoff", type="duration", default="60s", min=0.05, max=3600,
            description="Longest wait between reconnection attempts.",
        ))

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        registry.add(self.mcp_servers, parallel_safe=True)

    @hookimpl
    def register_input_channels(self, registry: Any) -> None:
        registry.add(ChannelDef(name=CHANNEL, description="changes of subscribed MCP resources", no_memory=True))

    @hookimpl
    def register_commands(self, app: Any) -> None:
        app.add_typer(build_cli(), name="mcp")

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk
        specs = parse_servers(sdk.settings.get("servers"))
        if not specs:
            return
        kernel = getattr(sdk.services, "kernel", None) if sdk.services is not None else None
        tools = getattr(kernel, "tools", None)
        if tools is None:
            raise ToolError("mcp needs the running kernel's tool registry to register remote tools")
        settings = sdk.settings
        self._errlog = Path(sdk.data_dir / "servers.stderr.log").open("a", encoding="utf-8")  # noqa: SIM115
        for spec in specs:
            connection = ServerConnection(
                spec,
                tools,
                call_timeout=float(settings.get("call_timeout") or 60),
                ping_interval=float(settings.get("ping_interval") or 15),
                max_backoff=float(settings.get("max_backoff") or 60),
                errlog=self._errlog,
                publish=sdk.events.publish,
                inject=self._inject,
                media=self._store_media if getattr(sdk.services, "media", None) is not None else None,
                conversation=self._conversation,
            )
            self.connections[spec.name] = connection
            connection.start()

    @hookimpl
    async def shutdown(self) -> None:
        for connection in list(self.connections.values()):
            await connection.stop()
        self.connections.clear()
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None

    async def _inject(self, text: str, channel: str) -> None:
        assert self._sdk is not None
        await self._sdk.io.inject_text(text, channel, InjectOptions(no_memory=True))

    async def _store_media(self, data: bytes, mime: str, name: str) -> str:
        assert self._sdk is not None
        attachment = await self._sdk.media.put(data, mime, name=name)
        return attachment.digest

    def _conversation(self) -> str:
        """The chat conversation (``<channel>:<conversation>``) of the running turn, or ""."""
        services = getattr(self._sdk, "services", None)
        turn = getattr(getattr(services, "kernel", None), "turn", None)
        channel = str(getattr(getattr(turn, "item", None), "channel", "") or "")
        return channel if ":" in channel else ""

    @hookimpl
    def pre_action(self, ctx: Any) -> None:
        """List the connected servers' prompts in the prompt, like the skills index."""
        block = prompts_block({n: c.prompts for n, c in self.connections.items() if c.prompts}, tool_name)
        if not block:
            return
        messages = ctx.context_msgs
        at = 1 if messages and messages[0].get("role") == "system" else 0
        messages.insert(at, {"role": "system", "content": block})

    def mcp_servers(self) -> list[dict[str, Any]]:
        """The configured MCP servers: connection state, registered tools, reconnects and the last error."""
        return [c.status() for c in self.connections.values()]


def make_plugin() -> MCPPlugin:
    return MCPPlugin()


# --------------------------------------------------------------------------- command line


def build_cli() -> Any:
    """The ``homeagent mcp`` sub-commands: ``list`` and ``test NAME``."""
    cli = typer.Typer(help="MCP servers used as tool sources (plugin.mcp.servers).", no_args_is_help=True)

    def configured(data: Path | None) -> list[ServerSpec]:
        from homeagent_core.config import ConfigStore
        from homeagent_core.datadir import prepare_data_dir

        config = ConfigStore(prepare_data_dir(data) / "config.db")
        try:
            return parse_servers(config.get("plugin.mcp.servers"))
        finally:
            config.close()

    @cli.command("list")
    def list_servers(data: DataOption = None, as_json: JsonOption = False) -> None:
        """Show the configured MCP servers."""
        try:
            specs = configured(data)
        except ConfigError as exc:
            raise fail(str(exc)) from None
        rows = [{"name": s.name, "transport": s.transport, "server": s.describe()} for s in specs]
        if as_json:
            echo_json(rows)
        elif not rows:
            typer.echo("no MCP servers configured; set plugin.mcp.servers (a JSON array)")
        for row in [] if as_json else rows:
            typer.echo(f"{row['name']:<20} {row['transport']:<6} {row['server']}")

    @cli.command("test")
    def test_server(
        name: Annotated[str, typer.Argument(help="Name of a configured server.")],
        data: DataOption = None,
        timeout: Annotated[float, typer.Option(help="Seconds to wait for the server.")] = 30.0,
        as_json: JsonOption = False,
    ) -> None:
        """Connect to one server and list its tools; exit 1 if it cannot be reached."""
        try:
            specs = {s.name: s for s in configured(data)}
        except ConfigError as exc:
            raise fail(str(exc)) from None
        if name not in specs:
            raise fail(f"no MCP server named {name!r}; configured: {', '.join(specs) or 'none'}")
        import tempfile

        with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
            try:
                tools = asyncio.run(probe(specs[name], timeout=timeout, errlog=errlog))
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                errlog.seek(0)
                tail = errlog.read()[-800:].strip()
                detail = f"\nserver stderr:\n{tail}" if tail else ""
                raise fail(f"MCP server {name!r} ({specs[name].describe()}) failed: {_describe(exc)}{detail}") from None
        if as_json:
            echo_json(tools)
            return
        typer.echo(f"{name}: connected, {len(tools)} tools")
        for tool in tools:
            first = tool["description"].splitlines()[0] if tool["description"] else ""
            typer.echo(f"  {tool_name(name, tool['name'])}: {first}")

    @cli.command("serve")
    def serve(data: DataOption = None) -> None:
        """Serve this agent's memory and knowledge over stdio to other MCP clients: tools, resources, prompts."""
        try:
            asyncio.run(serve_stdio(data))
        except HomeAgentError as exc:
            raise fail(str(exc)) from None

    return cli
