"""The L3 graph store: entities, relations, sentences and media blocks, recalled from memory.

:class:`GraphStore` is the one object the rest of HomeAgent uses. It puts three parts together:

* persistence — a :class:`~homeagent_core.memory.graph.sql.GraphSQL` (SQLite by default, the
  truth: WAL, foreign keys on, versioned schema);
* the write operations — :mod:`~homeagent_core.memory.graph.writes` (name rules, mention counts,
  relation uniqueness, purge, edit, merges), each run in one transaction;
* the mirror — a :class:`~homeagent_core.memory.graph.cache.GraphCache` in memory, where every
  recall runs (CSR adjacency, keyword and vector indexes).

Every write runs in one transaction under one writer lock and then refreshes exactly the rows
it touched in the mirror, so the two never drift (a property test checks that after random
operation sequences and after a reopen). Media are ``memory_blocks`` rows linked
``sentence --contains--> block``; blocks and entity names carry their own vector and the
fingerprint of its space (``vec_model``).

Every relation, sentence, media block and block edge records the ``person`` it came from and
its ``visibility`` (:mod:`homeagent_sdk.visibility`); reads take the reader's
:class:`~homeagent_sdk.visibility.Audience` and filter inside the walk and the SQL (see
:mod:`~homeagent_core.memory.graph.cache`). The default audience of these methods is the
unfiltered maintenance view (:data:`~homeagent_sdk.visibility.EVERYONE`); a turn's code passes
its own (:func:`homeagent_core.memory.audience.audience_of`).

The methods are synchronous (they block on the database); the ``a``-prefixed twins run them in
a worker thread so the event loop never waits on disk. Recall reads only the mirror.

Neighbouring modules: :mod:`~homeagent_core.memory.graph.schema` (tables, migrations, name rules,
purge criteria), :mod:`~homeagent_core.memory.graph.model` (row and result types),
:mod:`~homeagent_core.memory.graph.vectors` (entity and block vectors, re-embedding),
:mod:`~homeagent_core.memory.graph.analytics` (salience, duplicate candidates, paths).
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from homeagent_core.memory.graph import mirror_file
from homeagent_core.memory.graph import vectors as graph_vectors
from homeagent_core.memory.graph import writes as graph_writes
from homeagent_core.memory.graph.adjacency import encode_strings
from homeagent_core.memory.graph.analytics import GraphAnalytics
from homeagent_core.memory.graph.model import Changes, RecallResult
from homeagent_core.memory.graph.schema import (
    DEFAULT_TYPE,
    PURGE_CRITERIA,
    SCHEMA_VERSION,
    check_name,
    purge_where,
)
from homeagent_core.memory.graph.sql import GraphSQL, SQLiteGraphSQL, count_rows
from homeagent_core.memory.graph.writes import CommitResult
from homeagent_core.workers import run_blocking
from homeagent_sdk.embeddings import text_language
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.types import Triple
from homeagent_sdk.visibility import EVERYONE, PRIVATE, Audience, sql_filter

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


class GraphStore:
    """Graph memory: rows in a SQL database, recall from an in-memory mirror.

    ``path`` is the database file (created with its folder) or ``":memory:"``. ``embedder``
    (optional) embeds entity names when they are committed through :meth:`acommit`. ``sql``
    replaces the SQLite file with another :class:`GraphSQL` (``path`` is then ignored).

    A SQLite file of at least ``save_mirror_from`` active relations gets its mirror's compact
    form saved beside it (``<path>.mirror``, :mod:`~homeagent_core.memory.graph.mirror_file`):
    in a background thread after a load from the database, and on :meth:`close`. The next open
    reads it when its stamp matches the database; ``mirror_loaded_from`` says which was used.

    Raises:
        MemoryStoreError: the file is not a SQLite database, or was written by a newer schema.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embedder: EmbeddingProvider | None = None,
        clock: Callable[[], float] = time.time,
        sql: GraphSQL | None = None,
        save_mirror_from: int = 20_000,
    ) -> None:
        self.embedder = embedder
        #: The owner's name once known (:meth:`claim_for_owner`): what a write with no person is stored under.
        self.owner = ""
        self._clock = clock
        self._write_lock = threading.Lock()
        self.sql: GraphSQL = sql if sql is not None else SQLiteGraphSQL(path)
        self.path = self.sql.path
        try:
            self.cache = self.sql.load_mirror()
        except sqlite3.DatabaseError as exc:
            self.sql.close()
            raise MemoryStoreError(
                f"cannot open graph memory {self.path}: {exc}. The file is not a HomeAgent "
                "graph database; move it away or point core.memory.graph at another path."
            ) from exc
        self.analytics = GraphAnalytics(self.cache)
        self.sql.follow(self.catch_up)
        self.save_mirror_from = save_mirror_from
        self._save_lock = threading.Lock()
        self._saver: threading.Thread | None = None
        self._closed = False
        local = self.sql if isinstance(self.sql, SQLiteGraphSQL) and self.sql.mirror_file is not None else None
        self._saved_stamp = local.loaded_stamp if local is not None and self.cache.loaded_from == "file" else None
        if local is not None and self._saved_stamp is None and len(self.cache.relations) >= save_mirror_from:
            self._saver = threading.Thread(target=self._save_in_background, name="graph-mirror-save", daemon=True)
            self._saver.start()

    @property
    def mirror_loaded_from(self) -> str:
        """Where the mirror's compact form came from at open: ``"file"`` or ``"database"``."""
        return self.cache.loaded_from

    def save_mirror(self) -> bool:
        """Write the mirror file now unless it already holds this state; returns whether it was written.

        The arrays are copied under the write lock (with the stamp of the database at that
        moment) and written outside it. Nothing is written for PostgreSQL or ``":memory:"``.
        """
        sql = self.sql
        if not isinstance(sql, SQLiteGraphSQL) or sql.mirror_file is None:
            return False
        with self._save_lock:
            with self._write_lock:
                stamp = sql.stamp()
                if stamp == self._saved_stamp:
                    return False
                with self.cache.lock:
                    numeric, strings = self.cache.compact.export()
            for name, column in strings.items():
                numeric[name + "_codes"], numeric[name + "_vocab"] = encode_strings(column)
            mirror_file.remove_partial(sql.mirror_file)
            mirror_file.write_mirror(sql.mirror_file, stamp, numeric)
            self._saved_stamp = stamp
            return True

    def _save_in_background(self) -> None:
        """The saver thread's top level: a failure is logged (the file is a cache; the database stays the truth)."""
        try:
            self.save_mirror()
        except Exception:
            mirror_file.log.exception("could not save the graph mirror file for %s", self.path)

    # ----------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Save the mirror file when due, then close the database (waits for a write in progress)."""
        if self._closed:
            return
        self._closed = True
        if self._saver is not None:
            self._saver.join()
        if len(self.cache.relations) >= self.save_mirror_from or self._saved_stamp is not None:
            try:
                self.save_mirror()
            except (OSError, sqlite3.Error, MemoryStoreError) as exc:
                mirror_file.log.warning("could not save the graph mirror file for %s: %s", self.path, exc)
        with self._write_lock:
            self.sql.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def write(self, fn: Callable[[sqlite3.Connection, Changes], T]) -> T:
        """Run ``fn(conn, changes)`` in one transaction, then refresh the touched rows.

        ``fn`` records every id it inserts, updates or deletes in ``changes``; the mirror
        re-reads those rows after the commit. Keyword terms of new entities are stored in the
        same transaction. Used by the social layer for its own tables.
        """
        with self._write_lock:
            result, changes = self.sql.transaction(fn)
            self.cache.apply(changes, self.sql.changed_rows(changes))
            return result

    def catch_up(self) -> None:
        """Apply other writers' commits to the mirror (a database shared by several daemons)."""
        with self._write_lock:
            changes = self.sql.remote_changes()
            if changes is None:  # the others' changes can no longer be replayed one by one
                self.cache = self.sql.load_mirror()
                self.analytics = GraphAnalytics(self.cache)
                return
            self.cache.apply(changes, self.sql.changed_rows(changes))

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` for a read that needs SQL (not the recall path)."""
        with self._write_lock:
            return self.sql.read(fn)

    # ------------------------------------------------------------- writes

    def commit(
        self,
        triples: Iterable[Triple],
        session: str = "",
        *,
        mimes: Mapping[str, str] | None = None,
        batch_id: str | None = None,
        person: str = "",
        visibility: str = PRIVATE,
    ) -> CommitResult:
        """Upsert the triples' entities and relations; invalid triples are skipped with reasons.

        What is written records ``person`` (whom it came from; "" is the owner's: stored under
        :attr:`owner` once known, else as "" until :meth:`claim_for_owner`) and ``visibility``.

        ``triple.media_digests`` must be full sha256 digests (resolve short ones first);
        ``mimes`` optionally maps a digest to its MIME type for new blocks. ``batch_id`` makes
        the commit apply at most once: the id is recorded in the same transaction, and a
        commit with an id already recorded writes nothing and returns ``duplicate=True``
        (a writer replaying its input after a crash counts no mention twice).
        """
        items = list(triples)
        person = person or self.owner
        return self.write(
            lambda conn, ch: graph_writes.commit(
                conn, ch, items, session, mimes or {}, batch_id, self._clock, person, visibility
            )
        )

    def claim_for_owner(self, owner: str, alias: str = "用户") -> int:
        """Make the rows written before there were people ``owner``'s; returns the relations claimed.

        See :func:`~homeagent_core.memory.graph.writes.claim_for_owner`: rows without a person
        become ``owner``'s (private), and the entity ``alias`` becomes the owner's entity.
        """
        if not owner:
            return 0
        self.owner = owner
        return self.write(lambda conn, ch: graph_writes.claim_for_owner(conn, ch, owner, alias, self._clock))

    def prune_batches(self, older_than_s: float) -> int:
        """Forget batch ids recorded more than ``older_than_s`` seconds ago; returns how many."""
        return self.write(lambda conn, _ch: graph_writes.prune_batches(conn, older_than_s, self._clock))

    def merge(self, keep: str, drop: str) -> dict[str, int]:
        """Fold entity ``drop`` into ``keep``: its relations move over, mentions add up.

        Relations that would duplicate one of ``keep``'s keep the higher confidence; relations
        between the two become self-loops and are removed.

        Raises:
            MemoryStoreError: either name is unknown, or both name the same entity.
        """
        return self.write(lambda conn, ch: graph_writes.merge(conn, ch, keep, drop, self._clock))

    def purge(
        self,
        criteria: Mapping[str, Any],
        mode: str = "soft",
        *,
        before_commit: Callable[[int], object] | None = None,
        audience: Audience = EVERYONE,
    ) -> int:
        """Soft- (``mode="soft"``) or hard- (``"hard"``) delete relations matching ``criteria``.

        Only relations ``audience`` may see are purged.

        Criteria keys are :data:`PURGE_CRITERIA`; all given criteria must match. Returns how
        many relations were purged (0 when nothing matched). ``before_commit(count)`` runs
        inside the transaction, after the relations were purged: if it raises, nothing is
        purged (a caller's own follow-up step, e.g. cleaning the conversation log, becomes
        part of one all-or-nothing change).

        Raises:
            MemoryStoreError: no criteria, an unknown key, a bad value, or an unknown mode.
        """
        where, args = purge_where(criteria)
        if not audience.everything:
            cond, extra = sql_filter(audience)
            where, args = f"{where} AND {cond}", [*args, *extra]
        if mode not in ("soft", "hard"):
            raise MemoryStoreError(f"purge mode must be 'soft' or 'hard', got {mode!r}")
        return self.write(
            lambda conn, ch: graph_writes.purge(conn, ch, where, list(args), mode, before_commit, self._clock)
        )

    def edit(
        self,
        subject: str,
        relation: str,
        obj: str,
        new: Triple,
        session: str = "",
        *,
        before_commit: Callable[[CommitResult], object] | None = None,
        audience: Audience = EVERYONE,
    ) -> CommitResult:
        """Replace the relation ``subject -relation-> obj`` (every session) with ``new``.

        Only relations ``audience`` may see are replaced; each keeps its person and visibility.

        ``before_commit(result)`` runs inside the transaction after the replacement; if it
        raises, the relation is left as it was.

        Raises:
            MemoryStoreError: the old relation does not exist, or ``new`` is invalid.
        """
        old = (subject, relation, obj)
        visible = sql_filter(audience, person_col="r.person", visibility_col="r.visibility")
        return self.write(
            lambda conn, ch: graph_writes.edit(conn, ch, old, new, session, before_commit, self._clock, visible)
        )

    def delete_entity(self, name: str) -> int:
        """Delete an entity with all its relations and traits; returns the relations removed.

        Raises:
            MemoryStoreError: the entity is unknown.
        """
        return self.write(lambda conn, ch: graph_writes.delete_entity(conn, ch, name))

    def merge_blocks(self, keep: str, drop: str) -> int:
        """Fold media block ``drop`` into ``keep`` (full digests); returns edges moved.

        Raises:
            MemoryStoreError: a digest is not a block of the graph, or both are the same.
        """
        return self.write(lambda conn, ch: graph_writes.merge_blocks(conn, ch, keep, drop))

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
        audience: Audience = EVERYONE,
    ) -> RecallResult:
        """Recall from the mirror: keyword seeds + vector seeds (top 5) → BFS to ``depth``.

        ``audience`` filters the seeds (before their limits) and the walk: what it may not see
        is never found. Never touches SQLite; safe and cheap to call on the event loop.
        """
        seeds = self.cache.keyword_seeds(keywords, audience=audience)
        if query_vector is not None and fingerprint:
            for eid, score in self.cache.vector_seeds(query_vector, fingerprint, 5, audience):
                if score > 0 and eid not in seeds:
                    seeds.append(eid)
        return self.cache.recall(
            seeds,
            depth=depth,
            max_entities=max_entities,
            max_relations=max_relations,
            exclude=exclude,
            audience=audience,
            seeds_visible=True,  # both seed searches drew them for this audience
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
        audience: Audience = EVERYONE,
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
            audience=audience,
        )

    async def embed_query(self, text: str) -> tuple[npt.NDArray[np.float32] | None, str]:
        """The embedder's vector for ``text`` and its fingerprint, or ``(None, "")``."""
        if self.embedder is None or not text.strip() or not self.embedder.info.serves(text_language(text)):
            return None, ""
        matrix = await self.embedder.embed_texts([text])
        return matrix[0], self.embedder.info.fingerprint

    def introspect(self, audience: Audience = EVERYONE) -> dict[str, Any]:
        """Counts, the most-mentioned entities, relation types and vector coverage.

        With an ``audience``, the figures count only what it may see (relations, and the
        entities, sentences and blocks they reach); the mirror's own sizes are left out.
        """
        out = self.read(lambda conn: count_rows(conn, self.path, audience))
        out["embedder"] = self.embedder.info.fingerprint if self.embedder else None
        if audience.everything:
            out["mirror"] = self.cache.stats()
        return out

    def sql_snapshot(self) -> dict[str, Any]:
        """What SQLite holds, in the shape of :meth:`GraphCache.snapshot` (for checks)."""
        return self.read(lambda _conn: self.sql.snapshot())

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

        See :func:`homeagent_core.memory.graph.vectors.reembed_stale`; ``provider`` defaults to
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
        person: str = "",
        visibility: str = PRIVATE,
    ) -> CommitResult:
        """:meth:`commit` in a ``memory`` pool thread, then embed new entity names (if an embedder)."""
        commit = functools.partial(
            self.commit, list(triples), session, mimes=mimes, batch_id=batch_id, person=person, visibility=visibility
        )
        result = await run_blocking("memory", commit)
        if self.embedder is not None and result.entity_ids:
            await self.embed_entities(result.entity_ids, self.embedder)
        return result

    async def aclaim_for_owner(self, owner: str, alias: str = "用户") -> int:
        return await run_blocking("memory", self.claim_for_owner, owner, alias)

    async def amerge(self, keep: str, drop: str) -> dict[str, int]:
        return await run_blocking("memory", self.merge, keep, drop)

    async def apurge(
        self,
        criteria: Mapping[str, Any],
        mode: str = "soft",
        *,
        before_commit: Callable[[int], object] | None = None,
        audience: Audience = EVERYONE,
    ) -> int:
        """:meth:`purge` in a worker thread (``before_commit`` runs there too)."""
        return await run_blocking(
            "memory", functools.partial(self.purge, criteria, mode, before_commit=before_commit, audience=audience)
        )

    async def aedit(
        self,
        subject: str,
        relation: str,
        obj: str,
        new: Triple,
        session: str = "",
        *,
        before_commit: Callable[[CommitResult], object] | None = None,
        audience: Audience = EVERYONE,
    ) -> CommitResult:
        """:meth:`edit` in a worker thread (``before_commit`` runs there too), then embed new names."""
        result = await run_blocking(
            "memory",
            functools.partial(
                self.edit, subject, relation, obj, new, session, before_commit=before_commit, audience=audience
            ),
        )
        if self.embedder is not None and result.entity_ids:
            await self.embed_entities(result.entity_ids, self.embedder)
        return result

    async def adelete_entity(self, name: str) -> int:
        return await run_blocking("memory", self.delete_entity, name)

    async def amerge_blocks(self, keep: str, drop: str) -> int:
        return await run_blocking("memory", self.merge_blocks, keep, drop)

    async def aintrospect(self, audience: Audience = EVERYONE) -> dict[str, Any]:
        return await run_blocking("memory", self.introspect, audience)
