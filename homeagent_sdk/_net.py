"""Listening sockets for the embedded HTTP servers (the web UI, the fake model server)."""

from __future__ import annotations

import socket

__all__ = ["listen_tcp"]


def listen_tcp(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A non-blocking TCP socket listening on ``host:port`` (``port`` 0: any free port).

    Hand it to ``uvicorn.Server.serve(sockets=[...])``. ``IPPROTO_TCP`` because asyncio turns
    Nagle off (``TCP_NODELAY``) only on sockets that say they are TCP: with proto 0 every
    response body waited ~40 ms for the client's delayed ACK. ``SO_REUSEADDR`` so a restart
    can bind a port whose old connections are still in TIME_WAIT.

    Raises:
        OSError: the address cannot be bound (the socket is closed first).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
