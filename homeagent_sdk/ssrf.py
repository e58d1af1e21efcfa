"""SSRF guard: only public addresses, unless the owner allowlists more.

A URL the model chooses — or a stranger's chat message names — must not reach the machine
itself, the home network or a cloud metadata service. The web tools, the browser's proxy and
the chat-app bridges (media a sender announces) all go through it. The guard works at two levels:

* :func:`check_url` resolves the host (every address DNS returns) before a request and
  refuses any address that is not globally routable — loopback, private, link-local
  (``169.254.169.254`` metadata included), CGNAT, multicast, reserved, unspecified, and the
  IPv4-mapped forms of those;
* :class:`GuardedTransport` does the same check again at connect time and connects to the
  very address it checked, so a second DNS answer (DNS rebinding) cannot slip a private
  address in between. Every redirect hop is a new request and is checked the same way.

The allowlist (``plugin.web.allow_private``) names hosts (``nas.local``), addresses
(``127.0.0.1``, ``[::1]``) or networks (``192.168.1.0/24``) that may be reached anyway, each
on ports: a bare entry allows the web ports 80 and 443 only, ``host:port`` that one port
(``127.0.0.1:8080``, ``[::1]:8080``, ``192.168.1.0/24:8123``) and ``host:*`` every port.
Allowing an address therefore never opens every service on it by accident.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from homeagent_sdk.errors import ToolError

__all__ = [
    "AddressPolicy",
    "AddressRefused",
    "DownloadTooLarge",
    "GuardedTransport",
    "IPAddress",
    "check_url",
    "download_capped",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_SETTING = "plugin.web.allow_private"
#: The ports a bare allowlist entry (no ``:port``) allows.
WEB_PORTS: frozenset[int] = frozenset({80, 443})
#: Ports of one allowlist entry; None means every port (``host:*``).
Ports = frozenset[int] | None


def _split_port(item: str, raw: str) -> tuple[str, Ports]:
    """``host[:port|:*]`` / ``[v6][:port|:*]`` → (host, ports); a bare IPv6 address has no port."""

    def bad() -> ToolError:
        return ToolError(
            f"{_SETTING}: {raw.strip()!r} has a bad port; write host:port (1-65535), host:* for every "
            "port, or the host alone for ports 80 and 443"
        )

    if item.startswith("["):
        host, sep, rest = item[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise bad()
        if not rest:
            return host, WEB_PORTS
        port = rest[1:]
    elif item.count(":") == 1:
        host, port = item.split(":")
    else:
        return item, WEB_PORTS
    if port == "*":
        return host, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise bad()
    return host, frozenset({int(port)})


class AddressRefused(ToolError):
    """The policy refuses an address (as opposed to a host that does not resolve)."""


def _why_blocked(ip: IPAddress) -> str:
    """A short reason an address is not public, or ``""``."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return _why_blocked(ip.ipv4_mapped)
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local (cloud metadata lives here)"
    if ip.is_private:
        return "private"
    if ip.is_multicast:
        return "multicast"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_reserved or not ip.is_global:
        return "not globally routable"
    return ""


def _covers(ports: Ports, port: int) -> bool:
    return ports is None or port in ports


def _merge(a: Ports, b: Ports) -> Ports:
    return None if a is None or b is None else a | b


def _entry(host: str, port: int) -> str:
    """How to write ``host``:``port`` as an allowlist entry."""
    bare = host.strip("[]")
    return f"[{bare}]:{port}" if ":" in bare else f"{bare}:{port}"


