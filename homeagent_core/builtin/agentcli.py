"""Built-in ``agentcli``: terminal sessions on real pseudo-terminals for the model.

``term_start`` runs a program (a shell by default) on a fresh PTY, so interactive programs
behave as they do for a person; ``term_send`` types into it, ``term_read`` returns what it
printed since the last read (escape sequences stripped), ``term_resize`` and ``term_stop``
do what they say, ``term_list`` shows the sessions. Output is kept in a 128 KB ring buffer per
session; older bytes are dropped with a note. New output is announced to the agent on the
input channel ``agentcli`` in batches — once ``notify_bytes`` unannounced bytes arrived or
``notify_interval`` passed since the first of them — and those notices are never stored in
memory. A session lives ``default_timeout`` (5 min) unless ``term_start`` asks for another
lifetime, then its process group is killed.

Like ``cmd``, it is disabled until ``plugin.agentcli.enabled`` is true.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.durations import format_duration, parse_duration
from homeagent_sdk import (
    ChannelDef,
    ChannelRegistry,
    ConfigDef,
    InjectOptions,
    SettingsRegistry,
    ToolError,
    ToolRegistryProtocol,
    hookimpl,
)
from homeagent_sdk.errors import InputQueueFull

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "agentcli"
CHANNEL = "agentcli"
BUFFER_BYTES = 128 * 1024
MAX_LIFETIME = 24 * 3600.0

__all__ = ["AgentCli", "Terminal", "make_plugin", "strip_ansi"]

log = logging.getLogger(__name__)

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
    r"|\x1b[@-Z\\-_]"  # two-character escapes
)


def strip_ansi(text: str) -> str:
    """Text without terminal escape sequences, with CRLF/CR line ends as plain newlines."""
    text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n")
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]  # a bare CR overwrites the line
    return "\n".join(lines)


def _set_controlling_tty() -> None:  # runs in the child between fork and exec
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@dataclass(eq=False)
class Terminal:
    """One PTY session."""

    id: str
    argv: list[str]
    proc: subprocess.Popen[bytes]
    master: int
    started: float = field(default_factory=time.time)
    lifetime: float = 300.0
    buffer: bytearray = field(default_factory=bytearray)
    total: int = 0
    read_pos: int = 0
    notified: int = 0
    exit_code: int | None = None
    closed: bool = False
    data: asyncio.Event = field(default_factory=asyncio.Event)
    notify_handle: asyncio.TimerHandle | None = None
    expire_handle: asyncio.TimerHandle | None = None

    @property
    def buffer_start(self) -> int:
        return self.total - len(self.buffer)

    def append(self, chunk: bytes) -> None:
        self.buffer.extend(chunk)
        self.total += len(chunk)
        overflow = len(self.buffer) - BUFFER_BYTES
        if overflow > 0:
            del self.buffer[:overflow]
        self.data.set()

    def status(self) -> dict[str, Any]:
        alive = self.exit_code is None and not self.closed
        return {
            "id": self.id,
            "command": shlex.join(self.argv),
            "pid": self.proc.pid,
            "state": "running" if alive else f"exited ({self.exit_code})",
            "unread_bytes": self.total - max(self.read_pos, self.buffer_start),
            "age": format_duration(round(time.time() - self.started)),
            "expires_in": format_duration(max(0, round(self.started + self.lifetime - time.time()))) if alive else "",
        }


class AgentCli:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self.terminals: dict[str, Terminal] = {}
        self._next = 1
        self._background: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(
            key="enabled", type="bool", default=False,
            description="Allow the model to open terminal sessions (off on a new install).",
        ))
        registry.add(ConfigDef(
            key="default_timeout", type="duration", default="5m", min=1, max=MAX_LIFETIME,
            description="Lifetime of a session unless term_start asks for another.",
        ))
        registry.add(ConfigDef(
            key="notify_bytes", type="int", default=2048, min=1, max=BUFFER_BYTES,
            description="Announce new output once this many unannounced bytes arrived.",
        ))
        registry.add(ConfigDef(
            key="notify_interval", type="duration", default="2s", min=0.01, max=3600,
            description="Announce new output at the latest this long after it arrived.",
        ))
        registry.add(ConfigDef(
            key="max_sessions", type="int", default=4, min=1, max=64,
            description="Sessions that may run at the same time.",
        ))
        registry.add(ConfigDef(
            key="shell", type="string", default="",
            description="Program term_start runs when no command is given; empty = $SHELL, else /bin/sh.",
        ))

    @hookimpl
    def register_input_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChannelDef(
            name=CHANNEL, description="notices about new output of terminal sessions", no_memory=True,
        ))

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.term_start)
        registry.add(self.term_send)
        registry.add(self.term_read)
        registry.add(self.term_resize)
        registry.add(self.term_stop)
        registry.add(self.term_list, parallel_safe=True)

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk

    @hookimpl
    async def shutdown(self) -> None:
        for terminal in list(self.terminals.values()):
            await self._close(terminal, announce=False)
        for task in list(self._background):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------------ helpers

    @property
    def sdk(self) -> ScopedSDK:
        if self._sdk is None:
            raise ToolError("agentcli has not started yet")
        return self._sdk

    def _terminal(self, term_id: str) -> Terminal:
        terminal = self.terminals.get(term_id.strip())
        if terminal is None:
            known = ", ".join(self.terminals) or "none"
            raise ToolError(f"no terminal {term_id!r} (open ones: {known}); start one with term_start")
        return terminal

    def _spawn_task(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _workdir(self) -> Path:
        services = self.sdk.services
        data = Path(services.data_dir) if services is not None else self.sdk.data_dir.parent.parent
        path = data / "workspace"
        path.mkdir(parents=True, exist_ok=True)
        return path

    # ------------------------------------------------------------------ PTY plumbing

    def _on_readable(self, terminal: Terminal) -> None:
        try:
            chunk = os.read(terminal.master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: every slave end closed, the program is gone
            chunk = b""
        if not chunk:
            asyncio.get_running_loop().remove_reader(terminal.master)
            self._spawn_task(self._reap(terminal))
            return
        terminal.append(chunk)
        self._maybe_notify(terminal)

    def _maybe_notify(self, terminal: Terminal) -> None:
        pending = terminal.total - terminal.notified
        if pending <= 0:
            return
        if pending >= int(self.sdk.settings.get("notify_bytes") or 2048):
            self._notify(terminal)
        elif terminal.notify_handle is None:
            delay = float(self.sdk.settings.get("notify_interval") or 2.0)
            terminal.notify_handle = asyncio.get_running_loop().call_later(delay, self._notify, terminal)

    def _notify(self, terminal: Terminal, extra: str = "") -> None:
        if terminal.notify_handle is not None:
            terminal.notify_handle.cancel()
            terminal.notify_handle = None
        pending = terminal.total - terminal.notified
        if pending <= 0 and not extra:
            return
        terminal.notified = terminal.total
        tail = strip_ansi(bytes(terminal.buffer[-200:]).decode("utf-8", "replace")).strip().splitlines()
        last = tail[-1][:120] if tail else ""
        parts = [f"[{terminal.id}]"]
        if pending > 0:
            parts.append(f"{pending} new bytes of output; read them with term_read(term_id=\"{terminal.id}\").")
            if last:
                parts.append(f"Last line: {last}")
        if extra:
            parts.append(extra)
        text = " ".join(parts)
        self.sdk.events.publish("terminal_output", {"id": terminal.id, "bytes": pending, "last_line": last})
        self._spawn_task(self._inject(text))

    async def _inject(self, text: str) -> None:
        try:
            await self.sdk.io.inject_text(text, CHANNEL, InjectOptions(no_memory=True))
        except InputQueueFull as exc:  # the output stays readable with term_read
            log.warning("agentcli: terminal output not announced: %s", exc)
        except Exception:
            log.warning("agentcli: could not announce terminal output", exc_info=True)

    async def _reap(self, terminal: Terminal) -> None:
        code = await asyncio.to_thread(terminal.proc.wait)
        terminal.exit_code = code
        terminal.data.set()
        if terminal.closed:
            return
        self._notify(terminal, f"The program exited with code {code}.")
        terminal.closed = True  # the output stays readable; the PTY and the timers are released
        if terminal.expire_handle is not None:
            terminal.expire_handle.cancel()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(terminal.proc.pid, signal.SIGKILL)  # anything the program left behind
        with contextlib.suppress(OSError):
            os.close(terminal.master)

    async def _close(self, terminal: Terminal, *, announce: bool) -> None:
        if terminal.closed:
            return
        terminal.closed = True
        loop = asyncio.get_running_loop()
        loop.remove_reader(terminal.master)
        for handle in (terminal.notify_handle, terminal.expire_handle):
            if handle is not None:
                handle.cancel()
        if terminal.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(terminal.proc.pid, signal.SIGHUP)
            try:
                await asyncio.to_thread(terminal.proc.wait, 2.0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(terminal.proc.pid, signal.SIGKILL)
                await asyncio.to_thread(terminal.proc.wait)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(terminal.proc.pid, signal.SIGKILL)  # leftovers of the group
        terminal.exit_code = terminal.proc.returncode
        with contextlib.suppress(OSError):
            os.close(terminal.master)
        terminal.data.set()
        if announce:
            self._notify(terminal, "The session reached its lifetime and was stopped.")

    def _expire(self, terminal: Terminal) -> None:
        self._spawn_task(self._close(terminal, announce=True))

    # ------------------------------------------------------------------ tools

    async def term_start(self, command: str = "", cols: int = 120, rows: int = 32, lifetime: str = "") -> str:
        """Open a terminal session on a real PTY running a program (a shell by default).

        Disabled unless the owner set plugin.agentcli.enabled = true. New output is announced
        on the agentcli channel; read it with term_read.

        Args:
            command: program and arguments, quoted like in a shell; empty = the default shell.
            cols: terminal width in characters.
            rows: terminal height in lines.
            lifetime: how long the session may live, e.g. 10m; empty = plugin.agentcli.default_timeout (5m).
        """
        settings = self.sdk.settings
        if not settings.get("enabled"):
            raise ToolError(
                "terminal sessions are disabled on this install; the owner can enable them with "
                "`homeagent config set plugin.agentcli.enabled true`"
            )
        running = [t for t in self.terminals.values() if not t.closed and t.exit_code is None]
        limit = int(settings.get("max_sessions") or 4)
        if len(running) >= limit:
            raise ToolError(f"{limit} sessions are already open ({', '.join(t.id for t in running)}); stop one first")
        if not (10 <= cols <= 1000 and 2 <= rows <= 500):
            raise ToolError("cols must be 10-1000 and rows 2-500")
        try:
            seconds = parse_duration(lifetime) if lifetime else float(settings.get("default_timeout") or 300)
        except ValueError as exc:
            raise ToolError(f"lifetime: {exc}") from None
        if not 0 < seconds <= MAX_LIFETIME:
            raise ToolError(f"lifetime must be between 1s and {format_duration(MAX_LIFETIME)}")
        try:
            argv = shlex.split(command) if command.strip() else [self._shell()]
        except ValueError as exc:
            raise ToolError(f"cannot split the command line ({exc}); check the quotes") from None
        if shutil.which(argv[0]) is None:
            raise ToolError(f"program {argv[0]!r} was not found on PATH or is not executable")
        master, slave = os.openpty()
        try:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
            proc = subprocess.Popen(
                argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=self._workdir(),
                env=env,
                start_new_session=True,
                preexec_fn=_set_controlling_tty,  # the PTY must become the controlling tty
                close_fds=True,
            )
        except OSError as exc:
            os.close(master)
            raise ToolError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        terminal = Terminal(id=f"term_{self._next}", argv=argv, proc=proc, master=master, lifetime=seconds)
        self._next += 1
        self.terminals[terminal.id] = terminal
        loop = asyncio.get_running_loop()
        loop.add_reader(master, self._on_readable, terminal)
        terminal.expire_handle = loop.call_later(seconds, self._expire, terminal)
        life = format_duration(seconds)
        return f"{terminal.id} started: {shlex.join(argv)} (pid {proc.pid}, {cols}x{rows}, lifetime {life})"

    def _shell(self) -> str:
        configured = str(self.sdk.settings.get("shell") or "")
        return configured or os.environ.get("SHELL") or "/bin/sh"

    async def term_send(self, term_id: str, text: str, enter: bool = True) -> str:
        """Type text into a terminal session (control characters allowed, e.g. "\\u0003" for Ctrl-C).

        Args:
            term_id: the session id, e.g. term_1.
            text: what to type.
            enter: press Enter after the text.
        """
        terminal = self._terminal(term_id)
        if terminal.closed or terminal.exit_code is not None:
            raise ToolError(f"{terminal.id} has ended ({terminal.status()['state']}); start a new session")
        data = (text + ("\r" if enter else "")).encode("utf-8")
        view = memoryview(data)
        async with asyncio.timeout(10):
            while view:
                try:
                    written = os.write(terminal.master, view)
                except BlockingIOError:
                    await asyncio.sleep(0.01)
                    continue
                view = view[written:]
        return f"sent {len(data)} bytes to {terminal.id}"

    async def term_read(self, term_id: str, wait: float = 0, max_bytes: int = 16000) -> str:
        """Return what a session printed since the last read (escape sequences removed).

        Args:
            term_id: the session id, e.g. term_1.
            wait: seconds to wait for output when there is none yet (at most 30).
            max_bytes: return at most this many bytes; the rest stays unread.
        """
        terminal = self._terminal(term_id)
        if not 0 <= wait <= 30:
            raise ToolError("wait must be between 0 and 30 seconds")
        if not 1 <= max_bytes <= BUFFER_BYTES:
            raise ToolError(f"max_bytes must be between 1 and {BUFFER_BYTES}")
        if wait and terminal.total == terminal.read_pos and terminal.exit_code is None and not terminal.closed:
            terminal.data.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await terminal.data.wait()
        head: list[str] = []
        notes: list[str] = []
        if terminal.read_pos < terminal.buffer_start:
            head.append(f"[{terminal.buffer_start - terminal.read_pos} older bytes were dropped from the buffer]")
            terminal.read_pos = terminal.buffer_start
        offset = terminal.read_pos - terminal.buffer_start
        chunk = bytes(terminal.buffer[offset : offset + max_bytes])
        terminal.read_pos += len(chunk)
        terminal.notified = max(terminal.notified, terminal.read_pos)
        rest = terminal.total - terminal.read_pos
        if rest:
            notes.append(f"[{rest} more bytes unread; call term_read again]")
        if terminal.exit_code is not None or terminal.closed:
            notes.append(f"[{terminal.status()['state']}]")
        text = strip_ansi(chunk.decode("utf-8", "replace")).rstrip("\n")
        if not head and not notes:
            return text or "(no new output)"
        return "\n".join([*head, text, *notes])

    def term_resize(self, term_id: str, cols: int, rows: int) -> str:
        """Change the size of a session's terminal.

        Args:
            term_id: the session id.
            cols: width in characters (10-1000).
            rows: height in lines (2-500).
        """
        terminal = self._terminal(term_id)
        if not (10 <= cols <= 1000 and 2 <= rows <= 500):
            raise ToolError("cols must be 10-1000 and rows 2-500")
        if terminal.closed:
            raise ToolError(f"{terminal.id} has ended")
        fcntl.ioctl(terminal.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(terminal.proc.pid, signal.SIGWINCH)
        return f"{terminal.id} resized to {cols}x{rows}"

    async def term_stop(self, term_id: str) -> str:
        """Stop a session: hang up its program (killed after 2 s) and free the terminal.

        Args:
            term_id: the session id.
        """
        terminal = self._terminal(term_id)
        await self._close(terminal, announce=False)
        del self.terminals[terminal.id]
        return f"{terminal.id} stopped (exit code {terminal.exit_code})"

    def term_list(self) -> list[dict[str, Any]]:
        """The sessions: id, command, pid, state, unread bytes, age and time left."""
        return [t.status() for t in self.terminals.values()]


def make_plugin() -> AgentCli:
    return AgentCli()
