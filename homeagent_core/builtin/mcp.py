"""Built-in ``mcp``: use the tools of Model Context Protocol servers.

Servers come from ``plugin.mcp.servers``, a JSON array of objects: ``{name, command, args,
env, cwd}`` for a server started as a subprocess speaking stdio, or ``{name, url, transport,
headers}`` for a remote one (``transport`` ``"http"`` = streamable HTTP, the default, or
``"sse"``; a URL ending in ``/sse`` implies SSE). Each remote tool is registered as
``<server>_<tool>`` with the description ``[MCP/<server>] …`` and the server's input schema,
so the kernel validates arguments before they travel.

Each server has its own supervisor task: connect, list tools, register them, then watch the
connection (a ping every ``ping_interval``, a ``server/discover`` on 2026-07-28 sessions, which
have no ping; a failed call also counts). When a server dies
its tools are detached at once, and the supervisor reconnects with exponential backoff (1 s,
2 s, 4 s … up to ``max_backoff``), registering the tools again when it is back.

A server's resources and prompts become tools too (``<server>_resource_read`` …, see
:mod:`homeagent_core.builtin.mcp_extras`); tools that only run as MCP tasks answer that
HomeAgent does not support task-augmented calls. Sessions and supervision live in
:mod:`homeagent_core.builtin.mcp_connection`; ``homeagent mcp serve`` in
:mod:`homeagent_core.builtin.mcp_server`.

The ``mcp`` SDK is imported only when a server is actually used.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from homeagent_core.builtin.mcp_connection import (
    CHANNEL,
    PLUGIN_NAME,
    ServerConnection,
    ServerSpec,
    open_session,
    probe,
    probe_offer,
    tool_name,
)
from homeagent_core.builtin.mcp_connection import describe_error as _describe
from homeagent_core.builtin.mcp_extras import prompts_block
from homeagent_core.builtin.mcp_server import build_server, serve_stdio
from homeagent_core.builtin.turn_origin import turn_conversation
from homeagent_core.commands import DataOption, JsonOption, echo_json, fail
from homeagent_sdk import (
    ChannelDef,
    ChannelRegistry,
    ConfigDef,
    HomeAgentError,
    SettingsRegistry,
    ToolError,
    ToolRegistryProtocol,
    hookimpl,
)
from homeagent_sdk.errors import ConfigError
from homeagent_sdk.types import InjectOptions

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

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

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


# --------------------------------------------------------------------------- configuration


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


# --------------------------------------------------------------------------- the plugin


class MCPPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self.connections: dict[str, ServerConnection] = {}
        self._errlog: TextIO | None = None

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
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
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.mcp_servers, parallel_safe=True)

    @hookimpl
    def register_input_channels(self, registry: ChannelRegistry) -> None:
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
        kernel = sdk.services.kernel if sdk.services is not None else None
        tools = kernel.tools if kernel is not None else None
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
        return turn_conversation(self._sdk)

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
    cli = typer.Typer(
        help="MCP servers used for tools, resources and prompts (plugin.mcp.servers); this agent as a server.",
        no_args_is_help=True,
    )

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
        """Connect to one server and list its tools (and count its resources and prompts); exit 1 if unreachable."""
        try:
            specs = {s.name: s for s in configured(data)}
        except ConfigError as exc:
            raise fail(str(exc)) from None
        if name not in specs:
            raise fail(f"no MCP server named {name!r}; configured: {', '.join(specs) or 'none'}")
        import tempfile

        with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
            try:
                tools, offer = asyncio.run(probe_offer(specs[name], timeout=timeout, errlog=errlog))
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
        if any(offer.values()):
            typer.echo("  also: " + ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in offer.items()))

    @cli.command("serve")
    def serve(data: DataOption = None) -> None:
        """Serve this agent's memory and knowledge over stdio to other MCP clients: tools, resources, prompts."""
        try:
            asyncio.run(serve_stdio(data))
        except HomeAgentError as exc:
            raise fail(str(exc)) from None

    return cli
