"""The L3 graph store: entities, relations, sentences and media blocks in SQLite.

SQLite (WAL, foreign keys on) is the truth; a :class:`~homeagent_core.memory.graph_cache.GraphCache`
mirrors it in memory for recall. Every write runs in one transaction under one writer lock and
then refreshes exactly the rows it touched in the mirror, so the two never drift (a property
test checks that after random operation sequences and after a reopen).

Rules kept from the original:

* entity names are trimmed and must be 2–50 characters, contain a letter, a CJK character,
  ``-`` or ``_``, and no control characters; triples breaking this are skipped with a reason;
* committing an entity again counts a mention (``mention_count + 1``); a relation is unique on
  (source, target, type, session): the same triple again in the same session only refreshes
  its confidence and timestamp;
* ``purge`` soft-deletes (``status = 'deleted'``, kept on disk, gone from recall) or hard-deletes
  relations matching criteria; ``edit`` is a hard delete of the old triple plus a commit of the
  new one, in one transaction;
* media are ``memory_blocks`` rows linked ``sentence --contains--> block``; blocks and entity
  names carry their own vector and the fingerprint of its space (``vec_model``).

The methods are synchronous (they block on SQLite); the ``a``-prefixed twins run them in a
worker thread so the event loop never waits on disk. Recall reads only the mirror.

Neighbouring modules: :mod:`~homeagent_core.memory.graph_schema` (tables, migrations, name rules,
purge criteria), :mod:`~homeagent_core.memory.graph_types` (row and result types),
:mod:`~homeagent_core.memory.graph_vectors` (entity and block vectors, re-embedding).
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from homeagent_core.memory import graph_vectors
from homeagent_core.memory.graph_analytics import GraphAnalytics
from homeagent_core.memory.graph_cache import GraphCache
from homeagent_core.memory.graph_schema import (
    DEFAULT_TYPE,
    NAME_MAX,
    PURGE_CRITERIA,
    SCHEMA_VERSION,
    backfill_terms,
    check_name,
    check_relation,
    decode_terms,
    marks,
    migrate,
    purge_where,
)
from homeagent_core.memory.graph_types import (
    BLOCK_COLUMNS,
    ENTITY_COLUMNS,
    RELATION_COLUMNS,
    BlockRow,
    EntityRow,
    RecallResult,
    RelationRow,
)
from homeagent_sdk.embeddings import text_language
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.types import Triple

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = [
    "DEFAULT_TYPE",
    "PURGE_CRITERIA",
    "SCHEMA_VERSION",
    "Changes",
    "CommitResult",
    "GraphStore",
    "check_name",
]

T = TypeVar("T")

_DIGEST = re.compile(r"^[0-9a-f]{64}$")


@dataclass(slots=True)
class Changes:
    """Ids a write touched; the mirror re-reads exactly these rows after the commit."""

    entities: set[int] = field(default_factory=set)
    relations: set[int] = field(default_factory=set)
    sentences: set[int] = field(default_factory=set)
    blocks: set[int] = field(default_factory=set)
    block_edges: set[int] = field(default_factory=set)


@dataclass(slots=True)
class CommitResult:
    """Outcome of a commit: relations added / refreshed, and skipped triples with reasons."""

    added: int = 0
    refreshed: int = 0
    skipped: list[str] = field(default_factory=list)
    entity_ids: list[int] = field(default_factory=list)
    relation_ids: list[int] = field(default_factory=list)
    sentence_ids: list[int] = field(default_factory=list)
    block_digests: list[str] = field(default_factory=list)
    duplicate: bool = False
    """True when the commit's ``batch_id`` was applied before, so nothing was written."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "added": self.added,
            "refreshed": self.refreshed,
            "skipped": list(self.skipped),
            "media_blocks": list(self.block_digests),
        }
        if self.duplicate:
            out["duplicate"] = True
        return out


