"""Web UI authentication: bootstrap credentials, per-person logins, sessions, invites, rate limit.

On first start an admin password and an API key are generated, printed once, and only their
hashes are kept in ``<data>/plugin_data/webui/credentials.json`` (mode 0600). The admin login
is the owner's. An API key given before the first start (setting ``plugin.webui.api_key`` or
``HOMEAGENT_WEBUI_API_KEY``) is used instead, for scripted deployments.

Every other person of the registry (``homeagent people``) logs in with their own name and
password, kept hashed the same way in ``<data>/plugin_data/webui/logins.db`` (SQLite, mode
0600) next to one-time invite links (``homeagent people invite NAME``). A login, an invite and
a session are bound to the person's registry entry (name and creation time): when the person
is removed, all three stop working at once, even if someone of the same name is added later.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from homeagent_sdk._atomic import atomic_write
from homeagent_sdk._schema import StoreSchema, open_schema, script_step, version_one_if
from homeagent_sdk.errors import DataFormatError

__all__ = [
    "INVITE_TTL_S",
    "LOGINS_DB",
    "LOGINS_SCHEMA",
    "MIN_PASSWORD",
    "Credentials",
    "InviteError",
    "LoginLimiter",
    "Logins",
    "Sessions",
    "check_new_password",
    "client_ip",
    "parse_proxies",
    "request_scheme",
]

SESSION_COOKIE = "homeagent_session"
#: The header a cookie session must echo its CSRF token in on state-changing requests.
CSRF_HEADER = "x-csrf-token"
#: The per-person logins and invites, in the web UI's data directory.
LOGINS_DB = "logins.db"
#: How long an invite link works.
INVITE_TTL_S = 24 * 3600.0
#: The shortest password a person may choose.
MIN_PASSWORD = 8


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
    """Login sessions: random tokens with an expiry, a CSRF token and the person each.

    A session's person is ``("", 0.0)`` for the admin login (the owner), else the person's
    name and the creation time of their registry entry. With a ``path`` they are also kept on
    disk (``sessions.json``, mode 0600), so a daemon restart does not log every browser out.
    Only a hash of each token is stored: the file alone does not let anyone log in. Expired
    sessions are dropped, from memory and the file, whenever a session is made, so logins over
    months do not pile up.
    """

    ttl_s: float = 24 * 3600
    path: Path | None = None
    clock: Callable[[], float] = time.time
    _tokens: dict[str, tuple[float, str, str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.path is not None:
            self._tokens = _load_sessions(self.path, self.clock())

    def __len__(self) -> int:
        """Sessions held (live ones, and expired ones not yet dropped)."""
        return len(self._tokens)

    def create(self, person: str = "", since: float = 0.0) -> str:
        """A new session for ``person`` (``""``: the admin login) and its token."""
        token = secrets.token_hex(32)
        now = self.clock()
        self._tokens = {key: entry for key, entry in self._tokens.items() if entry[0] >= now}
        self._tokens[_sha256(token)] = (now + self.ttl_s, secrets.token_urlsafe(32), person, since)
        self._save()
        return token

    def valid(self, token: str | None) -> bool:
        return self.csrf_token(token) is not None

    def _entry(self, token: str | None) -> tuple[float, str, str, float] | None:
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
        return entry

    def csrf_token(self, token: str | None) -> str | None:
        """The CSRF token of a live session (None when the session is unknown or expired).

        Cookie-authenticated requests that change state must echo it in ``X-CSRF-Token``; a
        page on another origin cannot read it, so it cannot forge such a request.
        """
        entry = self._entry(token)
        return entry[1] if entry is not None else None

    def person_of(self, token: str | None) -> tuple[str, float] | None:
        """The person of a live session: ``(name, since)``, ``("", 0.0)`` for the admin login."""
        entry = self._entry(token)
        return (entry[2], entry[3]) if entry is not None else None

    def drop(self, token: str | None) -> None:
        if token and self._tokens.pop(_sha256(token), None) is not None:
            self._save()

    def drop_person(self, person: str, *, keep: str | None = None) -> int:
        """End every session of ``person`` (except the one of token ``keep``); returns how many."""
        kept = _sha256(keep) if keep else ""
        gone = [k for k, v in self._tokens.items() if v[2] == person and k != kept]
        for key in gone:
            del self._tokens[key]
        if gone:
            self._save()
        return len(gone)

    def count(self, person: str) -> int:
        """How many live sessions ``person`` has."""
        now = self.clock()
        return sum(1 for v in self._tokens.values() if v[2] == person and v[0] >= now)

    def _save(self) -> None:
        if self.path is None:
            return
        now = self.clock()
        live = {k: list(v) for k, v in self._tokens.items() if v[0] >= now}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(live))


def _load_sessions(path: Path, now: float) -> dict[str, tuple[float, str, str, float]]:
    """The live sessions stored at ``path``; an unreadable file means none (everyone logs in again).

    Entries written before sessions carried a person (``[expiry, csrf]``) are the admin login's.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}
    out: dict[str, tuple[float, str, str, float]] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            if not (isinstance(value, list) and len(value) in (2, 4)):
                continue
            expiry, csrf, person, since = (*value, "", 0.0) if len(value) == 2 else value
            if (isinstance(expiry, int | float) and isinstance(csrf, str) and isinstance(person, str)
                    and isinstance(since, int | float) and expiry >= now):
                out[str(key)] = (float(expiry), csrf, person, float(since))
    return out


