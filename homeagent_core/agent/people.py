"""Persons, roles and identities per door: who is talking, and with which rights.

The registry is ``<data>/people.db`` (SQLite, WAL, ``synchronous=FULL``: a change is on disk
before it is acknowledged). It holds:

* **roles** — ``owner``, ``adult``, ``child``, ``guest`` are built in; the owner may add more.
  A role carries its tool policy (allow / deny / ask lists of tool-name patterns, see
  :mod:`homeagent_core.agent.policy`);
* **persons** — a unique name and a role; a person may carry their own policy that overrides
  the role's;
* **identities** — ``(platform, account)`` pairs a chat-app door reports for a sender
  (``qq``/``12345``); only the owner links them, so a sender's display name never grants rights;
* **API keys** — stored as SHA-256 hashes; the key itself is shown once, when it is made;
* **audit** — one row per tool call (person, door, tool, outcome) and per change of this registry.

The registry is also what the ``memory`` plugin's social layer knows as people: the chat
bridges link a sender to a social person by name for memory, and the rights come from here.
"""

from __future__ import annotations

import builtins
import contextlib
import getpass
import hashlib
import json
import secrets
import sqlite3
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from homeagent_sdk.errors import HomeAgentError
from homeagent_sdk.types import Principal

__all__ = [
    "BUILTIN_ROLES",
    "DB_NAME",
    "DOOR_PLATFORM",
    "KEY_PREFIX",
    "SYSTEM",
    "AuditRow",
    "PeopleError",
    "PeopleRegistry",
    "Person",
    "RoleDef",
    "default_owner_name",
]

DB_NAME = "people.db"
#: The identity platform of a whole plugin: ``door``/``<plugin>`` makes that plugin's inputs
#: that name nobody come from the linked person (a third-party timer, a home-automation bridge).
DOOR_PLATFORM = "door"
#: API keys start with this so a leaked one is recognisable (``ha_…``).
KEY_PREFIX = "ha_"
#: The principal of heartbeats and memory consolidation: memory tools only.
SYSTEM = Principal(person="system", role="system", door="kernel")
NAME_MAX = 100

#: Tools only the owner uses without asking (admin tools).
ADMIN_TOOLS: tuple[str, ...] = (
    "plugin_*",
    "config_*",
    "llm_set_source",
    "persona_set",
    "memory_purge",
    "term_*",
    "cmd_run",
)


@dataclass(frozen=True)
class RoleDef:
    """A role and its tool policy (fnmatch patterns over tool names)."""

    name: str
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    builtin: bool = False
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "allow": list(self.allow),
            "deny": list(self.deny),
            "ask": list(self.ask),
            "builtin": self.builtin,
            "description": self.description,
        }


BUILTIN_ROLES: dict[str, RoleDef] = {
    "owner": RoleDef(
        "owner", allow=("*",), builtin=True, description="everything, and the only one who decides rights"
    ),
    "adult": RoleDef(
        "adult",
        allow=("*",),
        ask=ADMIN_TOOLS,
        builtin=True,
        description="everything except admin tools, which ask the owner",
    ),
    "child": RoleDef(
        "child",
        allow=(
            "output_send__*",
            "memory_recall",
            "memory_commit",
            "memory_introspect",
            "doc_query",
            "doc_commit",
            "knowledge_search",
            "timer_*",
            "reminder_*",
            "calendar_list",
            "web_fetch",
            "web_search",
            "skill_info",
        ),
        deny=ADMIN_TOOLS,
        builtin=True,
        description="chat, their own memory, timers and reminders, reading the calendar, web reading and search",
    ),
    "guest": RoleDef("guest", builtin=True, description="answers only, no tools"),
}

#: The pseudo-role of :data:`SYSTEM` (not a role a person can have).
SYSTEM_ROLE = RoleDef(
    "system",
    allow=("memory_*", "doc_*", "knowledge_search", "knowledge_get"),
    deny=("memory_purge",),
    builtin=True,
    description="heartbeats: memory tools only",
)


