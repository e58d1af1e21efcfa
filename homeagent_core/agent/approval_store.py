"""The approvals table of ``<data>/people.db``: every "ask the owner" request and its outcome.

A request is written before the asker is told it waits, and a decision before it is
acknowledged (WAL, ``synchronous=FULL``), so a restart loses neither. A decision is a
conditional update (``... WHERE status = 'pending'``): of two decisions of one approval, even
from two processes, exactly one changes the row.

Statuses: ``pending``, ``approved``, ``denied``, ``expired`` (no answer in time), ``withdrawn``
(the asking turn was stopped) and ``interrupted`` (the daemon stopped before the owner decided;
see :meth:`ApprovalStore.interrupt_pending`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from homeagent_core.agent.people import PEOPLE_SCHEMA
from homeagent_sdk._schema import open_schema
from homeagent_sdk.types import Principal, ToolCall

__all__ = ["FINAL_STATUSES", "ApprovalRow", "ApprovalStore", "approval_dict"]

#: Statuses an approval never leaves.
FINAL_STATUSES = frozenset({"approved", "denied", "expired", "withdrawn", "interrupted"})


_COLUMNS = (
    "id, created, person, role, door, thread, account, tool, call_id, plugin, arguments, channel,"
    " status, decided_by, decided_at, result"
)


@dataclass(frozen=True)
class ApprovalRow:
    """One stored approval."""

    id: int
    created: float
    principal: Principal
    call: ToolCall
    channel: str
    status: str
    decided_by: str
    decided_at: float | None
    result: str

    def to_dict(self) -> dict[str, Any]:
        return approval_dict(self.id, self.principal, self.call, self.channel, self.created, self.status,
                             self.decided_by, self.decided_at, self.result)


def approval_dict(id: int, principal: Principal, call: ToolCall, channel: str, created: float, status: str,
                  decided_by: str, decided_at: float | None, result: str) -> dict[str, Any]:
    """One approval as the API, the CLI and the audit show it (a pending one and a stored one alike)."""
    return {
        "id": id,
        "person": principal.person or "(guest)",
        "role": principal.role,
        "door": principal.door,
        "tool": call.name,
        "arguments": call.arguments,
        "channel": channel,
        "created": created,
        "status": status,
        "decided_by": decided_by,
        "decided_at": decided_at,
        "result": result,
    }


def _row(values: tuple[Any, ...]) -> ApprovalRow:
    (aid, created, person, role, door, thread, account, tool, call_id, plugin, arguments, channel, status,
     decided_by, decided_at, result) = values
    try:
        args = json.loads(arguments)
    except ValueError:
        args = {"_raw": arguments}
    principal = Principal(person=person, role=role, door=door, thread=thread, account=account)
    call = ToolCall(id=call_id, name=tool, arguments=args if isinstance(args, dict) else {"_raw": args}, plugin=plugin)
    return ApprovalRow(int(aid), float(created), principal, call, channel, status, decided_by, decided_at, result)


class ApprovalStore:
    """The ``approvals`` table of one data directory's ``people.db``; thread-safe, blocking."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        open_schema(self._conn, self.path, PEOPLE_SCHEMA)  # the approvals table is people.db's version 2

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def insert(self, principal: Principal, call: ToolCall, channel: str, created: float) -> int:
        """Store a new pending approval; returns its id (ids are never reused)."""
        with self._lock:
            cursor = self._conn.execute(
                "INSERT INTO approvals (created, person, role, door, thread, account, tool, call_id, plugin,"
                " arguments, channel) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    created,
                    principal.person,
                    principal.role,
                    principal.door,
                    principal.thread,
                    principal.account,
                    call.name,
                    call.id,
                    call.plugin,
                    json.dumps(call.arguments, ensure_ascii=False, default=str),
                    channel,
                ),
            )
            return int(cursor.lastrowid or 0)

    def finish(self, approval_id: int, status: str, *, by: str, at: float, result: str = "") -> bool:
        """Move a pending approval to ``status``; False when it was not pending any more."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"unknown approval status {status!r}")
        with self._lock:
            cursor = self._conn.execute(
                "UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, result = ?"
                " WHERE id = ? AND status = 'pending'",
                (status, by, at, result[:4000], int(approval_id)),
            )
            return cursor.rowcount == 1

    def set_result(self, approval_id: int, result: str) -> None:
        """Record what an approved call returned."""
        with self._lock:
            self._conn.execute("UPDATE approvals SET result = ? WHERE id = ?", (result[:4000], int(approval_id)))

    def get(self, approval_id: int) -> ApprovalRow | None:
        with self._lock:
            found = self._conn.execute(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (int(approval_id),)).fetchone()
        return _row(found) if found is not None else None

    def rows(self, limit: int = 100, *, status: str = "") -> list[ApprovalRow]:
        """The newest ``limit`` approvals (of ``status`` only, when given), newest first."""
        sql = f"SELECT {_COLUMNS} FROM approvals"
        args: tuple[Any, ...] = ()
        if status:
            sql += " WHERE status = ?"
            args = (status,)
        with self._lock:
            found = self._conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, max(1, int(limit)))).fetchall()
        return [_row(r) for r in found]

    def interrupt_pending(self, at: float, result: str) -> list[ApprovalRow]:
        """Close every pending approval as ``interrupted`` (a daemon start: the calls they hold
        are gone with the process that asked); returns them."""
        with self._lock, contextlib.closing(self._conn.cursor()) as cursor:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                pending = f"SELECT {_COLUMNS} FROM approvals WHERE status = 'pending' ORDER BY id"
                found = cursor.execute(pending).fetchall()
                cursor.execute(
                    "UPDATE approvals SET status = 'interrupted', decided_by = 'restart', decided_at = ?, result = ?"
                    " WHERE status = 'pending'",
                    (at, result),
                )
                cursor.execute("COMMIT")
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
        return [_row(r) for r in found]
