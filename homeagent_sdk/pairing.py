"""Access policy of chat bridges: an allowlist plus pairing codes.

An unknown sender (or an unknown group that mentions the agent) gets a short code and
nothing else; the owner approves it with ``homeagent pairing approve CODE`` (or denies it).
Requests live in ``<plugin data dir>/pairing.db`` (SQLite, WAL), so the CLI can approve
while the daemon runs: every check reads the table, nothing is cached.

Statuses: ``pending`` (code issued), ``approved``, ``denied`` (ignored silently from then on).
Revoking an approved (or denied) sender forgets the row: their next message gets a new code.

Strangers cannot flood the owner (or the table): per platform at most ``max_pending`` codes
wait at once, at most ``new_per_minute`` new codes are issued a minute, and a code nobody
approved is forgotten after ``expire_after`` seconds (the sender may ask again). A sender over
a limit is ignored (no row, no code sent); the decision's ``reason`` says which limit.
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from homeagent_sdk._schema import StoreSchema, open_schema, script_step, version_one_if
from homeagent_sdk.errors import DataFormatError

__all__ = [
    "CODE_ALPHABET", "PAIRING_FILE", "PAIRING_SCHEMA", "AccessDecision", "PairingRequest", "PairingStore",
    "pairing_files",
]

#: The file name of the pairing table inside a bridge plugin's data directory.
PAIRING_FILE = "pairing.db"
#: Codes avoid look-alike characters (0/O, 1/I/L).
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
_CODE_LENGTH = 6

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pairing (
    platform   TEXT NOT NULL,
    account    TEXT NOT NULL,
    name       TEXT NOT NULL DEFAULT '',
    status     TEXT NOT NULL,
    code       TEXT NOT NULL,
    person     TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    notified_at REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (platform, account)
);
CREATE INDEX IF NOT EXISTS pairing_code ON pairing (code);
"""
PAIRING_SCHEMA = StoreSchema("pairing.db", [script_step(_SCHEMA)], legacy=version_one_if("pairing"))
"""The schema of a bridge's ``pairing.db``: one step per version (never edit a shipped one)."""


def pairing_files(plugin_data: Path) -> dict[str, Path]:
    """The pairing table of every bridge under ``<data>/plugin_data``, by plugin name (sorted)."""
    found = sorted(plugin_data.glob(f"*/{PAIRING_FILE}")) if plugin_data.is_dir() else []
    return {path.parent.name: path for path in found}


@dataclass(frozen=True, slots=True)
class PairingRequest:
    """One row: who asked, their code and where it stands."""

    platform: str
    account: str
    name: str
    status: str
    code: str
    person: str
    created_at: float
    updated_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "account": self.account,
            "name": self.name,
            "status": self.status,
            "code": self.code,
            "person": self.person,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True, slots=True)
class AccessDecision:
    """What to do with a message: ``allow``, ``pair`` (send ``code`` when ``notify``) or ``ignore``
    (``reason``: ``denied``, ``too many pending`` or ``rate limited``)."""

    action: str
    code: str = ""
    notify: bool = False
    person: str = ""
    reason: str = ""


