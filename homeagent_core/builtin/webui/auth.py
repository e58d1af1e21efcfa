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
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from homeagent_sdk._atomic import atomic_write

__all__ = ["Credentials", "LoginLimiter", "Sessions", "client_ip", "parse_proxies", "request_scheme"]

SESSION_COOKIE = "homeagent_session"
#: The header a cookie session must echo its CSRF token in on state-changing requests.
CSRF_HEADER = "x-csrf-token"


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
        atomic_write(path, json.dumps(self.__dict__))

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
    """Login sessions: random tokens with an expiry and a CSRF token each.

    With a ``path`` they are also kept on disk (``sessions.json``, mode 0600), so a daemon
    restart does not log every browser out. Only a hash of each token is stored: the file
    alone does not let anyone log in. Expired sessions are dropped, from memory and the file,
    whenever a session is made, so logins over months do not pile up.
    """

    ttl_s: float = 24 * 3600
    path: Path | None = None
    clock: Callable[[], float] = time.time
    _tokens: dict[str, tuple[float, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.path is not None:
            self._tokens = _load_sessions(self.path, self.clock())

    def __len__(self) -> int:
        """Sessions held (live ones, and expired ones not yet dropped)."""
        return len(self._tokens)

    def create(self) -> str:
        token = secrets.token_hex(32)
        now = self.clock()
        self._tokens = {key: entry for key, entry in self._tokens.items() if entry[0] >= now}
        self._tokens[_sha256(token)] = (now + self.ttl_s, secrets.token_urlsafe(32))
        self._save()
        return token

    def valid(self, token: str | None) -> bool:
        return self.csrf_token(token) is not None

    def csrf_token(self, token: str | None) -> str | None:
        """The CSRF token of a live session (None when the session is unknown or expired).

        Cookie-authenticated requests that change state must echo it in ``X-CSRF-Token``; a
        page on another origin cannot read it, so it cannot forge such a request.
        """
        if not token:
            return None
        key = _sha256(token)
        entry = self._tokens.get(key)
        if entry is None:
            return None
        if entry[0] < self.clock():
            del self._tokens[key]
            self._save()
            return None
        return entry[1]

    def drop(self, token: str | None) -> None:
        if token and self._tokens.pop(_sha256(token), None) is not None:
            self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        now = self.clock()
        live = {k: list(v) for k, v in self._tokens.items() if v[0] >= now}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(live))


def _load_sessions(path: Path, now: float) -> dict[str, tuple[float, str]]:
    """The live sessions stored at ``path``; an unreadable file means none (everyone logs in again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}
    out: dict[str, tuple[float, str]] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            if (isinstance(value, list) and len(value) == 2 and isinstance(value[0], int | float)
                    and isinstance(value[1], str) and value[0] >= now):
                out[str(key)] = (float(value[0]), value[1])
    return out


@dataclass
class LoginLimiter:
    """Per-source login backoff: ``free`` failures, then waits that double up to ``max_wait_s``.

    A source is an IPv4 address or an IPv6 /64 (one host usually owns a whole /64). After
    ``free`` failed logins a source waits ``base_wait_s`` before its next try, and each further
    failure doubles the wait up to ``max_wait_s``: a password guesser is slowed to a few tries an
    hour while the owner, after mistyping, is never locked out for longer than ``max_wait_s``.
    A success, or ``forget_s`` without failures, clears the source. While a source waits every
    try is refused unchecked, the right password included. At most ``max_sources`` are tracked
    (the oldest are dropped first) so that many addresses cannot exhaust memory.
    """

    free: int = 5
    base_wait_s: float = 30.0
    max_wait_s: float = 900.0
    forget_s: float = 24 * 3600.0
    max_sources: int = 4096
    clock: Callable[[], float] = time.monotonic
    _state: OrderedDict[str, tuple[int, float, float]] = field(default_factory=OrderedDict)

    @staticmethod
    def key(source: str) -> str:
        """The bucket of an address: the address itself, or its /64 for IPv6."""
        try:
            addr = ipaddress.ip_address(source)
        except ValueError:
            return source
        if isinstance(addr, ipaddress.IPv6Address):
            if addr.ipv4_mapped is not None:
                return str(addr.ipv4_mapped)
            return str(ipaddress.ip_network(f"{addr}/64", strict=False))
        return str(addr)

    def _entry(self, key: str) -> tuple[int, float, float] | None:
        entry = self._state.get(key)
        if entry is not None and self.clock() - entry[2] > self.forget_s:
            del self._state[key]
            return None
        return entry

    def retry_after(self, source: str) -> int:
        """Seconds until ``source`` may try again (0 = now)."""
        entry = self._entry(self.key(source))
        if entry is None:
            return 0
        left = entry[1] - self.clock()
        return max(1, int(left + 0.999)) if left > 0 else 0

    def failed(self, source: str) -> float:
        """Count a failed login; returns the wait it now imposes on ``source`` (0 while still free)."""
        key, now = self.key(source), self.clock()
        count = (self._entry(key) or (0, 0.0, 0.0))[0] + 1
        # Past ~1,000 doublings the factor is no float: the wait stays at the cap from long before.
        doublings = min(count - self.free, 1000)
        wait = 0.0 if doublings < 0 else min(self.max_wait_s, self.base_wait_s * 2.0**doublings)
        self._state[key] = (count, now + wait, now)
        self._state.move_to_end(key)
        while len(self._state) > self.max_sources:
            self._state.popitem(last=False)
        return wait

    def succeeded(self, source: str) -> None:
        self._state.pop(self.key(source), None)


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


def _trusted(value: str, proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    try:
        addr = ipaddress.ip_address(value.strip().strip("[]"))
    except ValueError:
        return False
    return any(addr in net for net in proxies)


def client_ip(
    peer: str, headers: Mapping[str, str], proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> str:
    """The client's address: the socket peer, unless the peer is a trusted proxy.

    Behind trusted proxies ``X-Forwarded-For`` is read from the right: each proxy appends the
    address it received from, so the first entry that is not itself a trusted proxy is the
    client. Entries further left were written by the client and prove nothing.
    """
    if not _trusted(peer, proxies):
        return peer
    hops = [h.strip() for h in headers.get("x-forwarded-for", "").split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop
    if hops:
        return hops[0]
    return headers.get("x-real-ip", peer).strip() or peer


def request_scheme(
    scheme: str, peer: str, headers: Mapping[str, str], proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> str:
    """``https`` when the connection is TLS, or a trusted proxy says its client used TLS."""
    if _trusted(peer, proxies):
        forwarded = headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
        if forwarded in ("http", "https"):
            return forwarded
    return scheme
