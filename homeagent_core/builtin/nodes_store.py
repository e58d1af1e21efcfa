"""The home's record of its nodes: pairing codes, device tokens, what each node offered and when.

``<data>/plugin_data/nodes/nodes.db`` (SQLite, WAL). Codes and tokens are stored only as their
SHA-256: a copy of the file lets nobody pose as a node. ``homeagent nodes pair|list|revoke``
open it directly (so pairing works whether the daemon runs or not); the running daemon reads a
token's row on every connection and on every keepalive, so a revoked token stops working at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from homeagent_sdk._schema import StoreSchema, open_schema, script_step, version_one_if
from homeagent_sdk.errors import HomeAgentError
from homeagent_sdk.node import NODE_NAME_RE

__all__ = ["CODE_TTL_S", "DB_NAME", "NODES_SCHEMA", "PLUGIN_NAME", "NodeRow", "NodeStore", "NodesError"]

PLUGIN_NAME = "nodes"
DB_NAME = "nodes.db"
#: How long a pairing code may be redeemed.
CODE_TTL_S = 600.0
_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    name TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    last_seen REAL,
    online INTEGER NOT NULL DEFAULT 0,
    capabilities TEXT NOT NULL DEFAULT '[]',
    platform TEXT NOT NULL DEFAULT '{}',
    problem TEXT NOT NULL DEFAULT '',
    problem_at REAL
);
CREATE TABLE IF NOT EXISTS codes (
    code_hash TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    expires REAL NOT NULL
);
"""


NODES_SCHEMA = StoreSchema("nodes.db", [script_step(_SCHEMA)], legacy=version_one_if("nodes"))
"""The schema of ``nodes.db``: one step per version (never edit a shipped one)."""


class NodesError(HomeAgentError):
    """A pairing, join or revoke that cannot be done (the message says why and what to do)."""


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass
class NodeRow:
    """One paired node as ``homeagent nodes list --json`` shows it."""

    name: str
    online: bool
    last_seen: float | None
    capabilities: list[str]
    created: float
    platform: dict[str, Any] = field(default_factory=dict)
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "online": self.online, "last_seen": self.last_seen,
                "capabilities": self.capabilities, "created": self.created, "platform": self.platform,
                "problem": self.problem}


def check_name(name: str) -> str:
    """``name`` lower-cased, or NodesError saying what a node name may be."""
    clean = name.strip().lower()
    if not NODE_NAME_RE.match(clean):
        raise NodesError(
            f"{name!r} is not a valid node name: use 1-24 of a-z, 0-9 and '-', starting with a letter or digit "
            "(it becomes part of tool names, e.g. node_lap_status)"
        )
    return clean


