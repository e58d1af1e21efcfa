"""Out-of-process plugins, the transport: a spawned process, its pipes and the framed peer on them.

A :class:`Connection` starts one plugin process on pipes the host makes itself (stdin and
stdout carry the NDJSON frames of ``docs/PROTOCOL.md`` through a
:class:`~homeagent_sdk.proc.wire.Peer`; stderr is logged as ``homeagent.plugin.<name>``), in
its own process group, with ``PR_SET_PDEATHSIG`` on Linux so it dies with the daemon, and with
an environment stripped of the daemon's secrets (:func:`plugin_environment`).

It sees the process die three ways: the process exits (waited on with a pidfd, not inferred
from stdout EOF — a grandchild may hold the pipe open); the process lives on with its stdout
closed (the host owns the read end of a pipe it made, so EOF is seen on every event loop,
uvloop included); or it stops answering ``plugin.ping`` within the deadline (its event loop is
blocked). Pings go out every ``ping_interval``, and at once (:meth:`Connection.probe`, with a
deadline of at most :data:`PROBE_TIMEOUT`) whenever a call to the plugin times out or is
cancelled, so a plugin whose loop hangs is caught right after the first call it left unanswered.
On exit every pending call fails with :data:`PROCESS_EXITED`, every process started
from the plugin is killed (its process tree, and anything carrying its instance token in the
environment, which catches ``setsid`` grandchildren), and its owner — the plugin side,
:class:`~homeagent_core.plugins.proc.ProcPlugin` — is told through
:meth:`ConnectionOwner.on_exit`. A spawn that fails or is cancelled after the process started
(a stop landing in the middle of a restart) kills and reaps the process and closes its pipes
before it raises (:meth:`Connection.abandon`), so no process or pipe outlives its event loop.
Stderr is logged through a token bucket with a line-length cap.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Protocol

from homeagent_sdk.proc.wire import FrameBatcher, Peer, PeerClosed, RemoteError

__all__ = ["PROCESS_EXITED", "Connection", "ConnectionOwner", "plugin_environment"]

#: Error text of calls pending when the process died (the original's wording first).
PROCESS_EXITED = "proc: 插件进程已退出 (plugin process exited)"
_STDERR_TAIL = 20
#: Longest deadline of the ping sent at once when a call to the plugin went unanswered (s).
PROBE_TIMEOUT = 5.0
#: Stderr logging budget: a burst of lines, then a steady rate; longer lines are cut.
_STDERR_BURST = 200.0
_STDERR_RATE = 50.0
_STDERR_LINE_CAP = 2000
#: Environment variable carrying a per-process random token, inherited by every descendant.
_INSTANCE_ENV = "HOMEAGENT_PLUGIN_INSTANCE"


class ConnectionOwner(Protocol):
    """What a :class:`Connection` needs of the plugin it serves."""

    @property
    def name(self) -> str:
        """The plugin's name (log lines, thread names)."""

    @property
    def stopping(self) -> bool:
        """True while the owner stops the process on purpose (an exit then is no crash)."""

    def on_exit(self, conn: Connection, code: int) -> None:
        """Called once the process is gone, before ``conn.exited`` is set."""


def _pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _descendants(root: int, token: str) -> set[int]:
    """Processes started from a plugin: the tree under ``root`` (by parent pid) plus every
    process whose environment carries the plugin's instance token (a ``setsid`` grandchild,
    reparented away from the tree once its parent died). Linux ``/proc``; empty elsewhere."""
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc"):
        return set()
    needle = f"{_INSTANCE_ENV}={token}".encode()
    children: dict[int, list[int]] = collections.defaultdict(list)
    found: set[int] = set()
    me = os.getpid()
    with contextlib.suppress(OSError):
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
        for name in entries:
            pid = int(name)
            if pid == me:
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    stat = fh.read()
                ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children[ppid].append(pid)
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        found.add(pid)
            except OSError:
                continue
    stack = [root, *found]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(root)
    found.discard(me)
    return found


_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION)", re.IGNORECASE)


def plugin_environment(environ: Mapping[str, str], *, reveal_secrets: bool) -> dict[str, str]:
    """The environment an out-of-process plugin starts with: the daemon's, minus secrets.

    Variables whose names look like credentials (``*_API_KEY``, ``*TOKEN*``, ``*SECRET*``,
    ``*PASSWORD*``, ...) and the daemon's own ``HOMEAGENT_*`` variables (the web UI's API key,
    the data dir) are left out unless the plugin declared the ``secrets`` capability — the same
    rule as secret settings. ``PATH``, locale, ``HOME`` and the like pass through.
    """
    out: dict[str, str] = {}
    for name, value in environ.items():
        if not reveal_secrets and (_SECRET_ENV.search(name) or name.startswith("HOMEAGENT_")):
            continue
        out[name] = value
    return out


