"""The L2 document store on PostgreSQL: rows in the server, search in an in-memory mirror.

Same public behaviour as the SQLite :class:`~homeagent_core.memory.documents.store.DocumentStore`
(``add``/``add_many``/``query``/``search``/``consume``/``delete``/``touch``/``get``/``all``/
``find_cold``/``reembed_stale``/...), for one tenant (an agent or household) of a shared
database: every row carries the tenant id, so one server holds many agents.

Documents live in ``ha_documents`` (vectors in a pgvector ``vector`` column with an HNSW index
per embedding space, the lexical terms as the same compact blob the SQLite store keeps).
Search runs on a :class:`~homeagent_core.memory.stores.postgresql.doc_mirror.DocMirror` loaded at open: the same
dense + character n-gram BM25 + neighbour ranking as the embedded store, so recall is the same.
(PostgreSQL's full-text search stems words of one configured language and the shipped server
has no ``pg_trgm``; the n-gram index also serves Chinese and mixed text.)

Every write takes the tenant's row in ``ha_tenants`` (serialising the tenant's writers, so
slots and change numbers commit in order), writes its rows and ``ha_changes`` entries and
sends ``NOTIFY`` in one transaction (:mod:`~homeagent_core.memory.stores.postgresql.doc_writes`), retried on
a new connection when the server drops the one it runs on. Reads are retried the same way;
counting a read (:meth:`~PgDocumentStore.touch`, ``query(touch=True)``) is a transaction of its
own, retried like a write, so it is counted once. The mirror is only ever changed by replaying
``ha_changes`` in order, for this store's own writes too, so several daemons on one database
converge: another daemon's commit becomes searchable here when its notification arrives
(or at the next write here), and an interrupted transaction leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from homeagent_core.lexical.buckets import decode_terms, encode_terms, term_counts
from homeagent_core.memory.audience import LIBRARY_OWNER
from homeagent_core.memory.documents import ranking as doc_ranking
from homeagent_core.memory.documents.model import DOCUMENT_COLUMNS, DocHit, Document, document_from_row
from homeagent_core.memory.stores.documents import BaseDocumentStore
from homeagent_core.memory.stores.postgresql.database import PgDatabase
from homeagent_core.memory.stores.postgresql.doc_mirror import DocMirror
from homeagent_core.memory.stores.postgresql.doc_writes import (
    NothingToDo,
    adopt_unowned,
    delete_rows,
    insert_records,
    set_visibility,
    store_vectors,
)
from homeagent_sdk.errors import MemoryStoreError, UsageError
from homeagent_sdk.visibility import EVERYONE, Audience

if TYPE_CHECKING:
    import numpy.typing as npt
    from psycopg import AsyncConnection

    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = ["PgDocumentStore"]

log = logging.getLogger(__name__)

_COLUMNS = DOCUMENT_COLUMNS
_Terms = tuple["npt.NDArray[np.uint32]", "npt.NDArray[np.uint16]", int]
_KEEP_CHANGES = 100_000  # change rows kept per tenant; a follower further behind reloads


class PgDocumentStore(BaseDocumentStore):
    """PostgreSQL-backed document store of one tenant, with in-memory fused search (the shared
    backend of :class:`~homeagent_core.memory.stores.documents.BaseDocumentStore`).

    Args:
        db: an open :class:`PgDatabase`, or a ``postgresql://`` URL (then this store owns and
            closes the connection pool).
        embedder: the active embedding space; ``None`` = lexical search only.
        tenant: whose documents these are (an agent or household id).
        follow: apply other daemons' commits as they are notified (``LISTEN``).
        dense_weight / lexical_weight / neighbour_weight / neighbour_window / owner: as for the
            SQLite store.

    Raises:
        MemoryStoreError: the database cannot be reached or its schema is newer.
        UsageError: a weight is negative or the tenant id is empty.
    """

    def __init__(
        self,
        db: PgDatabase | str,
        embedder: EmbeddingProvider | None = None,
        *,
        tenant: str = "default",
        follow: bool = True,
        dense_weight: float = 0.5,
        lexical_weight: float = 0.5,
        neighbour_weight: float = 0.2,
        neighbour_window: float = 3600.0,
        owner: str = LIBRARY_OWNER,
    ) -> None:
        super().__init__(
            embedder, dense_weight=dense_weight, lexical_weight=lexical_weight,
            neighbour_weight=neighbour_weight, neighbour_window=neighbour_window, owner=owner,
        )
        if not tenant.strip():
            raise UsageError("the PostgreSQL document store needs a non-empty tenant id")
        self._owns_db = isinstance(db, str)
        self.db = PgDatabase(db) if isinstance(db, str) else db
        self.tenant = tenant
        self._lock = threading.RLock()
        self._closed = False
        self._applied = 0
        self._follower = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"pg-follow:{tenant}")
        self._pending = threading.Event()
        try:
            self.db.call(self._prepare())
            self.migrated = self.db.call(self.db.transact(lambda conn: adopt_unowned(conn, self.tenant, self.owner)))
            with self._lock:
                self._reload()
        except BaseException:
            self._follower.shutdown()
            if self._owns_db:
                self.db.close()
            raise
        if follow:
            self.db.listen(self._on_notify)

    # -- schema and loading -------------------------------------------------------------------

    def _index_name(self) -> str:
        return "ha_documents_hnsw_" + hashlib.sha1(f"{self._fingerprint}/{self._dim}".encode()).hexdigest()[:12]

    async def _prepare(self) -> None:
        """The tenant's counter row, and an HNSW index for the active space (shared by tenants).

        Both statements change nothing when run again, so they are simply retried.
        """

        async def body(conn: AsyncConnection[Any]) -> None:
            await conn.execute("INSERT INTO ha_tenants (tenant) VALUES (%s) ON CONFLICT DO NOTHING", (self.tenant,))
            if self._fingerprint and self._dim:
                fp = self._fingerprint.replace("'", "''")
                await conn.execute(
                    f"CREATE INDEX IF NOT EXISTS {self._index_name()} ON ha_documents USING hnsw "
                    f"((vector::vector({self._dim})) vector_ip_ops) WHERE vec_model = '{fp}'"
                )

        await self.db.transact(body, write=False)

    async def _read_all(self) -> tuple[int, list[tuple[Any, ...]]]:
        """The change position and every mirror row of the tenant, from one snapshot (retried)."""

        async def body(conn: AsyncConnection[Any]) -> tuple[int, list[tuple[Any, ...]]]:
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cur = conn.cursor(binary=True)
                await cur.execute("SELECT change_seq FROM ha_tenants WHERE tenant=%s", (self.tenant,))
                seq = (await cur.fetchone() or (0,))[0]
                await cur.execute(
                    "SELECT slot, created_at, source, vec_model, vector, lex, lex_len, person, visibility"
                    " FROM ha_documents WHERE tenant=%s ORDER BY slot",
                    (self.tenant,),
                )
                return int(seq), await cur.fetchall()

        return await self.db.transact(body, write=False)

    async def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The rows of one read, retried on a new connection while the server is away."""

        async def body(conn: AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            return await (await conn.execute(sql, params)).fetchall()

        return await self.db.transact(body, write=False)

    def _reload(self) -> None:
        """Rebuild the mirror from every row of the tenant (called with ``_lock`` held)."""
        seq, rows = self.db.call(self._read_all())
        self._mirror = DocMirror(self._dim, self.neighbour_window)
        self._stale = 0
        for row in rows:
            self._apply_add(row)
        self._applied = seq
        if self._stale:
            log.info("document store %s: %d documents have no vector in the active space %s; "
                     "reembed_stale() recomputes them", self._where(), self._stale, self._fingerprint)

    def _apply_add(self, row: Sequence[Any], known: _Terms | None = None) -> None:
        slot, created, source, vec_model, vector, lex, length, person, visibility = row
        if slot <= self._mirror.top:
            return
        buckets, counts = (known[0], known[1]) if known is not None else decode_terms(bytes(lex))
        usable = vec_model == self._fingerprint and vector is not None and len(vector) == self._dim and self._dim
        if not usable:
            self._stale += 1
        self._mirror.add(int(slot), float(created), source, (buckets, counts, int(length)),
                         vector if usable else None, person or self.owner, visibility)

    # -- following other writers --------------------------------------------------------------

    def _on_notify(self, tenant: str) -> None:
        """A commit was announced (on the pool's thread): catch up in the follower thread."""
        if tenant not in ("", self.tenant) or self._closed or self._pending.is_set():
            return
        self._pending.set()
        try:
            self._follower.submit(self._follow_once)
        except RuntimeError:  # closed meanwhile
            return

    def _follow_once(self) -> None:
        self._pending.clear()
        with self._lock:
            if self._closed:
                return
            try:
                self._catch_up()
            except (MemoryStoreError, OSError) as exc:
                log.warning("document store %s: cannot follow changes: %s", self._where(), exc)
            except Exception as exc:  # psycopg errors: the next notification or write retries
                log.warning("document store %s: cannot follow changes: %s", self._where(), exc)

    async def _read_changes(
        self, after: int, known: frozenset[int] = frozenset()
    ) -> tuple[list[tuple[Any, ...]], dict[int, tuple[Any, ...]]]:
        """The change-log entries after ``after`` and the rows they need (retried while the server is away)."""

        async def body(conn: AsyncConnection[Any]) -> tuple[list[tuple[Any, ...]], dict[int, tuple[Any, ...]]]:
            cur = conn.cursor(binary=True)
            await cur.execute(
                "SELECT seq, kind, slot, lex FROM ha_changes WHERE tenant=%s AND seq > %s ORDER BY seq, slot",
                (self.tenant, after),
            )
            changes = await cur.fetchall()
            wanted = sorted({
                int(c[2]) for c in changes if c[1] in ("vec", "mark") or (c[1] == "add" and c[2] not in known)
            })
            rows: dict[int, tuple[Any, ...]] = {}
            if wanted:
                await cur.execute(
                    "SELECT slot, created_at, source, vec_model, vector, lex, lex_len, person, visibility"
                    " FROM ha_documents WHERE tenant=%s AND slot = ANY(%s)",
                    (self.tenant, wanted),
                )
                rows = {int(r[0]): r for r in await cur.fetchall()}
            return changes, rows

        return await self.db.transact(body, write=False)

    def _catch_up(self, known: dict[int, tuple[Any, ...]] | None = None) -> None:
        """Apply every committed change after the last applied one, in order (``_lock`` held).

        ``known`` holds mirror rows (by slot) this store just wrote, so they are not read back.
        """
        changes, rows = self.db.call(self._read_changes(self._applied, frozenset(known or ())))
        if known:
            rows.update(known)
        if changes and int(changes[0][0]) > self._applied + 1:
            log.info("document store %s: change log pruned past this mirror; reloading", self._where())
            self._reload()
            return
        for seq, kind, slot, lex in changes:
            slot = int(slot)
            if kind == "add" and slot in rows:
                self._apply_add(rows[slot])
            elif kind == "del" and slot < len(self._mirror.alive) and self._mirror.alive[slot]:
                had_vector = self._mirror.has_vector(slot)
                self._mirror.remove(slot, decode_terms(bytes(lex))[0])
                if not had_vector and self._fingerprint:
                    self._stale = max(0, self._stale - 1)
            elif kind == "vec" and slot in rows and slot < len(self._mirror.alive) and self._mirror.alive[slot]:
                _, _, _, vec_model, vector, _, _, _, _ = rows[slot]
                if vec_model == self._fingerprint and vector is not None and len(vector) == self._dim:
                    if not self._mirror.has_vector(slot):
                        self._stale = max(0, self._stale - 1)
                    self._mirror.set_vector(slot, vector)
            elif kind == "mark" and slot in rows:
                self._mirror.set_mark(slot, rows[slot][7] or self.owner, rows[slot][8])
            self._applied = max(self._applied, int(seq))

    def sync(self) -> None:
        """Apply every change committed by other writers so far (what a notification triggers)."""
        with self._lock:
            self._check_open()
            self._catch_up()

    # -- properties ---------------------------------------------------------------------------

    def _where(self) -> str:
        return f"{self.db.safe_url}#{self.tenant}"

    def __len__(self) -> int:
        return self._mirror.count

    def __contains__(self, doc_id: object) -> bool:
        if not isinstance(doc_id, str):
            return False
        self._check_open()
        return bool(self.db.call(self._ids_taken([doc_id])))

    def dense_rows(self) -> int:
        """Documents with a vector in the active space."""
        return self._mirror.n

    def stats(self) -> dict[str, Any]:
        """Counts for introspection (documents, dense rows, stale rows, space, where)."""
        return {
            "documents": self._mirror.count,
            "dense_rows": self._mirror.n,
            "stale_vectors": self._stale,
            "fingerprint": self._fingerprint,
            "path": self._where(),
        }

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"document store {self._where()} is closed")

    # -- writes -------------------------------------------------------------------------------

    async def _ids_taken(self, ids: list[str], *, outcome: str = "") -> list[str]:
        """Which of ``ids`` are stored (retried); ``outcome``: what a failure says (see :meth:`PgDatabase.transact`)."""

        async def body(conn: AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute("SELECT id FROM ha_documents WHERE tenant=%s AND id = ANY(%s)", (self.tenant, ids))
            return [r[0] for r in await cur.fetchall()]

        return await self.db.transact(body, write=False, outcome=outcome)

    def _taken_ids(self, ids: list[str]) -> list[str]:
        self._check_open()
        return self.db.call(self._ids_taken(ids, outcome="the change was not stored"))

    async def _write_records(self, records: list[tuple[Any, ...]]) -> int:
        """Insert complete rows in one transaction (retried when the connection is lost); the first slot."""
        import psycopg

        try:
            return await self.db.transact(lambda conn: insert_records(conn, self.tenant, records))
        except psycopg.errors.UniqueViolation as exc:
            raise UsageError(f"a document id already exists: {exc.diag.message_detail or exc}") from None
        except psycopg.Error as exc:
            raise MemoryStoreError(f"document store {self._where()}: insert failed: {exc}") from exc

    def _insert(self, docs: list[Document], vectors: npt.NDArray[np.float32] | None) -> None:
        records = []
        for i, doc in enumerate(docs):
            buckets, counts, length = term_counts(doc.text)
            doc.last_access = doc.last_access or doc.created_at
            vec = vectors[i] if vectors is not None else None
            records.append((
                doc.id, doc.title, doc.content, doc.source, doc.created_at, doc.last_access, doc.access_count,
                json.dumps(doc.media_digests), doc.meta, vec, self._fingerprint if vec is not None else "",
                encode_terms(buckets, counts), length, doc.person, doc.visibility,
            ))
        self.import_records(records)

    def import_records(self, records: Sequence[tuple[Any, ...]]) -> None:
        """Store complete rows as they are (a copy from another store): one transaction, durable on return.

        Each record is ``(id, title, content, source, created_at, last_access, access_count,
        media_digests_json, meta_dict, vector_or_None, vec_model, lex_blob, lex_len, person,
        visibility)``; vectors keep the space they were computed in (``vec_model``), terms their
        stored form; a record without a person is the owner's.

        Raises:
            UsageError: an id already exists.
        """
        if not records:
            return
        with self._lock:
            self._check_open()
            records = [(*r[:13], r[13] if len(r) > 13 and r[13] else self.owner,
                        r[14] if len(r) > 14 else "private") for r in records]
            first = self.db.call(self._write_records(list(records)))
            self._catch_up({
                first + i: (first + i, r[4], r[3], r[10], r[9], r[11], r[12], r[13], r[14])
                for i, r in enumerate(records)
            })

    async def _delete_rows(self, ids: list[str]) -> int:
        return await self.db.transact(lambda conn: delete_rows(conn, self.tenant, ids))

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id; returns how many existed. Durable on return."""
        ids = list(dict.fromkeys(doc_ids))
        with self._lock:
            self._check_open()
            if not ids:
                return 0
            try:
                count = self.db.call(self._delete_rows(ids))
            except NothingToDo:
                return 0
            self._catch_up()
            return count

    def touch(self, doc_ids: Iterable[str], *, now: float | None = None) -> int:
        """Count one read of each document (last access, access count); durable on return.

        A transaction of its own, retried like a write: a read is counted once, even when the
        connection was lost before or during its commit.
        """
        when = time.time() if now is None else now
        ids = list(doc_ids)
        self._check_open()

        async def body(conn: AsyncConnection[Any]) -> int:
            cur = await conn.execute(
                "UPDATE ha_documents SET last_access=%s, access_count = access_count + 1"
                " WHERE tenant=%s AND id = ANY(%s)",
                (when, self.tenant, ids),
            )
            return cur.rowcount

        return self.db.call(self.db.transact(body)) if ids else 0

    # -- reads --------------------------------------------------------------------------------

    def get(self, doc_id: str) -> Document | None:
        """The document with this id, or ``None``."""
        self._check_open()
        rows = self.db.call(
            self._rows(f"SELECT {_COLUMNS} FROM ha_documents WHERE tenant=%s AND id=%s", (self.tenant, doc_id))
        )
        return document_from_row(rows[0]) if rows else None

    def all(self, *, limit: int | None = None) -> list[Document]:
        """Documents in time order (oldest first)."""
        self._check_open()
        sql = f"SELECT {_COLUMNS} FROM ha_documents WHERE tenant=%s ORDER BY created_at, slot"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [document_from_row(r) for r in self.db.call(self._rows(sql, (self.tenant,)))]

    def _rank(
        self, text: str, top_k: int, qvec: npt.NDArray[np.float32] | None, audience: Audience = EVERYONE
    ) -> list[tuple[int, float]]:
        weights = doc_ranking.FusionWeights(
            self.dense_weight, self.lexical_weight, self.neighbour_weight, self.coverage_weight
        )
        return self._mirror.rank(text, top_k, qvec, weights=weights, audience=audience)

    async def _hits(self, ranked: list[tuple[int, float]], touch: bool) -> list[DocHit]:
        """The ranked slots' documents, retried while the server is away.

        ``touch``: the read is counted in the same statement, in a transaction retried like a
        write (:meth:`PgDatabase.transact`), so a retried read is counted once.
        """
        if not ranked:
            return []
        slots = [s for s, _ in ranked]
        if touch:
            when = time.time()

            async def counted(conn: AsyncConnection[Any]) -> list[tuple[Any, ...]]:
                cur = await conn.execute(
                    f"UPDATE ha_documents SET last_access=%s, access_count = access_count + 1"
                    f" WHERE tenant=%s AND slot = ANY(%s) RETURNING slot, {_COLUMNS}",
                    (when, self.tenant, slots),
                )
                return await cur.fetchall()

            found = await self.db.transact(counted)
        else:
            found = await self._rows(
                f"SELECT slot, {_COLUMNS} FROM ha_documents WHERE tenant=%s AND slot = ANY(%s)", (self.tenant, slots)
            )
        rows = {r[0]: r[1:] for r in found}
        return [DocHit(document_from_row(rows[slot]), score) for slot, score in ranked if slot in rows]

    def _set_visibility(self, doc_ids: list[str], visibility: str) -> int:
        with self._lock:
            self._check_open()
            if not doc_ids:
                return 0
            try:
                count = self.db.call(
                    self.db.transact(lambda conn: set_visibility(conn, self.tenant, doc_ids, visibility))
                )
            except NothingToDo:
                return 0
            self._catch_up()
            return count

    def _search(
        self, text: str, top_k: int, qvec: npt.NDArray[np.float32] | None, touch: bool, audience: Audience
    ) -> list[DocHit]:
        """The hits are read (and counted) in one statement, retried while the server is away."""
        with self._lock:
            self._check_open()
            ranked = self._rank(text, top_k, qvec, audience)
        return self.db.call(self._hits(ranked, touch))

    def archived_event_ids(self, event_ids: Iterable[str]) -> set[str]:
        """Which of these context event ids were already archived here (``meta.event_id``)."""
        wanted = list(set(event_ids))
        if not wanted:
            return set()
        rows = self.db.call(self._rows(
            "SELECT meta->>'event_id' FROM ha_documents WHERE tenant=%s AND meta->>'event_id' = ANY(%s)",
            (self.tenant, wanted),
        ))
        return {r[0] for r in rows}

    def _cold(self, cutoff: float, max_reads: int, limit: int) -> list[Document]:
        rows = self.db.call(self._rows(
            f"SELECT {_COLUMNS} FROM ha_documents WHERE tenant=%s AND last_access <= %s"
            " AND access_count <= %s ORDER BY last_access LIMIT %s",
            (self.tenant, cutoff, max_reads, limit),
        ))
        return [document_from_row(r) for r in rows]

    def _stale_rows(self, limit: int) -> list[tuple[int, str]]:
        self._check_open()
        rows = self.db.call(self._rows(
            "SELECT slot, title, content FROM ha_documents WHERE tenant=%s AND vec_model != %s"
            " ORDER BY slot LIMIT %s",
            (self.tenant, self._fingerprint, limit),
        ))
        return [(int(slot), f"{title}\n{content}" if title else content) for slot, title, content in rows]

    def _write_vectors(self, slots: list[int], vectors: npt.NDArray[np.float32]) -> None:
        with self._lock:
            self._check_open()
            space = self._fingerprint
            self.db.call(self.db.transact(lambda conn: store_vectors(conn, self.tenant, slots, vectors, space)))
            self._catch_up()

    # -- lifecycle ----------------------------------------------------------------------------

    def flush(self) -> None:
        """Drop change-log rows no follower needs any more (older than the last 100k changes).

        Retried while the server is away (deleting the same rows again changes nothing).
        """
        if self._closed:
            return
        cut = self._applied - _KEEP_CHANGES

        async def body(conn: AsyncConnection[Any]) -> None:
            await conn.execute("DELETE FROM ha_changes WHERE tenant=%s AND seq < %s", (self.tenant, cut))

        self.db.call(self.db.transact(body, write=False))

    def close(self) -> None:
        """Stop following and close (the pool too when this store opened it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.db.unlisten(self._on_notify)
        self._follower.shutdown(wait=True)
        if self._owns_db:
            self.db.close()
