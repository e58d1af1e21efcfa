"""Where the graph store's rows persist: the SQL seam of :class:`~homeagent_core.memory.graph.store.GraphStore`.

:class:`GraphSQL` is everything the store asks of a database — run a write in one transaction,
read back the rows a write touched, load the mirror, read for checks and statistics — and
:class:`SQLiteGraphSQL` is the SQLite implementation (WAL, foreign keys on, versioned schema
from :mod:`~homeagent_core.memory.graph.schema`). Another database plugs in by implementing
:class:`GraphSQL`; the write operations themselves (:mod:`~homeagent_core.memory.graph.writes`)
are plain SQL over the connection it hands out.

Locking is the store's: it serialises writes with its own lock and calls :meth:`GraphSQL.transaction`
and :meth:`GraphSQL.changed_rows` under it, so the mirror is refreshed in commit order.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from homeagent_core.memory.graph import mirror_file
from homeagent_core.memory.graph.cache import GraphCache
from homeagent_core.memory.graph.model import (
    BLOCK_COLUMNS,
    EDGE_COLUMNS,
    ENTITY_COLUMNS,
    RELATION_COLUMNS,
    BlockRow,
    ChangedRows,
    Changes,
    EntityRow,
    RelationRow,
)
from homeagent_core.memory.graph.schema import (
    SCHEMA_VERSION,
    add_person_visibility,
    backfill_terms,
    decode_terms,
    marks,
    migrate,
)
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.visibility import EVERYONE, Audience, sql_filter

__all__ = ["GraphSQL", "SQLiteGraphSQL", "count_rows", "snapshot_rows"]

T = TypeVar("T")


class GraphSQL(Protocol):
    """The database behind a graph store."""

    path: str

    def transaction(self, fn: Callable[[Any, Changes], T]) -> tuple[T, Changes]:
        """Run ``fn(connection, changes)`` in one transaction (all or nothing); its result and changes."""
        ...

    def changed_rows(self, changes: Changes) -> ChangedRows:
        """The committed rows of every id in ``changes``."""
        ...

    def read(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(connection)`` for a read."""
        ...

    def load_mirror(self) -> GraphCache:
        """A mirror filled from every row (active relations only)."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """Every row, in the shape of :meth:`GraphCache.snapshot` (for checks); the same SQL on
        every backend, so written once here."""
        return self.read(snapshot_rows)

    def counts(self) -> dict[str, Any]:
        """Row counts, the most-mentioned entities, relation types and vector spaces."""
        return self.read(lambda conn: count_rows(conn, self.path))

    def close(self) -> None:
        """Close the connection."""
        ...

    def remote_changes(self) -> Changes | None:
        """Ids other writers of a shared database committed since this one last looked (none for a file).

        None: too much changed to replay; the mirror is loaded again.
        """
        ...

    def follow(self, on_change: Callable[[], object]) -> None:
        """Call ``on_change()`` after another writer of a shared database commits (never for a file)."""
        ...


class SQLiteGraphSQL(GraphSQL):
    """The graph store's rows in one SQLite file (or ``":memory:"``).

    Raises:
        MemoryStoreError: the file is not a SQLite database, or was written by a newer schema.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._conn: sqlite3.Connection | None = None
        # the mirror's compact form saved beside the file (none for an in-memory database)
        self.mirror_file = None if self.path == ":memory:" else mirror_file.mirror_path(self.path)
        self.loaded_stamp: mirror_file.Stamp | None = None  # the database's stamp when the mirror was loaded
        try:
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            migrate(self._conn, self.path)
            add_person_visibility(self._conn)
            with self._tx() as conn:
                backfill_terms(conn)
                mirror_file.ensure_identity(conn)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise self.not_a_graph(exc) from exc
        except MemoryStoreError:
            self.close()
            raise

    def not_a_graph(self, exc: Exception) -> MemoryStoreError:
        """The error for a file that turned out not to be a graph database."""
        return MemoryStoreError(
            f"cannot open graph memory {self.path}: {exc}. The file is not a HomeAgent "
            "graph database; move it away or point core.memory.graph at another path."
        )

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise MemoryStoreError(f"graph memory {self.path} is closed")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def remote_changes(self) -> Changes | None:
        """One process writes a SQLite graph: nobody else's changes to follow."""
        return Changes()

    def follow(self, on_change: Callable[[], object]) -> None:
        """One process writes a SQLite graph: nothing to follow."""

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def transaction(self, fn: Callable[[sqlite3.Connection, Changes], T]) -> tuple[T, Changes]:
        """Run ``fn`` in one transaction; keyword terms of new entities are stored in it too."""
        changes = Changes()
        with self._tx() as conn:
            result = fn(conn, changes)
            if changes.entities:
                backfill_terms(conn, sorted(changes.entities))
        return result, changes

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return fn(self.conn)

    def load_mirror(self) -> GraphCache:
        """The mirror, its compact form read from the mirror file when that matches the database."""
        self.loaded_stamp = self.stamp()
        if self.mirror_file is None:
            return GraphCache.load(self.conn)
        saved = None
        try:
            saved = mirror_file.read_mirror(self.mirror_file, self.loaded_stamp)
        except mirror_file.MirrorFileError as exc:
            refused = str(exc)
        cache = GraphCache.load(self.conn, saved)
        if saved is not None:
            refused = cache.file_refused
        if refused and self.mirror_file.exists():
            mirror_file.log.warning("graph mirror file set aside, loaded from the database instead: %s", refused)
        cache.file_refused = refused
        return cache

    def stamp(self) -> mirror_file.Stamp:
        """What a mirror file of the database as it is now carries (see :func:`graph_mirror_file.read_stamp`)."""
        return mirror_file.read_stamp(self.conn)

    def changed_rows(self, ch: Changes) -> ChangedRows:
        conn = self.conn

        def rows(sql: str, ids: set[int]) -> dict[int, tuple[Any, ...]]:
            found: dict[int, tuple[Any, ...]] = {}
            ordered = sorted(ids)
            for i in range(0, len(ordered), 500):
                chunk = ordered[i : i + 500]
                for row in conn.execute(sql.format(marks=marks(chunk)), chunk):
                    found[row[0]] = row
            return found

        entities = rows(f"SELECT {ENTITY_COLUMNS}, terms FROM entities WHERE id IN ({{marks}})", ch.entities)
        return ChangedRows(
            entities={eid: (EntityRow(*row[:-1]), decode_terms(row[-1])) for eid, row in entities.items()},
            relations={
                rid: RelationRow(*row)
                for rid, row in rows(
                    f"SELECT {RELATION_COLUMNS} FROM relations WHERE id IN ({{marks}})", ch.relations
                ).items()
            },
            sentences={
                sid: row[1]
                for sid, row in rows("SELECT id, text FROM sentences WHERE id IN ({marks})", ch.sentences).items()
            },
            blocks={
                bid: BlockRow(*row)
                for bid, row in rows(
                    f"SELECT {BLOCK_COLUMNS} FROM memory_blocks WHERE id IN ({{marks}})", ch.blocks
                ).items()
            },
            block_edges={
                eid: (row[1], row[2], row[3], row[4], row[5])
                for eid, row in rows(
                    f"SELECT {EDGE_COLUMNS} FROM memory_block_edges WHERE id IN ({{marks}})",
                    ch.block_edges,
                ).items()
            },
        )