class _PipeProtocol(asyncio.Protocol):
    """A pipe end whose ``lost`` future says when its transport has closed the pipe for good."""

    def __init__(self) -> None:
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)


class _StderrProtocol(_PipeProtocol):
    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.conn = conn

    def data_received(self, data: bytes) -> None:
        self.conn.stderr(data)


class _StdoutProtocol(_PipeProtocol):
    """The read end of the child's stdout: a pipe the host made, so its EOF is seen."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.conn = conn

    def data_received(self, data: bytes) -> None:
        self.conn.peer.feed(data)

    def eof_received(self) -> bool:
        self.conn.stdout_closed()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.conn.stdout_closed()


class Connection:
    """One spawned process: transport, peer, stderr log, exit future."""

    def __init__(self, owner: ConnectionOwner, max_frame: int) -> None:
        self.owner = owner
        self.proc: Any = None  # subprocess.Popen
        self._err: asyncio.ReadTransport | None = None
        self.peer = Peer(
            self._write,
            max_frame=max_frame,
            unknown_method="未知 method",
            on_bad_frame=self._garbage,
            label=f"plugin {owner.name}",
        )
        self.exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.tail: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL)
        self.problem = ""
        self.token = secrets.token_hex(8)
        self._partial = b""
        self._tokens = _STDERR_BURST
        self._refilled = time.monotonic()
        self._suppressed = 0
        self._stdout_eof = False
        self._reader: asyncio.ReadTransport | None = None
        self._pinger: asyncio.Task[None] | None = None
        self._prober: asyncio.Task[bool] | None = None
        self._ping_timeout = 0.0
        self._stdin: asyncio.WriteTransport | None = None
        self._pipe_protocols: list[_PipeProtocol] = []
        self._unconnected: list[IO[bytes]] = []  # pipe ends not (yet) handed to a transport
        self._pidfd = -1
        self._batch: FrameBatcher | None = None
        self.log = logging.getLogger(f"homeagent.plugin.{owner.name}")

    async def spawn(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        """Start the process on pipes made here, and watch its exit with a pidfd.

        Not the event loop's subprocess support: uvloop leaves copies of the child's stdio
        pipes open at higher descriptors in the child, so a plugin closing its stdout never
        reads as EOF. ``subprocess`` closes every other descriptor in the child.

        Failing or cancelled after the process started (a stop landing mid-restart), it kills
        and reaps the process and closes every pipe before it raises: the caller never saw
        the process, so nothing else would."""
        loop = asyncio.get_running_loop()
        pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr: (read, write)
        child_ends = (pipes[0][0], pipes[1][1], pipes[2][1])
        try:
            proc = subprocess.Popen(
                argv,
                stdin=child_ends[0],
                stdout=child_ends[1],
                stderr=child_ends[2],
                cwd=str(cwd),
                env={**env, _INSTANCE_ENV: self.token},
                start_new_session=True,
                close_fds=True,
                preexec_fn=_pdeathsig if sys.platform.startswith("linux") else None,
            )
        except BaseException:
            for read_fd, write_fd in pipes:
                os.close(read_fd)
                os.close(write_fd)
            raise
        finally:
            for fd in child_ends:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.proc = proc
        stdin_file = os.fdopen(pipes[0][1], "wb", buffering=0)
        stdout_file = os.fdopen(pipes[1][0], "rb", buffering=0)
        stderr_file = os.fdopen(pipes[2][0], "rb", buffering=0)
        self._unconnected = [stdin_file, stdout_file, stderr_file]
        try:
            self._watch_exit(loop)
            connecting = loop.create_task(self._connect_pipes(loop, stdin_file, stdout_file, stderr_file))
        except BaseException:
            self.abandon()
            raise
        try:
            await asyncio.shield(connecting)
        except BaseException:
            # A cancel must not land inside the loop's own connect: uvloop then closes the
            # descriptor but leaves its file object open. Let the connect finish, then undo it.
            while not connecting.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait([connecting])
            self.abandon()
            raise

    async def _connect_pipes(
        self, loop: asyncio.AbstractEventLoop, stdin_file: IO[bytes], stdout_file: IO[bytes], stderr_file: IO[bytes]
    ) -> None:
        """Put the host's pipe ends on the event loop: the peer writes stdin, reads stdout."""
        # Each pipe end belongs to the loop once handed over, so it leaves ``_unconnected`` first.
        self._unconnected.remove(stdin_file)
        stdin, stdin_protocol = await loop.connect_write_pipe(_PipeProtocol, stdin_file)
        self._stdin = stdin
        self._pipe_protocols.append(stdin_protocol)
        self._batch = FrameBatcher(stdin)
        self._unconnected.remove(stdout_file)
        self._reader, stdout_protocol = await loop.connect_read_pipe(lambda: _StdoutProtocol(self), stdout_file)
        self._pipe_protocols.append(stdout_protocol)
        if hasattr(self._reader, "max_size"):
            self._reader.max_size = 64 * 1024  # smaller reads are faster for the small frames that dominate
        self._unconnected.remove(stderr_file)
        self._err, stderr_protocol = await loop.connect_read_pipe(lambda: _StderrProtocol(self), stderr_file)
        self._pipe_protocols.append(stderr_protocol)

    def abandon(self, timeout: float = 2.0) -> None:
        """Kill the process and everything it started, reap it and close its pipes, now.

        The synchronous last resort when nobody can wait for :attr:`exited` any more (the
        spawn or launch was cancelled, or the event loop is about to end): a SIGKILLed
        process is reaped within ``timeout`` s unless it is stuck in the kernel."""
        if self.proc is not None and not self.exited.done():
            self.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
            self.process_exited()
        for pipe in self._unconnected:
            pipe.close()
        self._unconnected = []

    async def wait_closed(self, timeout: float = 2.0) -> None:
        """Wait (bounded) until the pipe transports closed their pipes after the process exit.

        Closing a transport only schedules the close of its pipe; a stop that returns at once
        could leave the pipes open (and their file objects to the garbage collector) when the
        event loop ends right after, as it does at daemon shutdown."""
        pending = [p.lost for p in self._pipe_protocols if not p.lost.done()]
        if pending:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*pending)

    def _watch_exit(self, loop: asyncio.AbstractEventLoop) -> None:
        """Call :meth:`process_exited` on the loop once the process is gone (pidfd, else a thread)."""
        proc = self.proc
        assert proc is not None
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            try:
                pidfd = pidfd_open(proc.pid)
            except OSError:
                pidfd = -1
            if pidfd >= 0:

                def readable() -> None:
                    if proc.poll() is None:
                        return
                    self.process_exited()

                self._pidfd = pidfd
                loop.add_reader(pidfd, readable)
                return

        def wait() -> None:
            proc.wait()
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self.process_exited)

        import threading

        threading.Thread(target=wait, name=f"wait-{self.owner.name}", daemon=True).start()

    def start_pings(self, interval: float, timeout: float) -> None:
        """Ask ``plugin.ping`` every ``interval`` s; no answer within ``timeout`` s is a crash."""
        if interval > 0 and self._pinger is None:
            self._ping_timeout = timeout
            self._pinger = asyncio.get_running_loop().create_task(self._ping_loop(interval, timeout))

    def probe(self) -> None:
        """Ping now, with a deadline of at most :data:`PROBE_TIMEOUT` (a call went unanswered).

        A healthy plugin answers from its loop in milliseconds; one whose loop is blocked is
        killed as crashed instead of waiting for the next round of pings.
        """
        if self._ping_timeout <= 0 or not self.alive or self.owner.stopping:
            return
        if self._prober is None or self._prober.done():
            deadline = min(self._ping_timeout, PROBE_TIMEOUT)
            self._prober = asyncio.get_running_loop().create_task(self._ping_once(deadline))

    async def _ping_loop(self, interval: float, timeout: float) -> None:
        while True:
            await asyncio.sleep(interval)
            if not self.alive or self.owner.stopping:
                return
            if not await self._ping_once(timeout):
                return

    async def _ping_once(self, timeout: float) -> bool:
        """One ``plugin.ping``; False when the plugin is gone (or killed for not answering)."""
        try:
            await self.peer.call("plugin.ping", None, timeout=timeout)
        except RemoteError:
            return True  # any answer is a sign of life (an older plugin says "unknown method")
        except TimeoutError:
            if self.alive and not self.owner.stopping:
                self.problem = self.problem or (
                    f"did not answer plugin.ping within {timeout:g} s (its event loop is blocked, or it "
                    "stopped reading stdin)"
                )
                self.log.error("plugin %s %s — killing it", self.owner.name, self.problem)
                self.kill()
            return False
        except Exception:
            return False
        return True
    @property
    def pid(self) -> int:
        return int(self.proc.pid) if self.proc is not None else 0

    @property
    def alive(self) -> bool:
        return self.proc is not None and not self.exited.done()

    def _write(self, data: bytes) -> None:
        if self._batch is None or self._batch.transport.is_closing():
            raise PeerClosed(PROCESS_EXITED)
        self._batch.write(data)

    def stderr(self, data: bytes) -> None:
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        if len(self._partial) > _STDERR_LINE_CAP:
            lines.append(self._partial)
            self._partial = b""
        for raw in lines:
            if len(raw) > _STDERR_LINE_CAP:
                raw = raw[:_STDERR_LINE_CAP] + f"… ({len(raw) - _STDERR_LINE_CAP} more bytes cut)".encode()
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self.tail.append(line)
                self._log_line(line)

    def _drain_stderr(self) -> None:
        """Read what the dead process left in its stderr pipe (its last words name the cause)."""
        pipe = self._err.get_extra_info("pipe") if self._err is not None else None
        if pipe is None:
            return
        with contextlib.suppress(OSError, ValueError):
            for _ in range(64):
                data = os.read(pipe.fileno(), 65536)
                if not data:
                    break
                self.stderr(data)
        if self._partial:
            self.stderr(b"\n")

    def _log_line(self, line: str) -> None:
        """Log one stderr line through the token bucket; a flood becomes one summary line."""
        now = time.monotonic()
        self._tokens = min(_STDERR_BURST, self._tokens + (now - self._refilled) * _STDERR_RATE)
        self._refilled = now
        if self._tokens < 1.0:
            self._suppressed += 1
            return
        self._tokens -= 1.0
        self.flush_suppressed()
        self.log.info("%s", line)

    def flush_suppressed(self) -> None:
        if self._suppressed:
            self.log.warning(
                "plugin %s: %d stderr lines suppressed (more than %g lines/s)",
                self.owner.name,
                self._suppressed,
                _STDERR_RATE,
            )
            self._suppressed = 0

    def _garbage(self, line: bytes) -> None:
        if self.problem:
            return
        self.problem = (
            f"wrote non-protocol output to stdout ({line[:80]!r}); stdout is the protocol channel, "
            "log to stderr instead"
        )
        self.log.error("plugin %s %s — killing it", self.owner.name, self.problem)
        self.peer.close(PeerClosed(PROCESS_EXITED))
        self.kill()

    def stdout_closed(self) -> None:
        # Usually the process is exiting; only a process that lives on without its protocol
        # channel is killed (after a short grace, so its real exit status is reported).
        if self._stdout_eof:
            return
        self._stdout_eof = True
        if self.alive and not self.owner.stopping:
            asyncio.get_running_loop().call_later(1.0, self._stdout_gone)

    def _stdout_gone(self) -> None:
        if self.alive and not self.owner.stopping:
            self.problem = self.problem or "closed its stdout (the protocol channel) while still running"
            self.kill()

    def kill(self) -> None:
        pid = self.pid
        if pid:
            self.kill_descendants()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def kill_descendants(self) -> None:
        """SIGKILL every process started from this plugin (not the plugin itself)."""
        for pid in _descendants(self.pid, self.token):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def _unwatch(self) -> None:
        """Stop watching the pidfd and close it."""
        pidfd, self._pidfd = self._pidfd, -1
        if pidfd >= 0:
            with contextlib.suppress(RuntimeError, ValueError):  # the loop closed meanwhile
                asyncio.get_running_loop().remove_reader(pidfd)
            os.close(pidfd)

    def process_exited(self) -> None:
        if self.exited.done() or self.proc is None:
            return
        self._unwatch()
        code = self.proc.poll()
        code = -1 if code is None else code
        # Order matters: fail pending calls and let the owner detach *before* "exited" is
        # signalled, so nothing waiting on it tears things down under a running handler.
        self.peer.close(PeerClosed(PROCESS_EXITED))
        for task in (self._pinger, self._prober):
            if task is not None:
                task.cancel()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # leftovers of the group (grandchildren)
        self.kill_descendants()  # and those that left the group (setsid)
        self._drain_stderr()
        for transport in (self._stdin, self._reader, self._err):
            if transport is not None:
                transport.close()
        self.flush_suppressed()
        self.owner.on_exit(self, code)
        self.exited.set_result(code)
