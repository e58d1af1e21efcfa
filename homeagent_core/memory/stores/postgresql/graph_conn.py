"""The ``sqlite3`` connection API the graph's transaction bodies use, spoken over a psycopg connection.

The write operations of :mod:`~homeagent_core.memory.graph.writes` (and the social layer's and
review heartbeat's transaction bodies) run unchanged on :class:`PgGraphConnection`: ``execute``/
``executemany`` with ``?`` parameters, ``fetchone``/``fetchall``/iteration, ``lastrowid``.
SQLite-only SQL (``PRAGMA``, ``INSERT OR …``/``UPDATE OR …``, ``changes()``, ``sqlite_master``)
is refused with an error naming the statement, never emulated silently. A failing ``UPDATE``
rolls back alone (a savepoint), as a failing statement does in SQLite, and a uniqueness or
foreign-key error surfaces as :class:`sqlite3.IntegrityError`, so callers that catch it keep
working. A commit's triples are written set-based (:meth:`PgGraphConnection.write_triples`).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from homeagent_core.memory.graph.model import Changes
from homeagent_core.memory.graph.writes import CommitResult, PlannedTriple
from homeagent_sdk.errors import MemoryStoreError

if TYPE_CHECKING:
    import psycopg

__all__ = ["ID_TABLES", "PgGraphConnection"]

ID_TABLES = ("entities", "sentences", "relations", "memory_blocks", "memory_block_edges")
_INSERT_WITH_ID = re.compile(r"^\s*INSERT\s+INTO\s+(" + "|".join(ID_TABLES) + r")\b", re.IGNORECASE)
_SQLITE_ONLY = re.compile(r"\bPRAGMA\b|\b(INSERT|UPDATE|REPLACE)\s+OR\s+\w+|\bchanges\s*\(\s*\)|\bsqlite_\w+", re.I)


@lru_cache(maxsize=512)
def _translate(sql: str) -> tuple[str, bool]:
    """``sql`` with ``?`` parameters as psycopg's ``%s``, and whether ``RETURNING id`` was added.

    Raises:
        MemoryStoreError: the statement uses SQL only SQLite understands.
    """
    found = _SQLITE_ONLY.search(sql)
    if found:
        raise MemoryStoreError(
            f"the graph store on PostgreSQL cannot run SQLite-only SQL ({found.group(0)!r} in "
            f"{' '.join(sql.split())[:120]!r}); write the statement in SQL both databases understand"
        )
    text = sql.replace("%", "%%").replace("?", "%s")
    add_id = bool(_INSERT_WITH_ID.match(text)) and "RETURNING" not in text.upper()
    return (text + " RETURNING id" if add_id else text), add_id


class _Cursor:
    """The ``sqlite3.Cursor`` surface the graph's SQL code reads: rows, iteration, ``lastrowid``."""

    def __init__(self, rows: list[tuple[Any, ...]], lastrowid: int | None) -> None:
        self._rows = rows
        self._next = 0
        self.lastrowid = lastrowid

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[tuple[Any, ...]]:
        rest, self._next = self._rows[self._next :], len(self._rows)
        return rest

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())


class PgGraphConnection:
    """A psycopg connection speaking the ``sqlite3`` connection API the graph's transaction bodies use."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn
        self.terms_written: set[int] = set()
        """Entities whose keyword terms a write already stored (no backfill needed)."""

    def write_triples(
        self,
        ch: Changes,
        planned: list[PlannedTriple],
        session: str,
        mimes: Mapping[str, str],
        now: float,
        person: str = "",
        visibility: str = "private",
    ) -> CommitResult:
        """A commit's triples in a few statements, one round trip
        (:mod:`~homeagent_core.memory.stores.postgresql.graph_writes`).

        Raises:
            sqlite3.IntegrityError: a uniqueness, foreign-key or check constraint was violated.
        """
        import psycopg

        from homeagent_core.memory.stores.postgresql.graph_writes import write_triples

        try:
            res = write_triples(self.raw, ch, planned, session, mimes, now, person, visibility)
        except psycopg.errors.IntegrityError as exc:
            raise sqlite3.IntegrityError(str(exc).strip()) from exc
        self.terms_written.update(res.entity_ids)
        return res

    def __getattr__(self, name: str) -> Any:
        """Refuse the rest of ``sqlite3.Connection`` by name (``cursor``, ``create_function``, ``backup``...)."""
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"the graph store on PostgreSQL offers execute() and executemany() only, not sqlite3's {name!r}; "
            "this code works only with the SQLite graph (core.memory.store = sqlite)"
        )

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Cursor:
        """Run one statement (``?`` parameters); an ``UPDATE`` that fails rolls back alone.

        Raises:
            sqlite3.IntegrityError: a uniqueness, foreign-key or check constraint was violated.
            MemoryStoreError: the statement is SQLite-only SQL.
        """
        import psycopg

        text, add_id = _translate(sql)
        savepoint = text.lstrip()[:6].upper() == "UPDATE" and self.raw.info.transaction_status != 0
        try:
            if savepoint:
                with self.raw.transaction():
                    cur = self.raw.execute(text, tuple(params))
            else:
                cur = self.raw.execute(text, tuple(params))
        except psycopg.errors.IntegrityError as exc:
            raise sqlite3.IntegrityError(str(exc).strip()) from exc
        rows = cur.fetchall() if cur.description is not None else []
        return _Cursor(rows, int(rows[0][0]) if add_id and rows else None)

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each parameter tuple of ``seq``."""
        import psycopg

        text, _ = _translate(sql)
        try:
            with self.raw.cursor() as cur:
                cur.executemany(text, [tuple(p) for p in seq])
        except psycopg.errors.IntegrityError as exc:
            raise sqlite3.IntegrityError(str(exc).strip()) from exc