def snapshot_rows(conn: Any) -> dict[str, Any]:
    """Every row through ``conn`` (a DB-API connection: SQLite's or PostgreSQL's graph connection)."""
    return {
        "entities": {r[0]: EntityRow(*r) for r in conn.execute(f"SELECT {ENTITY_COLUMNS} FROM entities")},
        "relations": {
            r[0]: RelationRow(*r)
            for r in conn.execute(f"SELECT {RELATION_COLUMNS} FROM relations WHERE status = 'active'")
        },
        "sentences": dict(conn.execute("SELECT id, text FROM sentences").fetchall()),
        "blocks": {r[0]: BlockRow(*r) for r in conn.execute(f"SELECT {BLOCK_COLUMNS} FROM memory_blocks")},
        "block_edges": {
            r[0]: (r[1], r[2], r[3], r[4], r[5])
            for r in conn.execute(f"SELECT {EDGE_COLUMNS} FROM memory_block_edges")
        },
    }


def count_rows(conn: Any, path: str, audience: Audience = EVERYONE) -> dict[str, Any]:
    """The figures of :meth:`GraphSQL.counts`, read through ``conn`` (``?`` parameters).

    With an ``audience`` every figure counts only what it may see: its relations, the entities
    they touch, the sentences they cite and the blocks those contain (the filter is in the SQL).
    """
    where, args = sql_filter(audience)
    rel = f"FROM relations WHERE {where}"
    if audience.everything:
        ents, sents, blocks = "entities", "sentences", "memory_blocks"
        eargs: list[str] = []
    else:
        ents = (
            f"(SELECT * FROM entities WHERE id IN (SELECT source_id {rel} AND status='active')"
            f" OR id IN (SELECT target_id {rel} AND status='active')) e"
        )
        eargs = [*args, *args]
        sents = f"(SELECT * FROM sentences WHERE id IN (SELECT sentence_id {rel} AND status='active')) s"
        blocks = (
            "(SELECT * FROM memory_blocks WHERE id IN (SELECT block_id FROM memory_block_edges WHERE"
            f" sentence_id IN (SELECT sentence_id {rel} AND status='active'))) b"
        )

    def one(sql: str, params: list[str]) -> Any:
        row = conn.execute(sql, params).fetchone()
        return row[0] if row else 0

    return {
        "path": path,
        "schema_version": SCHEMA_VERSION,
        "entities": one(f"SELECT count(*) FROM {ents}", eargs),
        "relations_active": one(f"SELECT count(*) {rel} AND status='active'", args),
        "relations_deleted": one(f"SELECT count(*) {rel} AND status!='active'", args),
        "sentences": one(f"SELECT count(*) FROM {sents}", [] if audience.everything else args),
        "media_blocks": one(f"SELECT count(*) FROM {blocks}", [] if audience.everything else args),
        "top_entities": [
            {"name": n, "type": t, "mention_count": c}
            for n, t, c in conn.execute(
                f"SELECT name, type, mention_count FROM {ents} ORDER BY mention_count DESC, updated_at DESC LIMIT 10",
                eargs,
            )
        ],
        "relation_types": dict(
            conn.execute(
                f"SELECT type, count(*) {rel} AND status='active' GROUP BY type ORDER BY count(*) DESC LIMIT 10",
                args,
            ).fetchall()
        ),
        "entity_vector_spaces": dict(
            conn.execute(f"SELECT vec_model, count(*) FROM {ents} GROUP BY vec_model", eargs).fetchall()
        ),
    }