class PeopleError(HomeAgentError):
    """A change to the person registry that cannot be made (unknown role, last owner, ...)."""


@dataclass(frozen=True)
class Person:
    """One person of the registry."""

    name: str
    role: str
    created_at: float
    identities: tuple[tuple[str, str], ...] = ()
    keys: int = 0
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "created_at": self.created_at,
            "identities": [{"platform": p, "account": a} for p, a in self.identities],
            "api_keys": self.keys,
            "policy": {"allow": list(self.allow), "deny": list(self.deny), "ask": list(self.ask)},
        }


@dataclass
class AuditRow:
    """One audit entry."""

    id: int
    ts: float
    person: str
    role: str
    door: str
    action: str
    outcome: str
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "ts": self.ts,
            "person": self.person,
            "role": self.role,
            "door": self.door,
            "action": self.action,
            "outcome": self.outcome,
            "detail": self.detail,
        }


_SCHEMA = """
CREATE TABLE IF NOT EXISTS roles (
    name TEXT PRIMARY KEY,
    allow TEXT NOT NULL DEFAULT '[]',
    deny TEXT NOT NULL DEFAULT '[]',
    ask TEXT NOT NULL DEFAULT '[]',
    description TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS persons (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    allow TEXT NOT NULL DEFAULT '[]',
    deny TEXT NOT NULL DEFAULT '[]',
    ask TEXT NOT NULL DEFAULT '[]',
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS identities (
    platform TEXT NOT NULL,
    account TEXT NOT NULL,
    person_id INTEGER NOT NULL REFERENCES persons(id) ON DELETE CASCADE,
    PRIMARY KEY (platform, account)
);
CREATE TABLE IF NOT EXISTS api_keys (
    hash TEXT PRIMARY KEY,
    person_id INTEGER NOT NULL REFERENCES persons(id) ON DELETE CASCADE,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    person TEXT NOT NULL,
    role TEXT NOT NULL,
    door TEXT NOT NULL,
    action TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
"""


def _clean(value: str, what: str) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise PeopleError(f"{what} is empty")
    if len(text) > NAME_MAX:
        raise PeopleError(f"{what} is longer than {NAME_MAX} characters ({len(text)})")
    if any(unicodedata.category(c) in ("Cc", "Cf") for c in text):
        raise PeopleError(f"{what} {text!r} contains control characters")
    return text


def _patterns(values: Any, what: str) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = [v for v in values.replace("\n", ",").split(",")]
    out = []
    for v in values:
        if not isinstance(v, str):
            raise PeopleError(f"{what} must be tool-name patterns (text), got {v!r}")
        if v.strip():
            out.append(v.strip())
    return tuple(out)


def default_owner_name() -> str:
    """The owner's name at first start: the operating-system user running the daemon."""
    try:
        name = getpass.getuser().strip()
    except (KeyError, OSError):  # no passwd entry (some containers)
        name = ""
    return name or "owner"


