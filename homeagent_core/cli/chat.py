"""``homeagent chat`` and ``homeagent ask``: terminal clients of the daemon's ``cli`` socket.

``ask`` sends one message (the argument, or standard input) and prints the reply, so it fits
in shell pipelines: exit code 0 on success, 1 when the agent answered with an error, 2 when
the daemon cannot be reached, 3 when the agent is busy (its input queue is full; the message
was not accepted, send it again later). ``chat`` is interactive: line history (``<data>/cli_history``),
replies streamed as they arrive and rendered as Markdown on a terminal, slash commands
passed to the daemon (``/help`` lists them) with their replies printed as written, ``/quit`` or
Ctrl-D to leave. When the daemon restarts, ``chat`` says so, waits for it (``--reconnect-timeout``)
and carries on.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from homeagent_core.cli._common import DataOption, fail
from homeagent_core.datadir import resolve_data_dir
from homeagent_core.i18n import cli_language, t

__all__ = ["CliClient", "DaemonUnreachable", "ask", "chat"]

EXIT_ERROR = 1
EXIT_UNREACHABLE = 2
EXIT_BUSY = 3

SocketOption = Annotated[
    Path | None,
    typer.Option("--socket", help="Path of the daemon's socket (default: <data>/cli.sock).", show_default=False),
]
KeyOption = Annotated[
    str,
    typer.Option(
        "--api-key", envvar="HOMEAGENT_CLI_KEY", help="API key, when the daemon requires one (plugin.cli.api_key).",
        show_default=False,
    ),
]
TimeoutOption = Annotated[float, typer.Option(help="Seconds to wait for a reply.", min=1)]
ReconnectOption = Annotated[
    float,
    typer.Option("--reconnect-timeout", help="Seconds to wait for a restarting daemon before giving up.", min=0),
]


class DaemonUnreachable(Exception):
    """The socket is missing or nobody answers on it."""


class AgentError(Exception):
    """The daemon answered with ``{"type": "error"}``; ``code`` is ``"busy"`` for backpressure."""

    def __init__(self, message: str, *, code: str = "", retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code, self.retry_after = code, retry_after

    @classmethod
    def from_line(cls, message: dict[str, Any]) -> AgentError:
        retry = message.get("retry_after")
        return cls(
            str(message.get("error")),
            code=str(message.get("code") or ""),
            retry_after=retry if isinstance(retry, int) else None,
        )


class CliClient:
    """A blocking client of the line-JSON socket protocol."""

    def __init__(self, path: Path, *, api_key: str = "", timeout: float = 300.0) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(path))
        except FileNotFoundError:
            self.sock.close()
            raise DaemonUnreachable(f"no daemon socket at {path}; start the daemon with `homeagent serve`") from None
        except OSError as exc:
            self.sock.close()
            raise DaemonUnreachable(
                f"cannot connect to {path}: {exc.strerror or exc}; is `homeagent serve` running?"
            ) from None
        self._file = self.sock.makefile("rwb")
        if api_key:
            self._write(f"/auth {api_key}")
            self._expect_response()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the daemon may have gone away with unsent bytes buffered
            self._file.close()
        self.sock.close()

    def closed_by_daemon(self) -> bool:
        """Whether the daemon has hung up (it stopped or restarted) since the last reply."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
            if not readable:
                return False
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def __enter__(self) -> CliClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, line: str) -> None:
        self._file.write(line.encode("utf-8") + b"\n")
        self._file.flush()

    def _read(self) -> dict[str, Any]:
        try:
            raw = self._file.readline()
        except TimeoutError:
            raise AgentError("no reply from the daemon in time (raise --timeout)") from None
        if not raw:
            raise AgentError("the daemon closed the connection")
        return dict(json.loads(raw))

    def _expect_response(self) -> dict[str, Any]:
        message = self._read()
        if message.get("type") == "error":
            raise AgentError.from_line(message)
        return message

    def send(self, text: str) -> Iterator[dict[str, Any]]:
        """Send one message; yield the daemon's events up to and including the response."""
        self._write(json.dumps({"text": text}, ensure_ascii=False) if "\n" in text else text)
        while True:
            message = self._read()
            kind = message.get("type")
            if kind == "error":
                raise AgentError.from_line(message)
            yield message
            if kind == "response":
                return


def _socket_path(data: Path | None, sock: Path | None) -> Path:
    return sock if sock is not None else resolve_data_dir(data) / "cli.sock"


def ask(
    text: Annotated[str | None, typer.Argument(help="The message; '-' or nothing reads standard input.")] = None,
    data: DataOption = None,
    sock: SocketOption = None,
    api_key: KeyOption = "",
    timeout: TimeoutOption = 300.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final response object as JSON.")] = False,
) -> None:
    """Ask the running agent one question and print the reply (exit 1 on error, 2 if unreachable, 3 if busy)."""
    if text is None or text == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise fail(t(cli_language(), "cli.chat.nothing"))
    stream = sys.stdout.isatty() and not as_json
    try:
        with CliClient(_socket_path(data, sock), api_key=api_key, timeout=timeout) as client:
            streamed = ""
            for event in client.send(text.strip()):
                kind = event.get("type")
                if kind == "delta" and stream:
                    streamed += event["content"]
                    typer.echo(event["content"], nl=False)
                elif kind == "reset" and stream and streamed:
                    typer.echo("\n" + t(cli_language(), "cli.restarted"))
                    streamed = ""
                elif kind == "message" and not as_json:
                    typer.echo(event["content"])
                elif kind == "response":
                    if as_json:
                        typer.echo(json.dumps(event, ensure_ascii=False))
                    elif stream and streamed and streamed == event.get("content"):
                        typer.echo("")
                    else:
                        if streamed:
                            typer.echo("")
                        typer.echo(event.get("content", ""))
    except DaemonUnreachable as exc:
        raise fail(str(exc), EXIT_UNREACHABLE) from None
    except AgentError as exc:
        raise fail(str(exc), EXIT_BUSY if exc.code == "busy" else EXIT_ERROR) from None


