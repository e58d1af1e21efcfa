"""Connection caps of the web UI's HTTP server: per client address, in total, and for idle sockets.

uvicorn accepts every connection it is offered and keeps a socket that never sends a request
open for good, so a local program could hold thousands of event streams or idle sockets (and
as many file descriptors). :func:`capped_protocol` builds uvicorn's h11 protocol with three
limits:

* at most ``max_total`` connections at once, and at most ``max_per_address`` from one client
  address; a connection over either limit is answered **503** with ``Retry-After`` and a JSON
  ``error`` saying which limit, then closed (one warning a minute in the log, not one per
  connection);
* a connection that sends no request within ``idle_timeout`` seconds is closed (after a
  response, uvicorn's own keep-alive timeout applies).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import asyncio

__all__ = ["capped_protocol"]

log = logging.getLogger("homeagent.webui")

#: Seconds a refused connection may take to send its request before it is closed unanswered.
_REFUSED_GRACE = 2.0
#: Seconds after which the client is told to try again.
_RETRY_AFTER = 5


def _refusal_response(message: str) -> bytes:
    body = orjson.dumps({"error": message, "retry_after": _RETRY_AFTER})
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        f"retry-after: {_RETRY_AFTER}\r\n"
        "x-content-type-options: nosniff\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


def _address(connection: Any) -> str:
    client = getattr(connection, "client", None)
    return str(client[0]) if client else ""


def capped_protocol(*, max_total: int, max_per_address: int, idle_timeout: float) -> type[Any]:
    """uvicorn's h11 protocol class with the caps of the module docstring (pass as ``Config(http=...)``)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    logged = [float("-inf")]

    class CappedH11Protocol(H11Protocol):
        refusal = ""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            address = self.client[0] if self.client else ""
            live = [c for c in self.connections if c is not self and not getattr(c, "refusal", "")]
            if len(live) >= max_total:
                self.refusal = (
                    f"the web UI has {len(live)} connections open, the most it keeps "
                    "(plugin.webui.max_connections); close some tabs or clients and retry"
                )
            elif address and sum(1 for c in live if _address(c) == address) >= max_per_address:
                self.refusal = (
                    f"too many connections from {address}: {max_per_address} are open, the most one address "
                    "may have (plugin.webui.max_connections_per_address); close some tabs or clients and retry"
                )
            if self.refusal:
                now = time.monotonic()
                if now - logged[0] >= 60.0:
                    logged[0] = now
                    log.warning("web UI connection refused: %s", self.refusal)
                self.timeout_keep_alive_task = self.loop.call_later(_REFUSED_GRACE, self._refuse)
                return
            self.timeout_keep_alive_task = self.loop.call_later(idle_timeout, self.timeout_keep_alive_handler)

        def data_received(self, data: bytes) -> None:
            if self.refusal:
                self._refuse()
                return
            super().data_received(data)

        def _refuse(self) -> None:
            self._unset_keepalive_if_required()
            if not self.transport.is_closing():
                self.transport.write(_refusal_response(self.refusal))
                self.transport.close()

    return CappedH11Protocol