def hash_key(key: str) -> str:
    """The stored form of an API key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class PeopleRegistry:
    """The person registry of one data directory; safe to use from several threads."""

    def __init__(self, path: Path, *, clock: Any = time.time) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.executescript(_SCHEMA)
        with contextlib.suppress(OSError):
            self.path.chmod(0o600)

    @classmethod
    def open(cls, data_dir: Path | str) -> PeopleRegistry:
        """The registry of ``data_dir`` (``<data>/people.db``), created when missing."""
        return cls(Path(data_dir) / DB_NAME)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _write(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._conn.execute(sql, args)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._conn.execute(sql, args).fetchall())

    # -------------------------------------------------------------- roles

    def roles(self) -> dict[str, RoleDef]:
        """Every role: the built-in ones (with the owner's changes) and the added ones."""
        out = dict(BUILTIN_ROLES)
        for name, allow, deny, ask, description in self._rows(
            "SELECT name, allow, deny, ask, description FROM roles ORDER BY name"
        ):
            out[name] = RoleDef(
                name,
                tuple(json.loads(allow)),
                tuple(json.loads(deny)),
                tuple(json.loads(ask)),
                builtin=name in BUILTIN_ROLES,
                description=description or (BUILTIN_ROLES[name].description if name in BUILTIN_ROLES else ""),
            )
        return out

    def role(self, name: str) -> RoleDef:
        """The role ``name``; ``system`` is the heartbeats' pseudo-role.

        Raises:
            PeopleError: no such role.
        """
        if name == SYSTEM_ROLE.name:
            return SYSTEM_ROLE
        roles = self.roles()
        if name not in roles:
            raise PeopleError(f"unknown role {name!r}; the roles are: {', '.join(sorted(roles))}")
        return roles[name]

    def set_role_policy(
        self,
        name: str,
        *,
        allow: Any = None,
        deny: Any = None,
        ask: Any = None,
        description: str = "",
        by: str = "",
    ) -> RoleDef:
        """Add a role or replace a role's policy (the owner's decision, through the CLI or web UI)."""
        name = _clean(name, "role name")
        if name in (SYSTEM_ROLE.name,):
            raise PeopleError(f"{name!r} is reserved for heartbeats and cannot be changed")
        if name == "owner":
            raise PeopleError("the owner role always has every right; it cannot be changed")
        a, d, k = _patterns(allow, "allow"), _patterns(deny, "deny"), _patterns(ask, "ask")
        self._write(
            "INSERT INTO roles (name, allow, deny, ask, description) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET allow = excluded.allow, deny = excluded.deny,"
            " ask = excluded.ask, description = excluded.description",
            (name, json.dumps(list(a)), json.dumps(list(d)), json.dumps(list(k)), description),
        )
        self.audit_change(by, "role_set", f"{name}: allow={list(a)} deny={list(d)} ask={list(k)}")
        return self.role(name)

    # -------------------------------------------------------------- persons

    def _person_row(self, name: str) -> tuple[Any, ...] | None:
        rows = self._rows("SELECT id, name, role, allow, deny, ask, created_at FROM persons WHERE name = ?", (name,))
        return rows[0] if rows else None

    def _person(self, row: tuple[Any, ...]) -> Person:
        pid, name, role, allow, deny, ask, created = row
        idents = tuple(
            (p, a)
            for p, a in self._rows(
                "SELECT platform, account FROM identities WHERE person_id = ? ORDER BY platform, account", (pid,)
            )
        )
        keys = self._rows("SELECT COUNT(*) FROM api_keys WHERE person_id = ?", (pid,))[0][0]
        return Person(
            name,
            role,
            created,
            idents,
            int(keys),
            tuple(json.loads(allow)),
            tuple(json.loads(deny)),
            tuple(json.loads(ask)),
        )

    def get(self, name: str) -> Person | None:
        """The person called ``name``, or None."""
        row = self._person_row(name.strip() if isinstance(name, str) else "")
        return self._person(row) if row is not None else None

    def require(self, name: str) -> Person:
        """The person called ``name``.

        Raises:
            PeopleError: no such person (the message lists who exists).
        """
        person = self.get(name)
        if person is None:
            known = [p.name for p in self.list()]
            raise PeopleError(
                f"unknown person {name!r}; known: {', '.join(known) or '(none)'} — add one with "
                "`homeagent people add NAME --role ROLE`"
            )
        return person

    def list(self) -> list[Person]:
        """Every person, owners first, then by name."""
        rows = self._rows("SELECT id, name, role, allow, deny, ask, created_at FROM persons")
        people = [self._person(r) for r in rows]
        return sorted(people, key=lambda p: (p.role != "owner", p.name))

    def owner(self) -> Person | None:
        """The first owner (by creation), or None before :meth:`ensure_owner`."""
        rows = self._rows(
            "SELECT id, name, role, allow, deny, ask, created_at FROM persons WHERE role = 'owner' ORDER BY id LIMIT 1"
        )
        return self._person(rows[0]) if rows else None

    def ensure_owner(self, name: str) -> Person:
        """The owner; created as ``name`` at first start, unchanged afterwards."""
        owner = self.owner()
        if owner is not None:
            return owner
        return self.add(_clean(name, "owner name"), "owner", by="first start")

    def add(self, name: str, role: str, *, by: str = "") -> Person:
        """Add a person with ``role``.

        Raises:
            PeopleError: the name is taken or invalid, or the role is unknown.
        """
        name = _clean(name, "person name")
        self.role(role)
        if name == SYSTEM.person:
            raise PeopleError(f"{name!r} is reserved for heartbeats; choose another name")
        try:
            self._write(
                "INSERT INTO persons (name, role, created_at) VALUES (?, ?, ?)", (name, role, float(self._clock()))
            )
        except sqlite3.IntegrityError:
            raise PeopleError(f"a person called {name!r} already exists; choose another name") from None
        self.audit_change(by, "person_add", f"{name} as {role}")
        return self.require(name)

    def _owners(self) -> int:
        return int(self._rows("SELECT COUNT(*) FROM persons WHERE role = 'owner'")[0][0])

    def remove(self, name: str, *, by: str = "") -> None:
        """Remove a person, their identities and API keys.

        Raises:
            PeopleError: unknown person, or the last owner.
        """
        person = self.require(name)
        if person.role == "owner" and self._owners() <= 1:
            raise PeopleError(
                f"{person.name!r} is the last owner; make someone else owner first (`homeagent people role NAME owner`)"
            )
        self._write("DELETE FROM persons WHERE name = ?", (person.name,))
        self.audit_change(by, "person_remove", person.name)

    def set_role(self, name: str, role: str, *, by: str = "") -> Person:
        """Give ``name`` the role ``role``.

        Raises:
            PeopleError: unknown person or role, or demoting the last owner.
        """
        person = self.require(name)
        self.role(role)
        if role == SYSTEM_ROLE.name:
            raise PeopleError("'system' is the heartbeats' role; a person cannot have it")
        if person.role == "owner" and role != "owner" and self._owners() <= 1:
            raise PeopleError(f"{person.name!r} is the last owner; make someone else owner first")
        self._write("UPDATE persons SET role = ? WHERE name = ?", (role, person.name))
        self.audit_change(by, "person_role", f"{person.name}: {person.role} -> {role}")
        return self.require(person.name)

    def set_policy(self, name: str, *, allow: Any = None, deny: Any = None, ask: Any = None, by: str = "") -> Person:
        """Give ``name`` their own allow / deny / ask patterns (checked before their role's)."""
        person = self.require(name)
        a, d, k = _patterns(allow, "allow"), _patterns(deny, "deny"), _patterns(ask, "ask")
        self._write(
            "UPDATE persons SET allow = ?, deny = ?, ask = ? WHERE name = ?",
            (json.dumps(list(a)), json.dumps(list(d)), json.dumps(list(k)), person.name),
        )
        self.audit_change(by, "person_policy", f"{person.name}: allow={list(a)} deny={list(d)} ask={list(k)}")
        return self.require(person.name)

    # -------------------------------------------------------------- identities and keys

    def link(self, name: str, platform: str, account: str, *, by: str = "") -> Person:
        """Link the chat-app account ``platform``/``account`` to ``name``.

        Raises:
            PeopleError: unknown person, or the account is linked to someone else.
        """
        person = self.require(name)
        platform, account = _clean(platform, "platform").lower(), _clean(account, "account")
        current = self.person_for_identity(platform, account)
        if current is not None and current.name != person.name:
            raise PeopleError(
                f"{platform} account {account!r} is already linked to {current.name!r}; "
                f"remove that person or link another account"
            )
        pid = self._person_row(person.name)[0]  # type: ignore[index]
        self._write(
            "INSERT OR IGNORE INTO identities (platform, account, person_id) VALUES (?, ?, ?)", (platform, account, pid)
        )
        self.audit_change(by, "person_link", f"{person.name}: {platform} {account}")
        return self.require(person.name)

    def unlink(self, name: str, platform: str, account: str, *, by: str = "") -> Person:
        """Revoke the link of ``platform``/``account`` to ``name``: its next message is a guest's.

        A turn already running keeps the rights it started with; every input after this is
        resolved anew.

        Raises:
            PeopleError: unknown person, or that account is not linked to them.
        """
        person = self.require(name)
        platform, account = _clean(platform, "platform").lower(), _clean(account, "account")
        pid = self._person_row(person.name)[0]  # type: ignore[index]
        cursor = self._write(
            "DELETE FROM identities WHERE platform = ? AND account = ? AND person_id = ?", (platform, account, pid)
        )
        if cursor.rowcount != 1:
            linked = ", ".join(f"{p} {a}" for p, a in person.identities) or "none"
            raise PeopleError(f"{platform} account {account!r} is not linked to {person.name!r} (linked: {linked})")
        self.audit_change(by, "person_unlink", f"{person.name}: {platform} {account}")
        return self.require(person.name)

    def person_for_identity(self, platform: str, account: str) -> Person | None:
        """The person a chat-app account is linked to, or None."""
        rows = self._rows(
            "SELECT p.id, p.name, p.role, p.allow, p.deny, p.ask, p.created_at FROM identities i"
            " JOIN persons p ON p.id = i.person_id WHERE i.platform = ? AND i.account = ?",
            (str(platform).strip().lower(), str(account).strip()),
        )
        return self._person(rows[0]) if rows else None

    def new_key(self, name: str, *, by: str = "") -> str:
        """Make an API key for ``name`` and return it; only its hash is kept."""
        person = self.require(name)
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        pid = self._person_row(person.name)[0]  # type: ignore[index]
        self._write(
            "INSERT INTO api_keys (hash, person_id, created_at) VALUES (?, ?, ?)",
            (hash_key(key), pid, float(self._clock())),
        )
        self.audit_change(by, "key_new", person.name)
        return key

    def person_for_key(self, key: str) -> Person | None:
        """The person an API key belongs to, or None (unknown key, or its person was removed)."""
        if not isinstance(key, str) or not key.startswith(KEY_PREFIX):
            return None
        rows = self._rows(
            "SELECT p.id, p.name, p.role, p.allow, p.deny, p.ask, p.created_at FROM api_keys k"
            " JOIN persons p ON p.id = k.person_id WHERE k.hash = ?",
            (hash_key(key),),
        )
        return self._person(rows[0]) if rows else None

    # -------------------------------------------------------------- principals

    def principal(self, person: Person | None, door: str, *, thread: str = "", account: str = "") -> Principal:
        """The principal of ``person`` (None: a guest) speaking through ``door``."""
        if person is None:
            return Principal(person="", role="guest", door=door, thread=thread, account=account)
        return Principal(person=person.name, role=person.role, door=door, thread=thread, account=account)

    # -------------------------------------------------------------- audit

    def audit(self, principal: Principal, action: str, outcome: str, detail: str = "") -> None:
        """Record one decision (a tool call's outcome, an approval) for ``principal``."""
        self._write(
            "INSERT INTO audit (ts, person, role, door, action, outcome, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                float(self._clock()),
                principal.person or "(guest)",
                principal.role or "guest",
                principal.door,
                action,
                outcome,
                detail[:2000],
            ),
        )

    def audit_change(self, by: str, action: str, detail: str) -> None:
        """Record a change of the registry itself (who made it: ``by``)."""
        self.audit(Principal(person=by or "(admin)", role="owner", door="admin"), action, "changed", detail)

    def audit_rows(self, limit: int = 100, *, person: str = "") -> builtins.list[AuditRow]:
        """The newest ``limit`` audit rows, newest first."""
        sql = "SELECT id, ts, person, role, door, action, outcome, detail FROM audit"
        args: tuple[Any, ...] = ()
        if person:
            sql += " WHERE person = ?"
            args = (person,)
        rows = self._rows(sql + " ORDER BY id DESC LIMIT ?", (*args, max(1, int(limit))))
        return [AuditRow(*r) for r in rows]