class _Renderer:
    """Prints streamed replies: live Markdown on a terminal, plain text otherwise."""

    def __init__(self, markdown: bool) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.markdown = markdown and self.console.is_terminal
        self._live: Any = None
        self._text = ""

    def _render(self) -> Any:
        from rich.markdown import Markdown

        return Markdown(self._text)

    def delta(self, content: str) -> None:
        self._text += content
        if self.markdown:
            if self._live is None:
                from rich.live import Live

                self._live = Live(self._render(), console=self.console, refresh_per_second=12)
                self._live.start()
            else:
                self._live.update(self._render())
        else:
            self.console.print(content, end="", markup=False)

    def reset(self) -> None:
        self._text = ""
        if not self.markdown:
            self.console.print("\n" + t(cli_language(), "cli.restarted"), markup=False)

    def finish(self, content: str) -> None:
        if self._live is not None:
            self._text = content
            self._live.update(self._render())
            self._live.stop()
        elif self._text and self._text == content:
            self.console.print()
        elif self.markdown:
            from rich.markdown import Markdown

            self.console.print(Markdown(content))
        else:
            if self._text:
                self.console.print()
            self.console.print(content, markup=False)
        self._live, self._text = None, ""

    def plain(self, content: str) -> None:
        """A command's reply: shown as written (``<name>`` placeholders and line breaks kept)."""
        self._live, self._text = None, ""
        self.console.print(content, markup=False, highlight=False)

    def note(self, content: str, style: str = "") -> None:
        self.console.print(content, style=style or None, markup=False)


def _history(data: Path | None) -> Callable[[], None]:
    """Load readline history from ``<data>/cli_history``; returns the function that saves it."""
    try:
        import readline
    except ImportError:  # pragma: no cover - platforms without readline
        return lambda: None
    root = resolve_data_dir(data)
    path = root / "cli_history"
    if path.exists():
        with contextlib.suppress(OSError):
            readline.read_history_file(str(path))
    readline.set_history_length(1000)

    def save() -> None:
        if root.is_dir():
            with contextlib.suppress(OSError):
                readline.write_history_file(str(path))

    return save


def chat(
    data: DataOption = None,
    sock: SocketOption = None,
    api_key: KeyOption = "",
    timeout: TimeoutOption = 300.0,
    plain: Annotated[bool, typer.Option("--plain", help="Plain text instead of Markdown rendering.")] = False,
    reconnect_timeout: ReconnectOption = 60.0,
) -> None:
    """Chat with the running agent in the terminal (/help lists commands, /quit leaves)."""
    render = _Renderer(markdown=not plain)
    save_history = _history(data)
    try:
        client = CliClient(_socket_path(data, sock), api_key=api_key, timeout=timeout)
    except DaemonUnreachable as exc:
        raise fail(str(exc), EXIT_UNREACHABLE) from None
    except AgentError as exc:
        raise fail(str(exc), EXIT_ERROR) from None
    render.note(t(cli_language(), "cli.chat.connected"), "dim")
    path = _socket_path(data, sock)
    try:
        while True:
            try:
                line = input("› ")
            except EOFError:
                break
            except KeyboardInterrupt:
                render.note("")
                continue
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            if client.closed_by_daemon():  # it restarted while we waited for input: nothing is lost
                client.close()
                render.note(t(cli_language(), "cli.chat.waiting"), "yellow")
                client = _reconnect(path, api_key, timeout, reconnect_timeout)
                render.note(t(cli_language(), "cli.chat.reconnected"), "yellow")
            try:
                for event in client.send(text):
                    kind = event.get("type")
                    if kind == "delta":
                        render.delta(event["content"])
                    elif kind == "reset":
                        render.reset()
                    elif kind == "message":
                        render.note(event["content"], "cyan")
                    elif kind == "response" and text.startswith("/"):
                        render.plain(event.get("content", ""))
                    elif kind == "response":
                        render.finish(event.get("content", ""))
            except (AgentError, OSError) as exc:
                render.finish("")
                if isinstance(exc, AgentError) and "closed the connection" not in str(exc):
                    render.note(t(cli_language(), "cli.error", message=exc), "red")
                    continue
                client.close()
                render.note(t(cli_language(), "cli.chat.gone"), "yellow")
                client = _reconnect(path, api_key, timeout, reconnect_timeout)
                render.note(t(cli_language(), "cli.chat.unanswered"), "yellow")
    finally:
        save_history()
        client.close()


def _reconnect(path: Path, api_key: str, timeout: float, bound: float) -> CliClient:
    """A new connection to the daemon once it is back, trying for up to ``bound`` seconds.

    Raises:
        typer.Exit: it did not come back in time (exit status 2, with the reason).
    """
    deadline = time.monotonic() + bound
    delay = 0.2
    while True:
        try:
            return CliClient(path, api_key=api_key, timeout=timeout)
        except DaemonUnreachable as exc:
            if time.monotonic() >= deadline:
                message = (f"the daemon did not come back within {bound:g} s: {exc}; start it with "
                           "`homeagent serve` and run `homeagent chat` again")
                raise fail(message, EXIT_UNREACHABLE) from None
        except AgentError as exc:
            raise fail(str(exc), EXIT_ERROR) from None
        time.sleep(delay)  # waiting for a restarting daemon, bounded by the deadline above
        delay = min(2.0, delay * 2)