class NodeStore:
    """The nodes table of one data directory; thread-safe (one connection, one lock)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=10)
        self._db.execute("PRAGMA journal_mode=WAL")
        open_schema(self._db, path, NODES_SCHEMA)
        path.chmod(0o600)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ pairing

    def pair(self, name: str, *, now: float | None = None) -> tuple[str, float]:
        """A new one-time code for ``name`` and when it expires (an earlier code for it is replaced).

        Raises:
            NodesError: invalid name, or a node of that name is already paired.
        """
        name = check_name(name)
        now = time.time() if now is None else now
        code = "".join(secrets.choice(_ALPHABET) for _ in range(8))
        code = f"{code[:4]}-{code[4:]}"
        with self._lock:
            if self._db.execute("SELECT 1 FROM nodes WHERE name = ?", (name,)).fetchone():
                raise NodesError(
                    f"a node named {name!r} is already paired; choose another name, or revoke it first "
                    f"(`homeagent nodes revoke {name}`)"
                )
            self._db.execute("DELETE FROM codes WHERE name = ? OR expires < ?", (name, now))
            self._db.execute("INSERT INTO codes VALUES (?, ?, ?)", (_hash(code), name, now + CODE_TTL_S))
        return code, now + CODE_TTL_S

    def redeem(self, code: str, *, now: float | None = None) -> tuple[str, str]:
        """``(name, device token)`` for a valid code; the code is used up.

        Raises:
            NodesError: unknown, used or expired code, or the name was paired meanwhile.
        """
        now = time.time() if now is None else now
        wanted = _hash(code.strip().upper())
        token = "hn_" + secrets.token_urlsafe(32)
        with self._lock:
            row = self._db.execute("SELECT name, expires FROM codes WHERE code_hash = ?", (wanted,)).fetchone()
            if row is None:
                raise NodesError("unknown or already used pairing code; get a new one with `homeagent nodes pair NAME`")
            self._db.execute("DELETE FROM codes WHERE code_hash = ?", (wanted,))
            name, expires = str(row[0]), float(row[1])
            if expires < now:
                raise NodesError("this pairing code has expired (codes last 10 minutes); get a new one")
            try:
                self._db.execute("INSERT INTO nodes (name, token_hash, created) VALUES (?, ?, ?)",
                                 (name, _hash(token), now))
            except sqlite3.IntegrityError:
                raise NodesError(
                    f"a node named {name!r} was paired meanwhile; revoke it or pair another name"
                ) from None
        return name, token

    def authenticate(self, token: str, *, max_age_s: float = 0.0, now: float | None = None) -> tuple[str | None, str]:
        """``(name, "")`` of the node whose token this is, or ``(None, why)``: unknown, revoked or expired.

        ``max_age_s`` > 0: a token older than that (since its pairing) has expired.
        """
        if not token:
            return None, "no device token: send Authorization: Bearer <token>"
        digest = _hash(token)
        with self._lock:
            row = self._db.execute(
                "SELECT name, token_hash, created FROM nodes WHERE token_hash = ?", (digest,)
            ).fetchone()
        if row is None or not hmac.compare_digest(str(row[1]), digest):
            return None, "this device token is revoked or unknown; pair the node again (homeagent nodes pair NAME)"
        now = time.time() if now is None else now
        if max_age_s > 0 and now - float(row[2]) > max_age_s:
            return None, (f"this device token has expired (plugin.nodes.token_days); revoke and pair node {row[0]} "
                          "again (homeagent nodes revoke, homeagent nodes pair)")
        return str(row[0]), ""

    def revoke(self, name: str) -> bool:
        """Forget node ``name`` and its token (and any pending code for it); False when unknown."""
        name = name.strip().lower()
        with self._lock:
            gone = self._db.execute("DELETE FROM nodes WHERE name = ?", (name,)).rowcount
            codes = self._db.execute("DELETE FROM codes WHERE name = ?", (name,)).rowcount
        return bool(gone or codes)

    # ------------------------------------------------------------------ state

    def set_online(self, name: str, capabilities: list[str], platform: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE nodes SET online = 1, last_seen = ?, capabilities = ?, platform = ? WHERE name = ?",
                (time.time(), json.dumps(capabilities), json.dumps(platform)[:4000], name),
            )

    def set_offline(self, name: str) -> None:
        with self._lock:
            self._db.execute("UPDATE nodes SET online = 0, last_seen = ? WHERE name = ?", (time.time(), name))

    def seen(self, name: str, *, max_age_s: float = 0.0) -> bool:
        """Note the node is alive; False when it is no longer paired (revoked) or its token expired."""
        now = time.time()
        with self._lock:
            row = self._db.execute("SELECT created FROM nodes WHERE name = ?", (name,)).fetchone()
            if row is None or (max_age_s > 0 and now - float(row[0]) > max_age_s):
                return False
            self._db.execute("UPDATE nodes SET last_seen = ? WHERE name = ?", (now, name))
        return True

    def mark_problem(self, name: str, problem: str) -> None:
        with self._lock:
            self._db.execute("UPDATE nodes SET problem = ?, problem_at = ? WHERE name = ?",
                             (problem[:500], time.time(), name))

    def all_offline(self) -> None:
        """At daemon start: no node is connected yet."""
        with self._lock:
            self._db.execute("UPDATE nodes SET online = 0 WHERE online = 1")

    def list(self) -> list[NodeRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT name, online, last_seen, capabilities, created, platform, problem FROM nodes ORDER BY name"
            ).fetchall()
        return [NodeRow(str(r[0]), bool(r[1]), r[2], json.loads(r[3]), float(r[4]), json.loads(r[5]), str(r[6]))
                for r in rows]
