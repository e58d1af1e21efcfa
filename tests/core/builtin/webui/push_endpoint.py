"""A loopback Web Push service for tests: it keeps what it receives, decrypts it and checks the VAPID JWT.

The test holds the subscription's keys (a P-256 key pair and a 16-byte auth secret), as a
browser would; :meth:`Received.decrypt` undoes RFC 8291 (aes128gcm) with them and
:func:`check_vapid` verifies the RFC 8292 ``Authorization: vapid t=..., k=...`` header (ES256
over the JWT, audience = the endpoint's origin, expiry within 24 hours).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

__all__ = ["Device", "PushService", "Received", "check_vapid", "push_service"]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Device:
    """A browser's side of one subscription: its keys and endpoint."""

    endpoint: str
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    def subscription(self) -> dict[str, Any]:
        """What ``PushSubscription.toJSON()`` gives."""
        public = self.key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return {"endpoint": self.endpoint, "expirationTime": None,
                "keys": {"p256dh": b64url(public), "auth": b64url(self.auth)}}


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def decrypt(self, device: Device) -> Any:
        assert self.headers.get("content-encoding") == "aes128gcm", self.headers
        plain = http_ece.decrypt(self.body, private_key=device.key, auth_secret=device.auth, version="aes128gcm")
        return json.loads(plain)


def check_vapid(headers: dict[str, str], endpoint: str, server_key: str) -> dict[str, Any]:
    """Verify the VAPID header of a push to ``endpoint`` signed by ``server_key``; returns the claims."""
    scheme, _, params = headers["authorization"].partition(" ")
    assert scheme == "vapid", headers["authorization"]
    fields = dict(part.strip().split("=", 1) for part in params.split(","))
    assert fields["k"] == server_key
    token = fields["t"]
    head, payload, signature = token.split(".")
    assert json.loads(unb64url(head)) == {"typ": "JWT", "alg": "ES256"}
    raw = unb64url(signature)
    assert len(raw) == 64
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(server_key))
    public.verify(der, f"{head}.{payload}".encode(), ec.ECDSA(hashes.SHA256()))  # raises when forged
    claims: dict[str, Any] = json.loads(unb64url(payload))
    origin = endpoint.split("/", 3)
    assert claims["aud"] == f"{origin[0]}//{origin[2]}"
    assert time.time() < claims["exp"] <= time.time() + 24 * 3600
    assert claims["sub"].startswith(("mailto:", "https://"))
    return claims


class PushService:
    """What the loopback push service received; ``status[path]`` sets its answer (``"hang"`` never answers)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.received: list[Received] = []
        self.status: dict[str, int | str] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def endpoint(self, name: str) -> str:
        return f"{self.base}/push/{name}"

    async def wait(self, count: int, timeout: float = 15.0) -> list[Received]:
        """Wait (bounded, without blocking the event loop the daemon runs on) for ``count`` pushes."""
        async with asyncio.timeout(timeout):
            while len(self.received) < count:
                await asyncio.sleep(0.02)
        return list(self.received)


@contextlib.contextmanager
def push_service() -> Iterator[PushService]:
    service: PushService

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            answer = service.status.get(self.path, 201)
            with service.lock:
                service.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if answer == "hang":
                service.stop.wait(60)
                return
            self.send_response(int(answer))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    service = PushService(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        service.stop.set()
        server.shutdown()
        server.server_close()
