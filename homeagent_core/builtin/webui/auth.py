"""Web UI authentication: bootstrap credentials, sessions, API keys, login rate limit.

On first start an admin password and an API key are generated, printed once, and only their
hashes are kept in ``<data>/plugin_data/webui/credentials.json`` (mode 0600). An API key given
before the first start (setting ``plugin.webui.api_key`` or ``HOMEAGENT_WEBUI_API_KEY``) is
used instead, for scripted deployments.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Credentials", "LoginLimiter", "Sessions", "client_ip", "parse_proxies"]

SESSION_COOKIE = "homeagent_session"


def _scrypt(password: str, salt: bytes) -> str:
    return hashlib.scrypt(password.encode(), salt=salt, n=2**14, r=8, p=1).hex()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Credentials:
    """The admin login and the API key, stored hashed."""

    username: str
    password_hash: str
    salt: str
    api_key_hash: str

    @classmethod
    def load_or_create(
        cls, path: Path, *, username: str = "admin", preset_api_key: str = ""
    ) -> tuple[Credentials, dict[str, str]]:
        """Load the stored credentials, or create them; returns them and any new secrets.

        The second value holds the plaintext of what was generated now (to print once), and is
        empty on later starts.
        """
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(**data), {}
        password = secrets.token_hex(12)
        api_key = preset_api_key or secrets.token_hex(16)
        salt = secrets.token_bytes(16)
        creds = cls(username, _scrypt(password, salt), salt.hex(), _sha256(api_key))
        creds.save(path)
        new = {"username": username, "password": password}
        if not preset_api_key:
            new["api_key"] = api_key
        return creds, new

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(self.__dict__, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def check_password(self, username: str, password: str) -> bool:
        ok_user = hmac.compare_digest(username.encode(), self.username.encode())
        ok_pass = hmac.compare_digest(_scrypt(password, bytes.fromhex(self.salt)), self.password_hash)
        return ok_user and ok_pass

    def check_api_key(self, key: str) -> bool:
        return bool(key) and hmac.compare_digest(_sha256(key), self.api_key_hash)

    def set_password(self, password: str, path: Path) -> None:
        salt = secrets.token_bytes(16)
        self.salt, self.password_hash = salt.hex(), _scrypt(password, salt)
        self.save(path)


@dataclass
class Sessions:
    """Login sessions: random tokens with an expiry (kept in memory)."""

    ttl_s: float = 24 * 3600
    _tokens: dict[str, float] = field(default_factory=dict)

    def create(self) -> str:
        token = secrets.token_hex(32)
        self._tokens[token] = time.time() + self.ttl_s
        return token

    def valid(self, token: str | None) -> bool:
        if not token:
            return False
        expiry = self._tokens.get(token)
        if expiry is None:
            return False
        if expiry < time.time():
            del self._tokens[token]
            return False
        return True

    def drop(self, token: str | None) -> None:
        if token:
            self._tokens.pop(token, None)


@dataclass
class LoginLimiter:
    """At most ``limit`` failed logins per source within ``window_s``."""

    limit: int = 5
    window_s: float = 600.0
    _failures: dict[str, deque[float]] = field(default_factory=dict)

    def retry_after(self, source: str) -> int:
        """Seconds until ``source`` may try again (0 = now)."""
        now = time.time()
        failures = self._failures.get(source)
        if not failures:
            return 0
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        if len(failures) < self.limit:
            return 0
        return max(1, int(failures[0] + self.window_s - now) + 1)

    def failed(self, source: str) -> None:
        self._failures.setdefault(source, deque()).append(time.time())

    def succeeded(self, source: str) -> None:
        self._failures.pop(source, None)


def parse_proxies(text: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Parse ``trusted_proxies`` (comma-separated IPs or CIDRs).

    Raises:
        ValueError: an entry is not an IP address or network.
    """
    nets = []
    for item in (t.strip() for t in text.split(",")):
        if item:
            try:
                nets.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"trusted_proxies: {item!r} is not an IP address or CIDR network") from None
    return nets


def client_ip(
    peer: str, headers: dict[str, str], proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> str:
    """The client's address: the peer, unless the peer is a trusted proxy (then X-Forwarded-For)."""
    try:
        addr = ipaddress.ip_address(peer)
    except ValueError:
        return peer
    if not any(addr in net for net in proxies):
        return peer
    forwarded = headers.get("x-forwarded-for", "")
    if forwarded:
        return forwarded.split(",")[0].strip()
    return headers.get("x-real-ip", peer).strip() or peer