class PairingStore:
    """The pairing table of one bridge.

    :param path: the SQLite file (``<plugin data dir>/pairing.db``).
    :param renotify: seconds before a pending sender who writes again is sent the code again.
    :param max_pending: most codes waiting for the owner at once, per platform.
    :param new_per_minute: most new codes issued in any 60 s, per platform.
    :param expire_after: seconds after which a pending code is forgotten.
    :param clock: wall clock (injectable for tests).
    """

    def __init__(
        self,
        path: Path | str,
        *,
        renotify: float = 600.0,
        max_pending: int = 50,
        new_per_minute: int = 10,
        expire_after: float = 86_400.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.renotify = renotify
        self.max_pending = max_pending
        self.new_per_minute = new_per_minute
        self.expire_after = expire_after
        self._clock = clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=10)
        self._db.execute("PRAGMA journal_mode=WAL")
        try:
            open_schema(self._db, self.path, PAIRING_SCHEMA)
        except DataFormatError:
            self._db.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _row(self, row: tuple[Any, ...] | None) -> PairingRequest | None:
        return PairingRequest(*row) if row else None

    _COLUMNS = "platform, account, name, status, code, person, created_at, updated_at"

    def get(self, platform: str, account: str) -> PairingRequest | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {self._COLUMNS} FROM pairing WHERE platform = ? AND account = ?", (platform, account)
            ).fetchone()
        return self._row(row)

    def list(self, status: str | None = None) -> list[PairingRequest]:
        """Every request (or those with ``status``), newest first."""
        sql = f"SELECT {self._COLUMNS} FROM pairing"
        args: tuple[Any, ...] = ()
        if status:
            sql += " WHERE status = ?"
            args = (status,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY updated_at DESC", args).fetchall()
        return [PairingRequest(*r) for r in rows]

    def _new_code(self) -> str:
        while True:
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(_CODE_LENGTH))
            if self._db.execute("SELECT 1 FROM pairing WHERE code = ?", (code,)).fetchone() is None:
                return code

    def check(self, platform: str, account: str, name: str = "", *, allowed: bool = False) -> AccessDecision:
        """Decide for a message from ``account``; issues a code to a new sender.

        ``allowed`` (the account is on the bridge's allowlist) lets it through without a row.
        A new sender over the platform's ``max_pending`` or ``new_per_minute`` is ignored.
        """
        now = self._clock()
        with self._lock:
            self._db.execute(
                "DELETE FROM pairing WHERE status = 'pending' AND created_at < ?", (now - self.expire_after,)
            )
            row = self._db.execute(
                "SELECT status, code, person, notified_at FROM pairing WHERE platform = ? AND account = ?",
                (platform, account),
            ).fetchone()
            if row is None:
                if allowed:
                    return AccessDecision("allow")
                pending, recent = self._db.execute(
                    "SELECT COALESCE(SUM(status = 'pending'), 0), COALESCE(SUM(created_at > ?), 0)"
                    " FROM pairing WHERE platform = ?",
                    (now - 60.0, platform),
                ).fetchone()
                if pending >= self.max_pending:
                    return AccessDecision("ignore", reason="too many pending")
                if recent >= self.new_per_minute:
                    return AccessDecision("ignore", reason="rate limited")
                code = self._new_code()
                self._db.execute(
                    "INSERT INTO pairing (platform, account, name, status, code, created_at, updated_at, notified_at)"
                    " VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)",
                    (platform, account, name, code, now, now, now),
                )
                return AccessDecision("pair", code=code, notify=True)
            status, code, person, notified_at = row
            if status == "approved" or (allowed and status != "denied"):
                return AccessDecision("allow", person=person)
            if status == "denied":
                return AccessDecision("ignore", reason="denied")
            notify = now - float(notified_at) >= self.renotify
            if notify:
                self._db.execute(
                    "UPDATE pairing SET notified_at = ?, name = ? WHERE platform = ? AND account = ?",
                    (now, name or "", platform, account),
                )
            return AccessDecision("pair", code=code, notify=notify)

    def _decide(self, code: str, status: str, person: str = "") -> PairingRequest:
        code = code.strip().upper()
        with self._lock:
            row = self._db.execute(f"SELECT {self._COLUMNS} FROM pairing WHERE code = ?", (code,)).fetchone()
            if row is None:
                raise KeyError(f"no pairing request with code {code!r}; `homeagent pairing list` shows the codes")
            self._db.execute(
                "UPDATE pairing SET status = ?, person = ?, updated_at = ? WHERE code = ?",
                (status, person, time.time(), code),
            )
        request = PairingRequest(*row)
        return PairingRequest(
            request.platform, request.account, request.name, status, code, person, request.created_at, time.time()
        )

    def approve(self, code: str, *, person: str = "") -> PairingRequest:
        """Approve the request with ``code``; ``person`` links the sender to that person.

        Raises:
            KeyError: no request has this code.
        """
        return self._decide(code, "approved", person.strip())

    def deny(self, code: str) -> PairingRequest:
        """Deny the request with ``code``: the sender is ignored from now on.

        Raises:
            KeyError: no request has this code.
        """
        return self._decide(code, "denied")

    def revoke(self, code: str) -> PairingRequest:
        """Forget the request with ``code``: an approved sender is no longer answered, and their
        next message gets a new code (a denied one may ask again).

        Raises:
            KeyError: no request has this code.
        """
        code = code.strip().upper()
        with self._lock:
            row = self._db.execute(f"SELECT {self._COLUMNS} FROM pairing WHERE code = ?", (code,)).fetchone()
            if row is None:
                raise KeyError(f"no pairing request with code {code!r}; `homeagent pairing list` shows the codes")
            self._db.execute("DELETE FROM pairing WHERE code = ?", (code,))
        return PairingRequest(*row)