class InviteError(ValueError):
    """An invite link that cannot be used (unknown, used already, expired)."""


def check_new_password(password: object) -> str:
    """``password`` when it may be used as a login password.

    Raises:
        ValueError: not text, too short, or only spaces.
    """
    if not isinstance(password, str) or len(password.strip()) < MIN_PASSWORD:
        raise ValueError(f"a password needs at least {MIN_PASSWORD} characters (not counting spaces at the ends)")
    if len(password) > 1024:
        raise ValueError("a password may have at most 1024 characters")
    return password


_LOGINS_SCHEMA = """
CREATE TABLE IF NOT EXISTS passwords (
    person TEXT PRIMARY KEY,
    since REAL NOT NULL,
    salt TEXT NOT NULL,
    hash TEXT NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS invites (
    hash TEXT PRIMARY KEY,
    person TEXT NOT NULL,
    since REAL NOT NULL,
    expires REAL NOT NULL,
    used REAL
);
"""
LOGINS_SCHEMA = StoreSchema("logins.db", [script_step(_LOGINS_SCHEMA)], legacy=version_one_if("passwords"))
"""The schema of ``logins.db``: one step per version (never edit a shipped one)."""


class Logins:
    """Per-person web passwords and one-time invite links (``logins.db``).

    A person is named by ``(name, since)``: ``since`` is the creation time of their registry
    entry, so a password or invite of a removed person never opens the account of a new person
    who took the same name. Safe to share between the daemon and ``homeagent people invite``.
    """

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        try:
            open_schema(self._conn, self.path, LOGINS_SCHEMA)
        except DataFormatError:
            self._conn.close()
            raise
        os.chmod(self.path, 0o600)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _exec(self, sql: str, args: tuple[object, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._conn.execute(sql, args)

    def set_password(self, person: str, since: float, password: str) -> None:
        """Set ``person``'s password (checked with :func:`check_new_password`)."""
        check_new_password(password)
        salt = secrets.token_bytes(16)
        self._exec(
            "INSERT INTO passwords (person, since, salt, hash, updated) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (person) DO UPDATE SET since = excluded.since, salt = excluded.salt,"
            " hash = excluded.hash, updated = excluded.updated",
            (person, since, salt.hex(), _scrypt(password, salt), self._clock()),
        )

    def check(self, person: str, since: float, password: str) -> bool:
        """Whether ``password`` is ``person``'s (always hashes, so timing tells nothing)."""
        row = self._exec("SELECT since, salt, hash FROM passwords WHERE person = ?", (person,)).fetchone()
        salt, stored = (bytes.fromhex(row[1]), row[2]) if row else (b"\0" * 16, "")
        ok = hmac.compare_digest(_scrypt(password, salt), stored)
        return ok and row is not None and row[0] == since

    def has_password(self, person: str, since: float) -> bool:
        row = self._exec("SELECT since FROM passwords WHERE person = ?", (person,)).fetchone()
        return row is not None and row[0] == since

    def forget(self, person: str) -> None:
        """Drop ``person``'s password and open invites (the person was removed)."""
        self._exec("DELETE FROM passwords WHERE person = ?", (person,))
        self._exec("DELETE FROM invites WHERE person = ?", (person,))

    def invite(self, person: str, since: float, ttl_s: float = INVITE_TTL_S) -> tuple[str, float]:
        """A one-time invite token for ``person`` and when it expires; only its hash is kept."""
        token = secrets.token_urlsafe(32)
        expires = self._clock() + ttl_s
        self._exec(
            "INSERT INTO invites (hash, person, since, expires) VALUES (?, ?, ?, ?)",
            (_sha256(token), person, since, expires),
        )
        return token, expires

    def invite_person(self, token: str) -> tuple[str, float]:
        """The person ``(name, since)`` an unused, unexpired invite is for.

        Raises:
            InviteError: unknown, used or expired.
        """
        row = self._exec(
            "SELECT person, since, expires, used FROM invites WHERE hash = ?", (_sha256(str(token)),)
        ).fetchone()
        if row is None:
            raise InviteError("this invite link is not valid; ask the owner for a new one")
        if row[3] is not None:
            raise InviteError("this invite link was used already; log in with the password set then, "
                              "or ask the owner for a new link")
        if row[2] < self._clock():
            raise InviteError("this invite link has expired; ask the owner for a new one "
                              "(`homeagent people invite NAME` or the People page)")
        return str(row[0]), float(row[1])

    def accept(self, token: str, password: str) -> tuple[str, float]:
        """Use an invite: set the person's password; returns the person ``(name, since)``.

        The invite is marked used in the same statement that checks it, so two tries at once
        cannot both succeed.

        Raises:
            InviteError: unknown, used or expired.
            ValueError: the password is not acceptable (the invite stays usable).
        """
        person, since = self.invite_person(token)
        check_new_password(password)
        now = self._clock()
        cur = self._exec(
            "UPDATE invites SET used = ? WHERE hash = ? AND used IS NULL AND expires >= ?",
            (now, _sha256(str(token)), now),
        )
        if cur.rowcount != 1:
            self.invite_person(token)  # raises with the reason
            raise InviteError("this invite link was used already")
        self.set_password(person, since, password)
        return person, since


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