class GraphStore:
    """SQLite graph memory with a write-through networkx mirror.

    ``path`` is the database file (created with its folder) or ``":memory:"``. ``embedder``
    (optional) embeds entity names when they are committed through :meth:`acommit`.

    Raises:
        MemoryStoreError: the file is not a SQLite database, or was written by a newer schema.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embedder: EmbeddingProvider | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = str(path)
        self.embedder = embedder
        self._clock = clock
        self._write_lock = threading.Lock()
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            migrate(self._conn, self.path)
            with self._tx() as conn:
                backfill_terms(conn)
            self.cache = GraphCache.load(self._conn)
            self.analytics = GraphAnalytics(self.cache)
        except sqlite3.DatabaseError as exc:
            self._close_quietly()
            raise MemoryStoreError(
                f"cannot open graph memory {self.path}: {exc}. The file is not a HomeAgent "
                "graph database; move it away or point core.memory.graph at another path."
            ) from exc
        except MemoryStoreError:
            self._close_quietly()
            raise

    # ----------------------------------------------------------- lifecycle

    def _close_quietly(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close the database (waits for a write in progress)."""
        with self._write_lock:
            self._conn.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def write(self, fn: Callable[[sqlite3.Connection, Changes], T]) -> T:
        """Run ``fn(conn, changes)`` in one transaction, then refresh the touched rows.

        ``fn`` records every id it inserts, updates or deletes in ``changes``; the mirror
        re-reads those rows after the commit. Keyword terms of new entities are stored in the
        same transaction. Used by the social layer for its own tables.
        """
        with self._write_lock:
            changes = Changes()
            with self._tx() as conn:
                result = fn(conn, changes)
                if changes.entities:
                    backfill_terms(conn, sorted(changes.entities))
            self._refresh(changes)
            return result

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` for a read that needs SQL (not the recall path)."""
        with self._write_lock:
            return fn(self._conn)

    def _refresh(self, ch: Changes) -> None:
        conn, cache = self._conn, self.cache

        def rows(sql: str, ids: set[int]) -> dict[int, tuple[Any, ...]]:
            found: dict[int, tuple[Any, ...]] = {}
            ordered = sorted(ids)
            for i in range(0, len(ordered), 500):
                chunk = ordered[i : i + 500]
                for row in conn.execute(sql.format(marks=marks(chunk)), chunk):
                    found[row[0]] = row
            return found

        sentences = rows("SELECT id, text FROM sentences WHERE id IN ({marks})", ch.sentences)
        relations = rows(
            f"SELECT {RELATION_COLUMNS} FROM relations WHERE id IN ({{marks}})", ch.relations
        )
        entities = rows(
            f"SELECT {ENTITY_COLUMNS}, terms FROM entities WHERE id IN ({{marks}})", ch.entities
        )
        blocks = rows(
            f"SELECT {BLOCK_COLUMNS} FROM memory_blocks WHERE id IN ({{marks}})", ch.blocks
        )
        edges = rows(
            "SELECT id, sentence_id, block_id, type FROM memory_block_edges"
            " WHERE id IN ({marks})",
            ch.block_edges,
        )
        with cache.lock:
            for sid in ch.sentences:
                if sid in sentences:
                    cache.upsert_sentence(sid, sentences[sid][1])
                else:
                    cache.remove_sentence(sid)
            # entities first (new endpoints must exist), removals of entities last
            for eid in ch.entities:
                if eid in entities:
                    row = entities[eid]
                    cache.upsert_entity(EntityRow(*row[:-1]), decode_terms(row[-1]))
            for rid in ch.relations:
                if rid in relations:
                    cache.upsert_relation(RelationRow(*relations[rid]))
                else:
                    cache.remove_relation(rid)
            for eid in ch.entities:
                if eid not in entities:
                    cache.remove_entity(eid)
            for bid in ch.blocks:
                if bid in blocks:
                    cache.upsert_block(BlockRow(*blocks[bid]))
                else:
                    cache.remove_block(bid)
            for edge_id in ch.block_edges:
                if edge_id in edges:
                    cache.upsert_block_edge(edge_id, *edges[edge_id][1:])
                else:
                    cache.remove_block_edge(edge_id)

    # ------------------------------------------------------------- writes

    def commit(
        self,
        triples: Iterable[Triple],
        session: str = "",
        *,
        mimes: Mapping[str, str] | None = None,
        batch_id: str | None = None,
    ) -> CommitResult:
        """Upsert the triples' entities and relations; invalid triples are skipped with reasons.

        ``triple.media_digests`` must be full sha256 digests (resolve short ones first);
        ``mimes`` optionally maps a digest to its MIME type for new blocks. ``batch_id`` makes
        the commit apply at most once: the id is recorded in the same transaction, and a
        commit with an id already recorded writes nothing and returns ``duplicate=True``
        (a writer replaying its input after a crash counts no mention twice).
        """
        items = list(triples)

        def run(conn: sqlite3.Connection, ch: Changes) -> CommitResult:
            if batch_id is not None:
                fresh = conn.execute(
                    "INSERT INTO applied_batches (batch_id, applied_at) VALUES (?, ?)"
                    " ON CONFLICT (batch_id) DO NOTHING RETURNING batch_id",
                    (batch_id, self._clock()),
                ).fetchall()
                if not fresh:
                    return CommitResult(duplicate=True)
            return self._commit_in(conn, ch, items, session, mimes or {})

        return self.write(run)

    def prune_batches(self, older_than_s: float) -> int:
        """Forget batch ids recorded more than ``older_than_s`` seconds ago; returns how many."""

        def run(conn: sqlite3.Connection, _ch: Changes) -> int:
            cutoff = self._clock() - older_than_s
            gone = conn.execute("DELETE FROM applied_batches WHERE applied_at < ? RETURNING 1", (cutoff,))
            return len(gone.fetchall())

        return self.write(run)

    def _commit_in(
        self,
        conn: sqlite3.Connection,
        ch: Changes,
        triples: list[Triple],
        session: str,
        mimes: Mapping[str, str],
    ) -> CommitResult:
        now = self._clock()
        res = CommitResult()
        for t in triples:
            subject, relation, obj = t.subject.strip(), t.relation.strip(), t.object.strip()
            reason = (
                _prefixed("subject", check_name(subject))
                or _prefixed("object", check_name(obj))
                or check_relation(relation)
            )
            conf = t.confidence
            if reason is None and not (isinstance(conf, int | float) and 0.0 <= conf <= 1.0):
                reason = f"confidence must be a number from 0 to 1, got {conf!r}"
            if reason is not None:
                res.skipped.append(f"{t.subject!r} -{t.relation}-> {t.object!r}: {reason}")
                continue
            sid = self._upsert_entity(conn, subject, t.subject_type, now)
            oid = self._upsert_entity(conn, obj, t.object_type, now)
            for eid in (sid, oid):
                if eid not in ch.entities:
                    res.entity_ids.append(eid)
                    ch.entities.add(eid)
            text = t.sentence_text.strip()
            if not text and t.media_digests:
                text = f"{subject}{relation}{obj}。"
            sentence_id = self._upsert_sentence(conn, text, session, now) if text else None
            if sentence_id is not None:
                ch.sentences.add(sentence_id)
                res.sentence_ids.append(sentence_id)
            row = conn.execute(
                "SELECT id FROM relations WHERE source_id = ? AND target_id = ? AND type = ? AND session = ?",
                (sid, oid, relation, session),
            ).fetchone()
            if row is not None:
                rid = row[0]
                conn.execute(
                    "UPDATE relations SET confidence = ?, updated_at = ?, status = 'active',"
                    " sentence_id = COALESCE(?, sentence_id) WHERE id = ?",
                    (float(conf), now, sentence_id, rid),
                )
                res.refreshed += 1
            else:
                rid = conn.execute(
                    "INSERT INTO relations (source_id, target_id, type, confidence, session,"
                    " sentence_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (sid, oid, relation, float(conf), session, sentence_id, now, now),
                ).lastrowid
                assert rid is not None
                res.added += 1
            ch.relations.add(rid)
            res.relation_ids.append(rid)
            for digest in t.media_digests:
                if sentence_id is None or not _DIGEST.match(digest):
                    res.skipped.append(f"media digest {digest!r}: not a full sha256 digest")
                    continue
                self._link_block(conn, ch, sentence_id, digest, mimes.get(digest, ""), now)
                if digest not in res.block_digests:
                    res.block_digests.append(digest)
        return res

    @staticmethod
    def _upsert_entity(conn: sqlite3.Connection, name: str, etype: str, now: float) -> int:
        etype = etype.strip()[:NAME_MAX] or DEFAULT_TYPE
        row = conn.execute(
            "INSERT INTO entities (name, type, mention_count, created_at, updated_at)"
            " VALUES (?, ?, 1, ?, ?) ON CONFLICT (name) DO UPDATE SET"
            " mention_count = mention_count + 1, updated_at = excluded.updated_at,"
            " type = CASE WHEN excluded.type != 'Concept' THEN excluded.type ELSE type END"
            " RETURNING id",
            (name, etype, now, now),
        ).fetchone()
        return int(row[0])

    @staticmethod
    def _upsert_sentence(conn: sqlite3.Connection, text: str, session: str, now: float) -> int:
        row = conn.execute("SELECT id FROM sentences WHERE text = ? AND session = ?", (text, session)).fetchone()
        if row is not None:
            return int(row[0])
        rid = conn.execute(
            "INSERT INTO sentences (text, session, created_at) VALUES (?, ?, ?)",
            (text, session, now),
        ).lastrowid
        assert rid is not None
        return rid

    @staticmethod
    def _link_block(
        conn: sqlite3.Connection, ch: Changes, sentence_id: int, digest: str, mime: str, now: float
    ) -> None:
        conn.execute(
            "INSERT INTO memory_blocks (digest, mime, created_at) VALUES (?, ?, ?) ON CONFLICT (digest) DO NOTHING",
            (digest, mime, now),
        )
        (bid,) = conn.execute("SELECT id FROM memory_blocks WHERE digest = ?", (digest,)).fetchone()
        conn.execute(
            "INSERT INTO memory_block_edges (sentence_id, block_id, type, created_at)"
            " VALUES (?, ?, 'contains', ?) ON CONFLICT DO NOTHING",
            (sentence_id, bid, now),
        )
        (eid,) = conn.execute(
            "SELECT id FROM memory_block_edges WHERE sentence_id = ? AND block_id = ? AND type = 'contains'",
            (sentence_id, bid),
        ).fetchone()
        ch.blocks.add(bid)
        ch.block_edges.add(eid)

    def _entity_id(self, conn: sqlite3.Connection, name: str, what: str) -> tuple[int, int, str]:
        row = conn.execute("SELECT id, mention_count, type FROM entities WHERE name = ?", (name.strip(),)).fetchone()
        if row is None:
            raise MemoryStoreError(
                f"unknown entity {name!r} ({what}); names must match exactly — use "
                "memory_recall to find the stored name"
            )
        return int(row[0]), int(row[1]), str(row[2])

    def merge(self, keep: str, drop: str) -> dict[str, int]:
        """Fold entity ``drop`` into ``keep``: its relations move over, mentions add up.

        Relations that would duplicate one of ``keep``'s keep the higher confidence; relations
        between the two become self-loops and are removed.

        Raises:
            MemoryStoreError: either name is unknown, or both name the same entity.
        """

        def run(conn: sqlite3.Connection, ch: Changes) -> dict[str, int]:
            kid, _, ktype = self._entity_id(conn, keep, "the entity to keep")
            did, dcount, dtype = self._entity_id(conn, drop, "the entity to merge away")
            if kid == did:
                raise MemoryStoreError(f"cannot merge {keep!r} into itself; name two entities")
            now = self._clock()
            moved = deduplicated = removed = 0
            rows = conn.execute(
                "SELECT id, source_id, target_id, type, session, confidence, status FROM relations"
                " WHERE source_id = ? OR target_id = ?",
                (did, did),
            ).fetchall()
            for rid, s, t, rtype, session, conf, status in rows:
                ch.relations.add(rid)
                ns, nt = (kid if s == did else s), (kid if t == did else t)
                if ns == nt:
                    conn.execute("DELETE FROM relations WHERE id = ?", (rid,))
                    removed += 1
                    continue
                dup = conn.execute(
                    "SELECT id, confidence, status FROM relations WHERE source_id = ? AND"
                    " target_id = ? AND type = ? AND session = ? AND id != ?",
                    (ns, nt, rtype, session, rid),
                ).fetchone()
                if dup is not None:
                    active = "active" if "active" in (status, dup[2]) else dup[2]
                    conn.execute(
                        "UPDATE relations SET confidence = ?, status = ?, updated_at = ? WHERE id = ?",
                        (max(conf, dup[1]), active, now, dup[0]),
                    )
                    conn.execute("DELETE FROM relations WHERE id = ?", (rid,))
                    ch.relations.add(dup[0])
                    deduplicated += 1
                else:
                    conn.execute(
                        "UPDATE relations SET source_id = ?, target_id = ?, updated_at = ? WHERE id = ?",
                        (ns, nt, now, rid),
                    )
                    moved += 1
            conn.execute("UPDATE OR IGNORE person_traits SET entity_id = ? WHERE entity_id = ?", (kid, did))
            new_type = dtype if ktype == DEFAULT_TYPE else ktype
            conn.execute(
                "UPDATE entities SET mention_count = mention_count + ?, type = ?, updated_at = ? WHERE id = ?",
                (dcount, new_type, now, kid),
            )
            conn.execute("DELETE FROM entities WHERE id = ?", (did,))
            ch.entities.update((kid, did))
            return {"moved": moved, "deduplicated": deduplicated, "removed_self_loops": removed}

        return self.write(run)

    def purge(
        self,
        criteria: Mapping[str, Any],
        mode: str = "soft",
        *,
        before_commit: Callable[[int], object] | None = None,
    ) -> int:
        """Soft- (``mode="soft"``) or hard- (``"hard"``) delete relations matching ``criteria``.

        Criteria keys are :data:`PURGE_CRITERIA`; all given criteria must match. Returns how
        many relations were purged (0 when nothing matched). ``before_commit(count)`` runs
        inside the transaction, after the relations were purged: if it raises, nothing is
        purged (a caller's own follow-up step, e.g. cleaning the conversation log, becomes
        part of one all-or-nothing change).

        Raises:
            MemoryStoreError: no criteria, an unknown key, a bad value, or an unknown mode.
        """
        where, args = purge_where(criteria)
        if mode not in ("soft", "hard"):
            raise MemoryStoreError(f"purge mode must be 'soft' or 'hard', got {mode!r}")

        def run(conn: sqlite3.Connection, ch: Changes) -> int:
            if mode == "soft":
                rows = conn.execute(
                    f"UPDATE relations SET status = 'deleted', updated_at = ?"
                    f" WHERE status = 'active' AND {where} RETURNING id",
                    (self._clock(), *args),
                ).fetchall()
            else:
                rows = conn.execute(f"DELETE FROM relations WHERE {where} RETURNING id", args).fetchall()
            ch.relations.update(r[0] for r in rows)
            if before_commit is not None:
                before_commit(len(rows))
            return len(rows)

        return self.write(run)

    def edit(
        self,
        subject: str,
        relation: str,
        obj: str,
        new: Triple,
        session: str = "",
        *,
        before_commit: Callable[[CommitResult], object] | None = None,
    ) -> CommitResult:
        """Replace the relation ``subject -relation-> obj`` (every session) with ``new``.

        ``before_commit(result)`` runs inside the transaction after the replacement; if it
        raises, the relation is left as it was.

        Raises:
            MemoryStoreError: the old relation does not exist, or ``new`` is invalid.
        """

        def run(conn: sqlite3.Connection, ch: Changes) -> CommitResult:
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT r.id FROM relations r JOIN entities s ON s.id = r.source_id"
                    " JOIN entities t ON t.id = r.target_id"
                    " WHERE s.name = ? AND r.type = ? AND t.name = ? AND r.status = 'active'",
                    (subject.strip(), relation.strip(), obj.strip()),
                )
            ]
            if not ids:
                raise MemoryStoreError(
                    f"no relation {subject!r} -{relation}-> {obj!r} to edit; use memory_recall"
                    " to see the stored names and relation types"
                )
            conn.execute(f"DELETE FROM relations WHERE id IN ({marks(ids)})", ids)
            ch.relations.update(ids)
            result = self._commit_in(conn, ch, [new], session, {})
            if result.skipped:
                raise MemoryStoreError(f"the new triple is invalid: {result.skipped[0]}")
            if before_commit is not None:
                before_commit(result)
            return result

        return self.write(run)

    def delete_entity(self, name: str) -> int:
        """Delete an entity with all its relations and traits; returns the relations removed.

        Raises:
            MemoryStoreError: the entity is unknown.
        """

        def run(conn: sqlite3.Connection, ch: Changes) -> int:
            eid, _, _ = self._entity_id(conn, name, "the entity to delete")
            ids = [
                r[0] for r in conn.execute("SELECT id FROM relations WHERE source_id = ? OR target_id = ?", (eid, eid))
            ]
            conn.execute("DELETE FROM entities WHERE id = ?", (eid,))
            ch.relations.update(ids)
            ch.entities.add(eid)
            return len(ids)

        return self.write(run)

    def merge_blocks(self, keep: str, drop: str) -> int:
        """Fold media block ``drop`` into ``keep`` (full digests); returns edges moved.

        Raises:
            MemoryStoreError: a digest is not a block of the graph, or both are the same.
        """

        def run(conn: sqlite3.Connection, ch: Changes) -> int:
            ids = []
            for digest in (keep, drop):
                row = conn.execute("SELECT id FROM memory_blocks WHERE digest = ?", (digest,)).fetchone()
                if row is None:
                    raise MemoryStoreError(f"unknown media block {digest!r}; pass a digest shown by memory_recall")
                ids.append(row[0])
            kid, did = ids
            if kid == did:
                raise MemoryStoreError("cannot merge a media block into itself")
            edges = conn.execute("SELECT id FROM memory_block_edges WHERE block_id = ?", (did,)).fetchall()
            ch.block_edges.update(e[0] for e in edges)
            conn.execute(
                "UPDATE OR IGNORE memory_block_edges SET block_id = ? WHERE block_id = ?",
                (kid, did),
            )
            moved = conn.execute("SELECT changes()").fetchone()[0]
            conn.execute("DELETE FROM memory_blocks WHERE id = ?", (did,))
            ch.blocks.update((kid, did))
            return int(moved)

        return self.write(run)

    # -------------------------------------------------------------- reads

    def recall(
        self,
        keywords: list[str],
        *,
        query_vector: npt.NDArray[np.float32] | None = None,
        fingerprint: str = "",
        depth: int = 2,
        max_entities: int = 30,
        max_relations: int = 50,
        exclude: set[str] | None = None,
    ) -> RecallResult:
        """Recall from the mirror: keyword seeds + vector seeds (top 5) → BFS to ``depth``.

        Never touches SQLite; safe and cheap to call on the event loop.
        """
        seeds = self.cache.keyword_seeds(keywords)
        if query_vector is not None and fingerprint:
            for eid, score in self.cache.vector_seeds(query_vector, fingerprint, 5):
                if score > 0 and eid not in seeds:
                    seeds.append(eid)
        return self.cache.recall(
            seeds,
            depth=depth,
            max_entities=max_entities,
            max_relations=max_relations,
            exclude=exclude,
        )

    async def arecall(
        self,
        keywords: list[str],
        *,
        query_text: str = "",
        depth: int = 2,
        max_entities: int = 30,
        max_relations: int = 50,
        exclude: set[str] | None = None,
    ) -> RecallResult:
        """:meth:`recall`, adding vector seeds from ``query_text`` when an embedder is set."""
        vector, fingerprint = await self.embed_query(query_text)
        return self.recall(
            keywords,
            query_vector=vector,
            fingerprint=fingerprint,
            depth=depth,
            max_entities=max_entities,
            max_relations=max_relations,
            exclude=exclude,
        )

    async def embed_query(self, text: str) -> tuple[npt.NDArray[np.float32] | None, str]:
        """The embedder's vector for ``text`` and its fingerprint, or ``(None, "")``."""
        if self.embedder is None or not text.strip() or not self.embedder.info.serves(text_language(text)):
            return None, ""
        matrix = await self.embedder.embed_texts([text])
        return matrix[0], self.embedder.info.fingerprint

    def introspect(self) -> dict[str, Any]:
        """Counts, the most-mentioned entities, relation types and vector coverage."""

        def run(conn: sqlite3.Connection) -> dict[str, Any]:
            def one(sql: str) -> Any:
                return conn.execute(sql).fetchone()[0]

            return {
                "path": self.path,
                "schema_version": SCHEMA_VERSION,
                "entities": one("SELECT count(*) FROM entities"),
                "relations_active": one("SELECT count(*) FROM relations WHERE status='active'"),
                "relations_deleted": one("SELECT count(*) FROM relations WHERE status!='active'"),
                "sentences": one("SELECT count(*) FROM sentences"),
                "media_blocks": one("SELECT count(*) FROM memory_blocks"),
                "top_entities": [
                    {"name": n, "type": t, "mention_count": c}
                    for n, t, c in conn.execute(
                        "SELECT name, type, mention_count FROM entities"
                        " ORDER BY mention_count DESC, updated_at DESC LIMIT 10"
                    )
                ],
                "relation_types": dict(
                    conn.execute(
                        "SELECT type, count(*) FROM relations WHERE status='active'"
                        " GROUP BY type ORDER BY count(*) DESC LIMIT 10"
                    ).fetchall()
                ),
                "entity_vector_spaces": dict(
                    conn.execute("SELECT vec_model, count(*) FROM entities GROUP BY vec_model").fetchall()
                ),
                "embedder": self.embedder.info.fingerprint if self.embedder else None,
                "mirror": self.cache.stats(),
            }

        return self.read(run)

    def sql_snapshot(self) -> dict[str, Any]:
        """What SQLite holds, in the shape of :meth:`GraphCache.snapshot` (for checks)."""

        def run(conn: sqlite3.Connection) -> dict[str, Any]:
            return {
                "entities": {r[0]: EntityRow(*r) for r in conn.execute(f"SELECT {ENTITY_COLUMNS} FROM entities")},
                "relations": {
                    r[0]: RelationRow(*r)
                    for r in conn.execute(f"SELECT {RELATION_COLUMNS} FROM relations WHERE status = 'active'")
                },
                "sentences": dict(conn.execute("SELECT id, text FROM sentences").fetchall()),
                "blocks": {r[0]: BlockRow(*r) for r in conn.execute(f"SELECT {BLOCK_COLUMNS} FROM memory_blocks")},
                "block_edges": {
                    r[0]: (r[1], r[2], r[3])
                    for r in conn.execute("SELECT id, sentence_id, block_id, type FROM memory_block_edges")
                },
            }

        return self.read(run)

    # ------------------------------------------------------------ vectors

    async def embed_entities(self, ids: Iterable[int], provider: EmbeddingProvider) -> int:
        """Embed the names of entities ``ids`` whose vector is missing or of another space."""
        return await graph_vectors.embed_entities(self, ids, provider)

    async def reembed_stale(
        self,
        provider: EmbeddingProvider | None = None,
        *,
        batch_size: int = 64,
        load_media: Callable[[str], tuple[bytes, str] | None] | None = None,
    ) -> dict[str, int]:
        """Recompute vectors whose ``vec_model`` is empty or another space's, in batches.

        See :func:`homeagent_core.memory.graph_vectors.reembed_stale`; ``provider`` defaults to
        the store's embedder (nothing to do without one).
        """
        provider = provider or self.embedder
        if provider is None:
            return {"entities": 0, "blocks": 0, "blocks_skipped": 0}
        return await graph_vectors.reembed_stale(self, provider, batch_size=batch_size, load_media=load_media)

    # ------------------------------------------------------------ async twins

    async def acommit(
        self,
        triples: Iterable[Triple],
        session: str = "",
        *,
        mimes: Mapping[str, str] | None = None,
        batch_id: str | None = None,
    ) -> CommitResult:
        """:meth:`commit` in a worker thread, then embed new entity names (if an embedder)."""
        result = await asyncio.to_thread(self.commit, list(triples), session, mimes=mimes, batch_id=batch_id)
        if self.embedder is not None and result.entity_ids:
            await self.embed_entities(result.entity_ids, self.embedder)
        return result

    async def amerge(self, keep: str, drop: str) -> dict[str, int]:
        return await asyncio.to_thread(self.merge, keep, drop)

    async def apurge(
        self,
        criteria: Mapping[str, Any],
        mode: str = "soft",
        *,
        before_commit: Callable[[int], object] | None = None,
    ) -> int:
        """:meth:`purge` in a worker thread (``before_commit`` runs there too)."""
        return await asyncio.to_thread(functools.partial(self.purge, criteria, mode, before_commit=before_commit))

    async def aedit(
        self,
        subject: str,
        relation: str,
        obj: str,
        new: Triple,
        session: str = "",
        *,
        before_commit: Callable[[CommitResult], object] | None = None,
    ) -> CommitResult:
        """:meth:`edit` in a worker thread (``before_commit`` runs there too), then embed new names."""
        result = await asyncio.to_thread(
            functools.partial(self.edit, subject, relation, obj, new, session, before_commit=before_commit)
        )
        if self.embedder is not None and result.entity_ids:
            await self.embed_entities(result.entity_ids, self.embedder)
        return result

    async def adelete_entity(self, name: str) -> int:
        return await asyncio.to_thread(self.delete_entity, name)

    async def amerge_blocks(self, keep: str, drop: str) -> int:
        return await asyncio.to_thread(self.merge_blocks, keep, drop)

    async def aintrospect(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.introspect)


def _prefixed(what: str, reason: str | None) -> str | None:
    return None if reason is None else f"{what}: {reason}"
