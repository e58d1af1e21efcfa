"""Built-in ``cli``: the Unix socket ``homeagent chat`` and ``homeagent ask`` talk to.

Protocol (one message per line, UTF-8):

* client → daemon: a plain text line, or a JSON object ``{"text": "..."}`` (which may carry
  newlines). When an API key is configured (``plugin.cli.api_key``, else the web UI's
  ``plugin.webui.api_key``) the first line must be ``/auth <key>``.
* daemon → client, one JSON object per line: ``{"type": "delta", "content": "..."}`` while a
  reply streams, ``{"type": "reset"}`` when the streamed text so far must be discarded,
  ``{"type": "response", "content": "...", "usage"?: {...}, "reasoning_content"?: "...",
  "skipped"?: true}`` when it is complete, ``{"type": "message", "content": "..."}`` for
  something the agent sent to the ``cli`` channel on its own, ``{"type": "error", "error":
  "..."}`` for a failure (with ``"code": "busy", "retry_after": <seconds>`` when the agent's
  input queue is full and the message was not accepted: send it again later). ``usage`` is
  present only when the model reported it.
* Lines starting with ``/`` are commands: ``/help``, ``/status``, ``/kernel``, ``/plugins``,
  ``/plugin list|info <name>|install <file-or-url> [--force]|start <name>|reload [name]|enable <name>|
  disable <name>|remove <name>`` (an installed package starts at once, without a restart),
  ``/agents``, ``/memory <query>``, ``/knowledge <query>``,
  ``/settings [prefix]``, ``/settings get <key>``, ``/settings set <key> <value…>``, ``/stop``
  (answered by :mod:`homeagent_core.builtin.cli_commands`).

The socket is ``<data>/cli.sock`` (``plugin.cli.socket_path``), mode 0600 by default
(``plugin.cli.socket_mode``), so only the daemon's user can talk to the agent. It is bound in
a private directory and moved into place with its mode already set, so it is never briefly
open to other users.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import shutil
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.builtin.cli_commands import Commands
from homeagent_sdk import (
    Caps,
    ChannelDef,
    ChannelRegistry,
    ConfigDef,
    HomeAgentError,
    PluginError,
    SettingsRegistry,
    hookimpl,
)
from homeagent_sdk.errors import InputQueueFull

if TYPE_CHECKING:
    from homeagent_core.plugins.privileged import KernelAccess
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "cli"
CHANNEL = "cli"
#: Longest accepted line (a message or a command), in bytes.
MAX_LINE = 1024 * 1024

__all__ = ["CliSocket", "make_plugin"]

log = logging.getLogger(__name__)



class Connection:
    """One connected client."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.authed = False
        self.turns: set[asyncio.Task[None]] = set()

    def send(self, message: dict[str, Any]) -> None:
        if self.writer.is_closing():
            return
        self.writer.write(json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n")

    def error(self, text: str, **extra: Any) -> None:
        self.send({"type": "error", "error": text, **extra})

    def response(self, text: str, **extra: Any) -> None:
        self.send({"type": "response", "content": text, **{k: v for k, v in extra.items() if v}})


def parse_line(line: str) -> str:
    """The message of one protocol line: a JSON ``{"text": ...}`` object or the line itself."""
    stripped = line.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            return stripped
        text = value.get("text") if isinstance(value, dict) else None
        if isinstance(text, str):
            return text
    return stripped


class CliSocket:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self._server: asyncio.AbstractServer | None = None
        self.path: Path | None = None
        self.connections: set[Connection] = set()
        self.started_at = time.time()
        self._active = 0
        self.commands = Commands(self)
        self._sent_during_turns: list[str] = []

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(
            key="api_key", type="password", default="", secret=True,
            description="Key clients must send as '/auth <key>' first; empty = the web UI key, if any.",
        ))
        registry.add(ConfigDef(
            key="socket_path", type="string", default="", restart_required=True,
            description="Path of the Unix socket; empty = <data>/cli.sock.",
        ))
        registry.add(ConfigDef(
            key="socket_mode", type="select", default="0600", options=["0600", "0660", "0666"],
            restart_required=True, description="Permissions of the socket file (0600 = only the daemon's user).",
        ))

    @hookimpl
    def register_input_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChannelDef(name=CHANNEL, description="terminal clients (homeagent chat / ask)"))

    @hookimpl
    def register_output_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChannelDef(
            name=CHANNEL, description="terminal clients connected to the daemon", caps=int(Caps.TEXT),
            sync=True, send=self._deliver,
        ))

    @hookimpl
    async def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk
        services = sdk.services
        data = Path(services.data_dir) if services is not None else sdk.data_dir.parent.parent
        raw = str(sdk.settings.get("socket_path") or "")
        path = Path(raw).expanduser() if raw else data / "cli.sock"
        await asyncio.to_thread(_clear_stale_socket, path)
        mode = int(str(sdk.settings.get("socket_mode") or "0600"), 8)
        sock = await asyncio.to_thread(_bind_private, path, mode)
        self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=MAX_LINE)
        self.path = path
        self.started_at = time.time()
        log.info("cli socket listening on %s (mode %o)", path, mode)

    @hookimpl
    async def shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            for task in list(conn.turns):
                task.cancel()
            conn.writer.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            self.path = None

    # ------------------------------------------------------------------ connections

    @property
    def sdk(self) -> ScopedSDK:
        if self._sdk is None:
            raise PluginError("cli has not started yet", plugin_name=PLUGIN_NAME)
        return self._sdk

    def _api_key(self) -> str:
        key = str(self.sdk.settings.get("api_key") or "")
        if not key and self.sdk.config is not None:
            key = str(self.sdk.config.get("plugin.webui.api_key") or "")
        return key

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(writer)
        self.connections.add(conn)
        try:
            await self._session(conn, reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.connections.discard(conn)
            for task in list(conn.turns):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            with contextlib.suppress(Exception):
                writer.close()
                await writer.wait_closed()

    async def _session(self, conn: Connection, reader: asyncio.StreamReader) -> None:
        key = self._api_key()
        conn.authed = not key
        while True:
            try:
                raw = await reader.readline()
            except ValueError:  # a line over MAX_LINE
                conn.error(f"line too long (over {MAX_LINE} bytes); send shorter messages")
                await conn.writer.drain()
                return
            if not raw:
                return
            message = parse_line(raw.decode("utf-8", "replace"))
            if not message.strip():
                continue
            if message.startswith("/auth"):
                given = message[len("/auth"):].strip()
                if key and not hmac.compare_digest(given.encode(), key.encode()):
                    conn.error("unauthorized")
                    await conn.writer.drain()
                    return
                conn.authed = True
                conn.response("authenticated")
            elif not conn.authed:
                conn.error("unauthorized")
                await conn.writer.drain()
                return
            elif message.startswith("/"):
                await self._command(conn, message)
            else:
                task = asyncio.get_running_loop().create_task(self._chat(conn, message))
                conn.turns.add(task)
                task.add_done_callback(conn.turns.discard)
            await conn.writer.drain()

    # ------------------------------------------------------------------ chat

    async def _chat(self, conn: Connection, text: str) -> None:
        kernel = self.sdk.services.kernel if self.sdk.services is not None else None
        if kernel is None:
            conn.error("agent is not available (the kernel is not running)")
            return
        self._active += 1
        try:
            reply = await stream_turn(kernel, text, conn.send)
        except InputQueueFull as exc:  # backpressure: the message was not accepted
            conn.error(str(exc), code="busy", retry_after=int(exc.retry_after_header))
            return
        except HomeAgentError as exc:
            conn.error(str(exc))
            return
        except Exception as exc:
            log.debug("cli turn failed", exc_info=True)
            conn.error(f"{type(exc).__name__}: {exc}")
            return
        finally:
            self._active -= 1
        content = str(reply)
        sent, self._sent_during_turns = self._sent_during_turns, []
        for payload in sent:
            if payload != content:
                conn.send({"type": "message", "content": payload})
        conn.response(
            content,
            usage=getattr(reply, "usage", None),
            reasoning_content=getattr(reply, "reasoning_content", ""),
            skipped=getattr(reply, "skipped", False),
            stopped=getattr(reply, "stopped", False),
        )
        with contextlib.suppress(ConnectionError):
            await conn.writer.drain()

    async def _deliver(self, payload: str) -> bool:
        """Output channel ``cli``: during a cli turn the reply carries it, else every client gets it."""
        if self._active:
            self._sent_during_turns.append(payload)
            return True
        clients = [c for c in self.connections if c.authed]
        for conn in clients:
            conn.send({"type": "message", "content": payload})
        if not clients:
            print(payload, file=sys.stdout, flush=True)
        return True

    # ------------------------------------------------------------------ commands

    async def _command(self, conn: Connection, line: str) -> None:
        name, _, rest = line[1:].partition(" ")
        rest = rest.strip()
        handler = self.commands.handler(name)
        if handler is None:
            conn.error(f"unknown command /{name}; /help lists the commands")
            return
        try:
            conn.response(await handler(rest))
        except HomeAgentError as exc:
            conn.error(str(exc))
        except Exception as exc:
            log.warning("cli command /%s failed", name, exc_info=True)
            conn.error(f"/{name} failed: {type(exc).__name__}: {exc}")


async def stream_turn(kernel: KernelAccess, text: str, send: Any) -> Any:
    """Run one ``cli`` turn, forwarding content deltas to ``send``; returns the kernel's reply.

    This is the only place that knows how the kernel streams a turn (a sink queue carrying
    text deltas and the ``RESET`` / ``ROUND`` / ``END_OF_STREAM`` markers).
    """
    from homeagent_core.stream import END_OF_STREAM, RESET, ROUND

    sink: asyncio.Queue[Any] = asyncio.Queue()
    item = kernel.submit(kernel.make_item(text, CHANNEL, source=PLUGIN_NAME, sink=sink))
    while True:
        delta = await sink.get()
        if delta is END_OF_STREAM:
            break
        if delta is RESET:
            send({"type": "reset"})
        elif delta is ROUND:
            send({"type": "round"})
        elif isinstance(delta, str) and delta:
            send({"type": "delta", "content": delta})
    assert item.reply is not None  # an item with a sink always has its reply future
    return await item.reply


def _bind_private(path: Path, mode: int) -> socket.socket:
    """A listening Unix socket at ``path`` that never exists there with another ``mode``.

    ``bind`` creates the file with the process umask (often 0755 for a socket, so connectable
    by every local user); it is bound inside a fresh 0700 directory, given ``mode`` there, and
    only then renamed into place.
    """
    private = Path(tempfile.mkdtemp(prefix=".cli-sock-", dir=path.parent))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        staged = private / "s"
        sock.bind(str(staged))
        os.chmod(staged, mode)
        sock.listen(100)
        os.replace(staged, path)
    except BaseException:
        sock.close()
        raise
    finally:
        shutil.rmtree(private, ignore_errors=True)
    sock.setblocking(False)
    return sock


def _clear_stale_socket(path: Path) -> None:
    """Remove a socket file left by a dead daemon; refuse if a live daemon answers on it."""
    if not path.exists() and not path.is_symlink():
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    if not stat.S_ISSOCK(path.lstat().st_mode):
        raise PluginError(f"{path} exists and is not a socket; move it away or set plugin.cli.socket_path",
                          plugin_name=PLUGIN_NAME)
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink()
        return
    finally:
        probe.close()
    raise PluginError(f"another HomeAgent daemon is already listening on {path}", plugin_name=PLUGIN_NAME)


def make_plugin() -> CliSocket:
    return CliSocket()

