"""The browser's only way out: a forward proxy on loopback that checks every connection.

Playwright's request interception sees the first request of a navigation, not the redirect
hops Chromium follows by itself, nor WebSockets. So the browser is started with this proxy as
its ``--proxy-server`` and with loopback no longer bypassed (``<-loopback>``): every hop and
every protocol — a page, each 30x target, images, ``fetch``, form posts, ``new WebSocket`` —
is a new proxy request, and each one goes through the same :class:`AddressPolicy` as
``web_fetch``. The proxy resolves the host itself and connects to the very address it
checked, so DNS rebinding cannot slip a private address in between.

Two request forms arrive:

* ``CONNECT host:port`` — HTTPS and WebSocket tunnels; after the check the bytes are piped
  both ways (TLS stays end to end between Chromium and the site);
* ``GET http://host:port/path HTTP/1.1`` — plain HTTP; the request line is rewritten to
  origin form, proxy headers are dropped, and the rest is piped.

A refused address answers ``403`` with the reason, which is also handed to ``on_refused``
so the tool can report it; a host that does not resolve answers ``502``. Once checked, a
connection's bytes only ever go to the checked address: a client that re-uses the connection
for another host reaches the same server again, never a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from urllib.parse import urlsplit

from homeagent_sdk import ToolError
from homeagent_sdk.ssrf import AddressPolicy, AddressRefused, IPAddress

__all__ = ["REFUSED_HEADER", "GuardedProxy"]

#: the longest request head accepted (request line and headers)
MAX_HEAD = 64 * 1024
#: how long a client may take to send its request head
HEAD_TIMEOUT = 30.0
CHUNK = 64 * 1024
#: set on the proxy's own refusal answers, so a refused navigation is told from a site's 403
REFUSED_HEADER = "X-HomeAgent-Refused"
_HOP_HEADERS = (b"proxy-connection", b"proxy-authorization", b"keep-alive")


class ProxyRequestError(Exception):
    """The client sent something that is not a proxy request this proxy serves."""


def _split_host_port(authority: str, default_port: int) -> tuple[str, int]:
    """``example.org:443`` / ``[::1]:8080`` / ``example.org`` → host and port."""
    parts = urlsplit(f"//{authority}")
    try:
        port = parts.port or default_port
    except ValueError:
        raise ProxyRequestError(f"bad port in {authority!r}") from None
    if not parts.hostname:
        raise ProxyRequestError(f"no host in {authority!r}")
    return parts.hostname, port


def parse_head(head: bytes) -> tuple[str, str, int, bytes]:
    """A proxy request head → ``(method, host, port, head to send upstream)``.

    For ``CONNECT`` the upstream head is empty (the tunnel carries the client's own bytes).

    Raises:
        ProxyRequestError: not a proxy request (origin form, an unknown scheme, no host).
    """
    line, _, rest = head.partition(b"\r\n")
    try:
        method, target, version = line.decode("latin-1").split(" ")
    except ValueError:
        raise ProxyRequestError("malformed request line") from None
    if method == "CONNECT":
        host, port = _split_host_port(target, 443)
        return method, host, port, b""
    parts = urlsplit(target)
    if parts.scheme not in ("http", "ws"):
        raise ProxyRequestError(f"only http:// requests are proxied, not {target[:80]!r}")
    host, port = _split_host_port(parts.netloc.rpartition("@")[2], 80)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    headers = [h for h in rest.split(b"\r\n") if h]
    upgrade = any(h.lower().startswith(b"upgrade:") for h in headers)
    kept: list[bytes] = []
    for header in headers:
        name = header.split(b":", 1)[0].strip().lower()
        if name in _HOP_HEADERS or (name == b"connection" and not upgrade):
            continue
        kept.append(header)
    if not upgrade:
        kept.append(b"Connection: close")
    upstream = b"\r\n".join([f"{method} {path} {version}".encode("latin-1"), *kept]) + b"\r\n\r\n"
    return method, host, port, upstream


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then half-close the other side."""
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


class GuardedProxy:
    """A loopback forward proxy whose every connection passes :class:`AddressPolicy`."""

    def __init__(self, policy: AddressPolicy, on_refused: Callable[[str], None]) -> None:
        self._policy = policy
        self._on_refused = on_refused
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> str:
        """Listen on an ephemeral loopback port; returns the proxy URL."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.url

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if server is not None:
            with contextlib.suppress(Exception):
                await server.wait_closed()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer), name="browser-proxy")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            try:
                async with asyncio.timeout(HEAD_TIMEOUT):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError):
                return
            if len(head) > MAX_HEAD:
                return await self._answer(writer, 431, "request head too large")
            try:
                method, host, port, first = parse_head(head)
            except ProxyRequestError as exc:
                return await self._answer(writer, 400, str(exc))
            try:
                addresses = await self._policy.resolve(host, port)
            except ToolError as exc:  # refused, or a host that does not resolve
                if isinstance(exc, AddressRefused):
                    self._on_refused(str(exc))
                return await self._answer(writer, 403 if isinstance(exc, AddressRefused) else 502, str(exc))
            up_reader, upstream = await self._connect(addresses, port)
            if up_reader is None or upstream is None:
                return await self._answer(writer, 502, f"could not connect to {host}:{port}")
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                upstream.write(first)
            await asyncio.gather(_pipe(reader, upstream), _pipe(up_reader, writer))
        except (ConnectionError, OSError):
            pass
        finally:
            for w in (upstream, writer):
                if w is not None:
                    w.close()

    async def _connect(
        self, addresses: list[IPAddress], port: int
    ) -> tuple[asyncio.StreamReader | None, asyncio.StreamWriter | None]:
        """Connect to the first checked address that answers."""
        for ip in addresses:
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(15):
                    return await asyncio.open_connection(str(ip), port)
        return None, None

    async def _answer(self, writer: asyncio.StreamWriter, status: int, why: str) -> None:
        body = why.encode()
        reason = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large",
                  502: "Bad Gateway"}[status]
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\n{REFUSED_HEADER}: {status}\r\nConnection: close\r\n\r\n")
        writer.write(head.encode() + body)
        with contextlib.suppress(ConnectionError, OSError):
            await writer.drain()
