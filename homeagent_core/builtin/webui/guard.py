"""Request guards in front of every web UI route: Host (DNS rebinding) and Origin (cross-site).

* **Host.** A page on ``evil.example`` whose DNS name is re-pointed at 127.0.0.1 talks to the
  daemon as if it were its own origin, but its requests carry ``Host: evil.example``. Only
  names that cannot be rebound by a stranger are served: IP literals, ``localhost`` (and
  ``*.localhost``), the address the server is bound to, this machine's host name (and
  ``<name>.local``), and the names in ``plugin.webui.allowed_hosts``. Anything else is a 421.
* **Origin.** A state-changing request (any method but GET/HEAD/OPTIONS, and every WebSocket
  handshake: a browser page may not open the nodes' socket from another site) whose ``Origin`` is
  not this server's own origin — scheme, host and port compared exactly, and an ``Origin`` that
  is not a bare ``scheme://host[:port]`` (user info, a path) refused outright — or whose
  ``Sec-Fetch-Site`` says it came from another site (another port of the same host counts as
  another site), is a 403 — whatever credentials it carries. Clients that are not browsers
  (scripts, the ``openai`` library) send neither header.

The CSRF token that cookie sessions must send, and the JSON content-type rule, are checked by
the route guards in :mod:`homeagent_core.builtin.webui.common`.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["SAFE_METHODS", "RequestGuard", "parse_allowed_hosts", "split_host"]

#: Methods that must not change state; everything else is checked for its Origin.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def split_host(value: str) -> tuple[str, int | None]:
    """``"Example.COM:8080"`` → ``("example.com", 8080)``; ``"[::1]"`` → ``("::1", None)``.

    A malformed port gives ``("", None)`` so that the caller refuses it.
    """
    value = value.strip().lower()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            return "", None
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
    else:
        host, port = value, ""  # a bare IPv6 address or a name without a port
    if port and not (port.isdigit() and int(port) <= 65535):
        return "", None
    return host.rstrip("."), int(port) if port else None


def parse_allowed_hosts(text: str) -> frozenset[str]:
    """``plugin.webui.allowed_hosts`` (comma-separated host names) → lower-case names.

    Raises:
        ValueError: an entry is not a plain host name (it carries a scheme, a path or a port).
    """
    names = set()
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        host, port = split_host(item)
        if not host or port is not None or "/" in item or "@" in item:
            raise ValueError(
                f"allowed_hosts: {item!r} is not a host name; write names only, e.g. agent.example.com,homeagent.lan"
            )
        names.add(host)
    return frozenset(names)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _machine_names() -> set[str]:
    name = socket.gethostname().lower().rstrip(".")
    return {name, f"{name}.local"} if name else set()


class RequestGuard:
    """ASGI middleware refusing a foreign ``Host`` and a cross-site ``Origin``."""

    def __init__(self, app: ASGIApp, *, bound_host: str = "", allowed_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.extra = frozenset(h.lower() for h in allowed_hosts)
        self.allowed = {"localhost", *_machine_names(), *self.extra}
        bound = split_host(bound_host)[0] if bound_host else ""
        if bound and bound not in ("0.0.0.0", "::"):
            self.allowed.add(bound)

    def host_allowed(self, host: str) -> bool:
        """Whether a ``Host`` name (no port) may be served."""
        return bool(host) and (host in self.allowed or host.endswith(".localhost") or _is_ip(host))

    def origin_refusal(
        self, method: str, headers: dict[str, str], host: tuple[str, int | None], scheme: str = "http"
    ) -> str | None:
        """Why a state-changing request is cross-site, or None when it is not.

        ``scheme`` is the request's own (``http`` unless TLS or a trusted proxy says ``https``);
        a page from ``https://127.0.0.1:P`` is another origin than ``http://127.0.0.1:P``.
        """
        if method in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is None:
            site = headers.get("sec-fetch-site", "")
            if site in ("cross-site", "same-site"):
                return f"cross-site request refused (Sec-Fetch-Site: {site})"
            return None
        parts = urlsplit(origin.strip().lower())
        malformed = (
            origin.strip().lower() == "null"
            or parts.scheme not in _DEFAULT_PORTS
            or not parts.hostname
            or "@" in parts.netloc  # an origin never carries user info
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
        )
        if malformed:
            return f"cross-site request refused: Origin {origin!r} is not this server"
        try:
            origin_port = parts.port or _DEFAULT_PORTS[parts.scheme]
        except ValueError:
            return f"cross-site request refused: Origin {origin!r} is not this server"
        own_scheme = scheme if scheme in _DEFAULT_PORTS else "http"
        same = (
            parts.scheme == own_scheme
            and parts.hostname == host[0]
            and origin_port == (host[1] or _DEFAULT_PORTS[own_scheme])
        )
        if same or parts.hostname in self.extra:
            return None
        return (
            f"cross-site request refused: Origin {origin!r} is not this server; a browser page may only change "
            "state from the web UI itself (add a reverse proxy's public name to plugin.webui.allowed_hosts)"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        websocket = scope["type"] == "websocket"
        refuse = _refuse_websocket if websocket else _refuse
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host = split_host(headers.get("host", ""))
        if not self.host_allowed(host[0]):
            shown = headers.get("host", "")
            await refuse(receive, send, 421, (
                f"Host {shown!r} is not served here (DNS rebinding protection); open the web UI by its address or "
                "localhost, or add the name to plugin.webui.allowed_hosts"
            ) if shown else "a Host header is required")
            return
        # A WebSocket handshake is a GET, but what it opens changes state: its Origin is always checked.
        method = "WEBSOCKET" if websocket else scope["method"]
        scheme = {"ws": "http", "wss": "https"}.get(str(scope.get("scheme")), str(scope.get("scheme") or "http"))
        refusal = self.origin_refusal(method, headers, host, scheme)
        if refusal is not None:
            await refuse(receive, send, 403, refusal)
            return
        await self.app(scope, receive, send)


async def _refuse_websocket(receive: Receive, send: Send, status: int, message: str) -> None:
    """Refuse a WebSocket handshake with an HTTP answer (the ASGI denial-response extension)."""
    await receive()  # websocket.connect
    body = orjson.dumps({"error": message})
    await send({"type": "websocket.http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "websocket.http.response.body", "body": body})


async def _refuse(_receive: Receive, send: Send, status: int, message: str) -> None:
    body = orjson.dumps({"error": message})
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"x-content-type-options", b"nosniff"),
    ]
    start: dict[str, Any] = {"type": "http.response.start", "status": status, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": body})