@dataclass
class AddressPolicy:
    """Which addresses the web tools may connect to (see the module docstring)."""

    #: host name -> its allowed ports (None: every port)
    hosts: dict[str, Ports] = field(default_factory=dict)
    networks: list[tuple[IPNetwork, Ports]] = field(default_factory=list)

    @classmethod
    def parse(cls, allow: str | Iterable[str]) -> AddressPolicy:
        """Build from ``"127.0.0.1:8080, 10.0.0.0/8, nas.local:*"`` (or a list of those).

        A bare entry allows ports 80 and 443, ``:port`` that port, ``:*`` every port.

        Raises:
            ToolError: an entry is neither a host name, an address nor a network, or its port is bad.
        """
        items = allow.split(",") if isinstance(allow, str) else list(allow)
        policy = cls()
        for raw in items:
            item = raw.strip().lower()
            if not item:
                continue
            host, ports = _split_port(item, raw)
            try:
                policy.networks.append((ipaddress.ip_network(host, strict=False), ports))
            except ValueError:
                if not host or "/" in host or not all(c.isalnum() or c in "-._" for c in host):
                    raise ToolError(
                        f"{_SETTING}: {raw.strip()!r} is not a host, address or network; "
                        "use e.g. 127.0.0.1:8080, 192.168.1.0/24 or nas.local:*"
                    ) from None
                name = host.rstrip(".")
                policy.hosts[name] = _merge(policy.hosts[name], ports) if name in policy.hosts else ports
        return policy

    def allowed_host(self, host: str, port: int) -> bool:
        name = host.lower().rstrip(".")
        return name in self.hosts and _covers(self.hosts[name], port)

    def check_address(self, host: str, ip: IPAddress, port: int) -> None:
        """Raise :class:`ToolError` when ``ip`` (an address of ``host``) may not be reached on ``port``."""
        reason = _why_blocked(ip)
        if not reason or self.allowed_host(host, port):
            return
        if any(ip in net and _covers(ports, port) for net, ports in self.networks):
            return
        shown = host if host == str(ip) else f"{host} ({ip})"
        listed = host.lower().rstrip(".") in self.hosts or any(ip in net for net, _ in self.networks)
        hint = (
            f"it is allowlisted for other ports only: add {_entry(host, port)} to {_SETTING}"
            if listed
            else f"the owner can allow it by adding {_entry(host, port)} to {_SETTING}"
        )
        raise AddressRefused(
            f"refused to connect to {shown} port {port}: the address is {reason}. The web tools only reach "
            f"public addresses; {hint}"
        )

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Every address of ``host``, each checked; raises :class:`ToolError` on the first refused one."""
        try:
            literal: IPAddress | None = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is not None:
            self.check_address(host, literal, port)
            return [literal]
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ToolError(f"cannot resolve host {host!r}: {exc.strerror or exc}") from None
        addresses: list[IPAddress] = []
        for info in infos:
            ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
            self.check_address(host, ip, port)
            if ip not in addresses:
                addresses.append(ip)
        if not addresses:
            raise ToolError(f"host {host!r} has no address")
        return addresses


async def check_url(url: str, policy: AddressPolicy) -> httpx.URL:
    """Validate scheme and host of ``url`` and check every address it resolves to.

    Raises:
        ToolError: not http(s), no host, or an address the policy refuses.
    """
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https"):
        raise ToolError(f"only http:// and https:// URLs can be fetched, not {url!r}")
    if not parts.hostname:
        raise ToolError(f"the URL {url!r} has no host")
    try:
        parsed = httpx.URL(url.strip())
    except httpx.InvalidURL as exc:
        raise ToolError(f"invalid URL {url!r}: {exc}") from None
    await policy.resolve(parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80))
    return parsed


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, checks, then connects to the checked address itself."""

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._policy.resolve(host, port)
        last: Exception | None = None
        for ip in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(ip), port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise ToolError("the web tools do not connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport whose every TCP connection goes through the address policy.

    No proxies from the environment (a proxy would connect on our behalf, unchecked).
    """

    def __init__(self, policy: AddressPolicy, *, max_connections: int = 20) -> None:
        super().__init__(trust_env=False)
        # httpx builds its pool without a network-backend parameter; swap in an equivalent
        # pool that connects through the guard (TLS still verifies the original host name).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=max_connections,
            max_keepalive_connections=max_connections // 2,
            keepalive_expiry=5.0,
            network_backend=_GuardedBackend(policy),
        )


class DownloadTooLarge(ToolError):
    """A download passed its byte cap (it is stopped there, never read whole)."""


async def download_capped(url: str, policy: AddressPolicy, *, max_bytes: int, timeout: float = 30.0) -> bytes:
    """GET ``url`` through the guard, following redirects (each hop checked), at most ``max_bytes``.

    The body is streamed and the download stops as soon as it passes the cap (a declared
    ``Content-Length`` over it is refused before reading).

    Raises:
        ToolError: not http(s), a refused address on any hop, an HTTP error status.
        DownloadTooLarge: the body is over ``max_bytes``.
    """
    await check_url(url, policy)
    chunks: list[bytes] = []
    size = 0
    async with (
        httpx.AsyncClient(transport=GuardedTransport(policy), timeout=timeout, follow_redirects=True) as client,
        client.stream("GET", url) as response,
    ):
        if response.status_code >= 400:
            raise ToolError(f"{url[:200]} answered HTTP {response.status_code}")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise DownloadTooLarge(f"{url[:200]} is {declared} bytes, over the cap of {max_bytes}")
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise DownloadTooLarge(f"{url[:200]} is over the cap of {max_bytes} bytes")
            chunks.append(chunk)
    return b"".join(chunks)
