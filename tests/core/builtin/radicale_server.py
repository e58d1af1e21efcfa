"""A real Radicale CalDAV server on loopback (htpasswd login), and two broken servers.

``radicale`` runs as a subprocess (``python -m radicale``) with its own storage folder and
an htpasswd file; :func:`start_radicale` waits (bounded) until it answers. The broken servers
answer every request with HTTP 500, or accept the connection and never answer.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["Radicale", "failing_server", "silent_server", "start_radicale"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Radicale:
    url: str
    user: str
    password: str
    process: subprocess.Popen[bytes]

    def calendar_url(self, name: str) -> str:
        return f"{self.url}/{self.user}/{name}/"


@contextlib.contextmanager
def start_radicale(root: Path, user: str = "alice", password: str = "s3cret-pw") -> Iterator[Radicale]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "users").write_text(f"{user}:{password}\n", encoding="utf-8")
    port = free_port()
    config = root / "config"
    config.write_text(
        f"[server]\nhosts = 127.0.0.1:{port}\n"
        f"[auth]\ntype = htpasswd\nhtpasswd_filename = {root / 'users'}\nhtpasswd_encryption = plain\n"
        f"[storage]\nfilesystem_folder = {root / 'collections'}\n"
        "[rights]\ntype = owner_only\n[logging]\nlevel = warning\n",
        encoding="utf-8",
    )
    log = (root / "radicale.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "radicale", "--config", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"radicale exited: {(root / 'radicale.log').read_text(errors='replace')}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("radicale did not start within 30 s")
            time.sleep(0.05)
        yield Radicale(f"http://127.0.0.1:{port}", user, password, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


class _Fail(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self.send_response(500)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"boom!")

    do_GET = do_PROPFIND = do_REPORT = do_PUT = do_DELETE = do_OPTIONS = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def failing_server() -> Iterator[str]:
    """A server answering HTTP 500 to everything; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fail)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A server that accepts connections and never answers; yields its base URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()
