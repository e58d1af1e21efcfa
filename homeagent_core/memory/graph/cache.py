"""In-memory mirror of the graph store, where every recall runs.

SQLite (:mod:`homeagent_core.memory.graph.store`) is the truth; this module keeps the *active* graph
next to it, loaded once on start and updated write-through by every store operation, so recall
never touches SQL. Under one lock and from the same calls it maintains:

* the rows themselves (entities, sentences, media blocks) by id; active relations are kept only
  as compact columns, and :attr:`GraphCache.relations` reads a relation's row from them;
* the compact numeric form the recall walk reads
  (:class:`~homeagent_core.memory.graph.adjacency.CompactGraph`: CSR adjacency over both edge
  directions with a small write delta, numpy columns, rank orders and the recalled rows built
  so far); the walk and ranking are :mod:`~homeagent_core.memory.graph.recall`;
* a keyword index: entity-name terms (jieba words, CJK bigrams, Latin words, the whole
  lower-cased name) -> entity ids, plus whole name -> ids — the replacement of SQL ``LIKE``
  (a key held by one entity maps to its id, a set is made only once two share it);
* vector indexes (one contiguous float32 matrix per embedding space) for entity-name and
  media-block vectors; a query is one matrix-vector product;
* sentences and media blocks with their ``contains`` edges, so recalled relations carry their
  source sentence and media digests.

A networkx graph is not kept: :meth:`GraphCache.to_networkx` builds one on demand for the
analytics that need it. Start-up reads each table with one streamed query, takes the keyword
terms stored next to each entity (no tokenizer run per name) and builds the CSR arrays in bulk,
or takes the relation columns, CSR and rank orders from a checked mirror file
(:mod:`~homeagent_core.memory.graph.mirror_file`) instead of the relations table.
:meth:`GraphCache.snapshot` cross-checks every derived structure against the rows, so the
property test comparing the mirror with SQLite covers them all.

Every read a turn makes takes its :class:`~homeagent_sdk.visibility.Audience` (default: the
unfiltered maintenance view): keyword and vector seeds are drawn only from entities a visible
relation touches (vector searches mask the rest *before* taking the top k), the walk crosses
only visible relations, and media blocks are searched among those a visible edge or the block's
own marks let the reader see.

All mutation and recall happen under one lock, held only for in-memory work (microseconds),
because store writes run in worker threads while recall runs on the event loop.
"""

from __future__ import annotations

import functools
import gc
import heapq
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from homeagent_core.memory.graph import recall as graph_recall
from homeagent_core.memory.graph.adjacency import CompactGraph, RelationRows, build_multidigraph
from homeagent_core.memory.graph.adjacency import scope_key as graph_scope_key
from homeagent_core.memory.graph.model import (
    BLOCK_COLUMNS,
    EDGE_COLUMNS,
    ENTITY_COLUMNS,
    RELATION_COLUMNS,
    BlockRow,
    ChangedRows,
    Changes,
    EntityRow,
    RecalledEntity,
    RecalledRelation,
    RecallResult,
    RelationRow,
    VectorIndex,
    decode_vector,
)
from homeagent_core.memory.keywords import name_terms
from homeagent_sdk.visibility import EVERYONE, Audience

if TYPE_CHECKING:
    import sqlite3

    import networkx as nx
    import numpy.typing as npt

__all__ = [
    "BLOCK_COLUMNS",
    "ENTITY_COLUMNS",
    "RELATION_COLUMNS",
    "BlockRow",
    "EntityRow",
    "GraphCache",
    "RecallResult",
    "RecalledEntity",
    "RecalledRelation",
    "RelationRow",
    "VectorIndex",
    "build_multidigraph",
]


_EMPTY: frozenset[int] = frozenset()


def _joined(terms: Iterable[str]) -> str:
    """Keyword terms as ``entities.terms`` stores them (tab-joined, sorted)."""
    return "\t".join(sorted(terms))


def _split(text: str) -> list[str]:
    """The keyword terms of a tab-joined string (none for the empty string)."""
    return text.split("\t") if text else []


def _count(text: str) -> int:
    """How many keyword terms a tab-joined string holds."""
    return text.count("\t") + 1 if text else 0


def _post(index: dict[str, int | set[int]], key: str, item: int) -> None:
    """Add ``item`` under ``key``: a lone id is stored as the int itself, two or more as a set."""
    ids = index.setdefault(key, item)
    if isinstance(ids, int):
        if ids != item:
            index[key] = {ids, item}
    else:
        ids.add(item)


def _unpost(index: dict[str, int | set[int]], key: str, item: int) -> None:
    """Remove ``item`` from ``key`` (a set left with one id goes back to the int; none: the key goes)."""
    ids = index.get(key)
    if ids is None:
        return
    if isinstance(ids, int):
        if ids == item:
            del index[key]
        return
    ids.discard(item)
    if len(ids) == 1:
        index[key] = next(iter(ids))
    elif not ids:
        del index[key]


def _ids(index: dict[str, int | set[int]], key: str) -> set[int] | frozenset[int]:
    """The ids under ``key`` as a set (empty when none)."""
    ids = index.get(key)
    if ids is None:
        return _EMPTY
    return {ids} if isinstance(ids, int) else ids


class GraphCache:
    """The mirror of the active graph: rows, compact adjacency, keyword and vector indexes."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.compact = CompactGraph()
        self.entities: dict[int, EntityRow] = {}
        self.ids_by_name: dict[str, int] = {}
        self.relations = RelationRows(self.compact)  # read from the compact columns
        self.loaded_from = "database"  # or "file": the compact form came from a mirror file
        self.file_refused = ""  # why a mirror file handed to load was set aside
        self.sentences: dict[int, str] = {}
        self.blocks: dict[int, BlockRow] = {}
        self.block_edges: dict[int, tuple[int, int, str, str, str]] = {}
        self.blocks_of_sentence: defaultdict[int, set[int]] = defaultdict(set)
        # keyword term -> entity id, or a set of ids once two or more names share the term: most
        # terms belong to one name, and a set each would cost ~200 bytes and an allocation apiece
        self._postings: dict[str, int | set[int]] = {}
        # an entity's keyword terms, tab-joined as ``entities.terms`` stores them: start-up keeps the
        # fetched string instead of building a tuple of shared strings per entity
        self._terms_of: dict[int, str] = {}
        self._by_whole: dict[str, int | set[int]] = {}  # lower-cased name -> id(s), like ``_postings``
        self._entity_vectors: dict[tuple[str, int], VectorIndex] = {}
        self._block_vectors: dict[tuple[str, int], VectorIndex] = {}

    # ----------------------------------------------------------------- loading

    @classmethod
    def load(cls, conn: sqlite3.Connection, saved: dict[str, npt.NDArray[Any]] | None = None) -> GraphCache:
        """Build the mirror from every row SQLite holds (active relations only).

        ``saved`` are the arrays of a mirror file checked against this database
        (:mod:`~homeagent_core.memory.graph.mirror_file`): the relation columns, adjacency and
        ranks then come from them instead of the relations table. Arrays that turn out not to
        fit the entity rows are set aside (``file_refused`` says why) and the table is read.

        Entity rows carry their keyword terms (``entities.terms``); a row without them (written
        by an older version) is tokenised here. Repeated short strings (types, sessions, terms,
        vector spaces) are shared, which keeps the mirror's memory down. The cyclic garbage
        collector is paused while the rows stream in: they form no cycles, and its passes over
        the growing heap would otherwise cost about as much as the load itself.
        """
        paused = gc.isenabled()
        gc.disable()
        try:
            return cls._load(conn, saved)
        finally:
            if paused:
                gc.enable()

    @classmethod
    def _load(cls, conn: sqlite3.Connection, saved: dict[str, npt.NDArray[Any]] | None) -> GraphCache:
        cache = cls()
        shared: dict[str, str] = {}
        share = shared.setdefault
        entities, ids_by_name = cache.entities, cache.ids_by_name
        postings, terms_of, by_whole = cache._postings, cache._terms_of, cache._by_whole
        post, post_whole = postings.setdefault, by_whole.setdefault
        with cache.lock:
            erows = conn.execute(f"SELECT {ENTITY_COLUMNS}, terms FROM entities").fetchall()
            # column-wise, like the relations below: C-level transposes and maps, one Python
            # loop only for the keyword postings
            eid, name, etype, mentions, vector, vec_model, ecreated, eupdated, stored = (
                map(list, zip(*erows, strict=True)) if erows else ([] for _ in range(9))
            )
            del erows
            etype, vec_model = list(map(share, etype, etype)), list(map(share, vec_model, vec_model))
            make_entity = functools.partial(tuple.__new__, EntityRow)
            columns = zip(eid, name, etype, mentions, vector, vec_model, ecreated, eupdated, strict=True)
            entities.update(zip(eid, map(make_entity, columns), strict=True))
            ids_by_name.update(zip(name, eid, strict=True))
            for e, n, text in zip(eid, name, stored, strict=True):
                if not text:
                    text = _joined(name_terms(n))
                terms_of[e] = text
                for term in text.split("\t") if text else ():  # inlined _post (a million calls at start-up)
                    ids = post(term, e)
                    if ids is not e:  # another entity's id (terms are unique per entity) or a set
                        if isinstance(ids, int):
                            postings[term] = {ids, e}
                        else:
                            ids.add(e)
                whole = n.strip().lower()
                ids = post_whole(whole, e)
                if ids is not e:
                    if isinstance(ids, int):
                        by_whole[whole] = {ids, e}
                    else:
                        ids.add(e)
            for e, blob, space in zip(eid, vector, vec_model, strict=True):
                if blob:
                    cache._set_vector(cache._entity_vectors, e, blob, space)
            if saved is not None:
                try:
                    cache.compact.load_saved((eid, name, etype, mentions, eupdated), saved)
                    cache.loaded_from = "file"
                except (KeyError, TypeError, ValueError) as exc:
                    cache.compact = CompactGraph()
                    cache.relations = RelationRows(cache.compact)
                    cache.file_refused = f"its arrays do not fit the database: {exc}"
            if cache.loaded_from != "file":
                cache._load_relations(conn, (eid, name, etype, mentions, eupdated), share)
            for sid, text in conn.execute("SELECT id, text FROM sentences"):
                cache.sentences[sid] = text
            for row in conn.execute(f"SELECT {BLOCK_COLUMNS} FROM memory_blocks"):
                cache.upsert_block(BlockRow(*row))
            for edge in conn.execute(f"SELECT {EDGE_COLUMNS} FROM memory_block_edges"):
                cache.upsert_block_edge(*edge)
        return cache

    def _load_relations(
        self,
        conn: sqlite3.Connection,
        entities: tuple[list[int], list[str], list[str], list[int], list[float]],
        share: Callable[[str, str], str],
    ) -> None:
        """Read the active relations and build the compact form from them and ``entities``."""
        rows = conn.execute(f"SELECT {RELATION_COLUMNS} FROM relations WHERE status = 'active'").fetchall()
        # column-wise: one C-level transpose, then every column in bulk (no per-row Python loop)
        rid, src, dst, rtype, conf, session, sid, _status, created, updated, person, visibility = (
            map(list, zip(*rows, strict=True)) if rows else ([] for _ in range(12))
        )
        del rows
        rtype, session = list(map(share, rtype, rtype)), list(map(share, session, session))
        person, visibility = list(map(share, person, person)), list(map(share, visibility, visibility))
        self.compact.load(
            entities, (rid, src, dst, rtype, conf, session, sid, created, updated, person, visibility)
        )

    # --------------------------------------------------------------- mutation

    def apply(self, ch: Changes, rows: ChangedRows) -> None:
        """Bring every id a write touched up to its committed row (no row: it was deleted)."""
        with self.lock:
            changed = [sid for sid in ch.sentences if self.sentences.get(sid) not in (None, rows.sentences.get(sid))]
            self.compact.forget_sentences(changed)  # recalled relations citing them are built anew
            for sid in ch.sentences:
                if sid in rows.sentences:
                    self.sentences[sid] = rows.sentences[sid]
                else:
                    self._drop_sentence(sid)
            # entities first (new endpoints must exist), removals of entities last
            for eid in ch.entities:
                if eid in rows.entities:
                    self.upsert_entity(*rows.entities[eid])
            for rid in ch.relations:
                if rid in rows.relations:
                    self.upsert_relation(rows.relations[rid])
                else:
                    self.remove_relation(rid)
            for eid in ch.entities:
                if eid not in rows.entities:
                    self.remove_entity(eid)
            for bid in ch.blocks:
                if bid in rows.blocks:
                    self.upsert_block(rows.blocks[bid])
                else:
                    self.remove_block(bid)
            for edge_id in ch.block_edges:
                if edge_id in rows.block_edges:
                    self.upsert_block_edge(edge_id, *rows.block_edges[edge_id])
                else:
                    self.remove_block_edge(edge_id)

    def upsert_entity(self, row: EntityRow, terms: Iterable[str] | None = None) -> None:
        """Add or update an entity; ``terms`` are its stored keyword terms (computed if None)."""
        with self.lock:
            old = self.entities.get(row.id)
            if old is not None and old.name != row.name:
                self._unindex_name(row.id, old.name)
                self.ids_by_name.pop(old.name, None)
            self.entities[row.id] = row
            self.ids_by_name[row.name] = row.id
            self.compact.set_entity(row.id, row.name, row.type, row.mention_count, row.updated_at)
            if row.id not in self._terms_of:
                self._index_name(row.id, row.name, tuple(terms) if terms else tuple(name_terms(row.name)))
            self._set_vector(self._entity_vectors, row.id, row.vector, row.vec_model)

    def remove_entity(self, entity_id: int) -> None:
        with self.lock:
            row = self.entities.pop(entity_id, None)
            if row is None:
                return
            self.compact.drop_entity(entity_id)
            self.ids_by_name.pop(row.name, None)
            self._unindex_name(entity_id, row.name)
            for index in self._entity_vectors.values():
                index.remove(entity_id)

    def upsert_relation(self, row: RelationRow) -> None:
        """Add or update an active relation; a non-active row is removed from the mirror."""
        with self.lock:
            if row.status != "active":
                self.remove_relation(row.id)
                return
            self.compact.set_relation(
                row.id,
                row.source_id,
                row.target_id,
                row.type,
                row.confidence,
                row.session,
                row.sentence_id,
                row.created_at,
                row.updated_at,
                row.person,
                row.visibility,
            )

    def remove_relation(self, relation_id: int) -> None:
        with self.lock:
            self.compact.drop_relation(relation_id)

    def upsert_sentence(self, sentence_id: int, text: str) -> None:
        with self.lock:
            if self.sentences.get(sentence_id, text) != text:
                self.compact.forget_sentences([sentence_id])
            self.sentences[sentence_id] = text

    def remove_sentence(self, sentence_id: int) -> None:
        with self.lock:
            if sentence_id in self.sentences:
                self.compact.forget_sentences([sentence_id])
            self._drop_sentence(sentence_id)

    def _drop_sentence(self, sentence_id: int) -> None:
        with self.lock:
            self.sentences.pop(sentence_id, None)
            for edge_id in [e for e, v in self.block_edges.items() if v[0] == sentence_id]:
                self.remove_block_edge(edge_id)

    def upsert_block(self, row: BlockRow) -> None:
        with self.lock:
            self.blocks[row.id] = row
            self._set_vector(self._block_vectors, row.id, row.vector, row.vec_model)

    def remove_block(self, block_id: int) -> None:
        with self.lock:
            self.blocks.pop(block_id, None)
            for index in self._block_vectors.values():
                index.remove(block_id)
            for edge_id in [e for e, v in self.block_edges.items() if v[1] == block_id]:
                self.remove_block_edge(edge_id)

    def upsert_block_edge(
        self, edge_id: int, sentence_id: int, block_id: int, etype: str, person: str = "", visibility: str = "private"
    ) -> None:
        with self.lock:
            self.remove_block_edge(edge_id)
            self.block_edges[edge_id] = (sentence_id, block_id, etype, person, visibility)
            self.blocks_of_sentence[sentence_id].add(block_id)

    def remove_block_edge(self, edge_id: int) -> None:
        with self.lock:
            old = self.block_edges.pop(edge_id, None)
            if old is None:
                return
            sid, bid = old[0], old[1]
            if not any(v[0] == sid and v[1] == bid for v in self.block_edges.values()):
                self.blocks_of_sentence[sid].discard(bid)
                if not self.blocks_of_sentence[sid]:
                    del self.blocks_of_sentence[sid]

    def _index_name(self, entity_id: int, name: str, terms: tuple[str, ...]) -> None:
        self._terms_of[entity_id] = _joined(terms)
        for term in terms:
            _post(self._postings, term, entity_id)
        _post(self._by_whole, name.strip().lower(), entity_id)

    def _unindex_name(self, entity_id: int, name: str) -> None:
        for term in _split(self._terms_of.pop(entity_id, "")):
            _unpost(self._postings, term, entity_id)
        _unpost(self._by_whole, name.strip().lower(), entity_id)

    @staticmethod
    def _set_vector(
        spaces: dict[tuple[str, int], VectorIndex],
        item_id: int,
        blob: bytes | None,
        vec_model: str,
    ) -> None:
        vector = decode_vector(blob)
        for key, index in spaces.items():
            if vector is None or key != (vec_model, len(vector)):
                index.remove(item_id)
        if vector is None or not vec_model:
            return
        key = (vec_model, len(vector))
        if key not in spaces:
            spaces[key] = VectorIndex(len(vector))
        spaces[key].set(item_id, vector)

    # ------------------------------------------------------------------ reads

    def entity(self, name: str) -> EntityRow | None:
        with self.lock:
            eid = self.ids_by_name.get(name)
            return None if eid is None else self.entities[eid]

    def visible_entity(self, entity_id: int, audience: Audience) -> bool:
        """Whether a relation ``audience`` may see touches the entity (any present one for everyone)."""
        with self.lock:
            if audience.everything:
                return entity_id in self.entities
            allowed = self.compact.scope_codes(audience)
            rels, _ = self.compact.expand(np.asarray([entity_id], dtype=np.int64), allowed)
            return len(rels) > 0

    def keyword_seeds(self, keywords: list[str], limit: int = 10, audience: Audience = EVERYONE) -> list[int]:
        """Entity ids whose names match ``keywords``, best first.

        Only entities a relation ``audience`` may see touches are candidates (before the limit).

        A keyword matches a name when every term of the keyword is a term of the name (the
        keyword is inside the name) or every term of the name is a term of the keyword (the
        name is inside the keyword). Score = shared terms / the larger term count, summed
        over keywords; ties go to the more-mentioned, then the older entity.

        The first case is the intersection of the keyword terms' postings (smallest first);
        the second needs a name whose whole lower-cased form is one of the keyword's terms, so
        its candidates come from the whole-name map — no scan over every posting hit.
        """
        with self.lock:
            scores: dict[int, float] = {}
            for keyword in keywords:
                kterms = name_terms(keyword)
                k = len(kterms)
                if not k:
                    continue
                inside: set[int] | frozenset[int] = _EMPTY
                posts = [_ids(self._postings, t) for t in kterms]
                if all(posts):
                    posts.sort(key=len)
                    inside = posts[0].intersection(*posts[1:])
                    for eid in inside:
                        scores[eid] = scores.get(eid, 0.0) + k / max(k, _count(self._terms_of[eid]))
                for term in kterms:
                    for eid in _ids(self._by_whole, term):
                        terms = _split(self._terms_of[eid])
                        if eid not in inside and kterms.issuperset(terms):
                            scores[eid] = scores.get(eid, 0.0) + len(terms) / k
            if not audience.everything:
                allowed = self.compact.scope_codes(audience)
                expand = self.compact.expand
                scores = {
                    e: v for e, v in scores.items() if len(expand(np.asarray([e], dtype=np.int64), allowed)[0])
                }
            ranked = heapq.nlargest(
                limit, scores.items(), key=lambda kv: (kv[1], self.entities[kv[0]].mention_count, -kv[0])
            )
            return [eid for eid, _ in ranked]

    def vector_seeds(
        self, query: npt.NDArray[np.float32], fingerprint: str, k: int = 5, audience: Audience = EVERYONE
    ) -> list[tuple[int, float]]:
        """Entity ids nearest to ``query`` among vectors of the same space only.

        With an ``audience``, entities no visible relation touches are masked out before the
        top ``k`` is taken (k visible entities when there are that many).
        """
        with self.lock:
            index = self._entity_vectors.get((fingerprint, int(query.shape[-1])))
            if index is None:
                return []
            if audience.everything:
                return index.search(query, k)
            return index.search(query, k, self.compact.visible_entities(self.compact.scope_codes(audience)))

    def visible_blocks(self, audience: Audience) -> npt.NDArray[np.bool_]:
        """Per block id: whether ``audience`` may see the block (its own marks or one of its edges')."""
        with self.lock:
            size = max(self.blocks, default=-1) + 1
            out = np.zeros(size, dtype=bool)
            for bid, row in self.blocks.items():
                if audience.sees(row.person, row.visibility):
                    out[bid] = True
            for _sid, bid, _type, person, visibility in self.block_edges.values():
                if bid < size and not out[bid] and audience.sees(person, visibility):
                    out[bid] = True
            return out

    def search_blocks(
        self, query: npt.NDArray[np.float32], fingerprint: str, k: int = 5, audience: Audience = EVERYONE
    ) -> list[tuple[str, float]]:
        """Media digests nearest to ``query`` among block vectors of the same space only.

        Blocks ``audience`` may not see are masked out before the top ``k`` is taken.
        """
        with self.lock:
            index = self._block_vectors.get((fingerprint, int(query.shape[-1])))
            if index is None:
                return []
            mask = None if audience.everything else self.visible_blocks(audience)
            return [(self.blocks[bid].digest, score) for bid, score in index.search(query, k, mask)]

    def recall(
        self,
        seeds: list[int],
        *,
        depth: int = 2,
        max_entities: int = 30,
        max_relations: int = 50,
        max_visit: int = 2000,
        exclude: set[str] | None = None,
        audience: Audience = EVERYONE,
        seeds_visible: bool = False,
    ) -> RecallResult:
        """Breadth-first walk (both edge directions) from ``seeds`` up to ``depth`` hops.

        Entities rank by (distance, mention count, recency, id); relations by (distance,
        confidence, recency, id); a relation's distance is that of its nearer endpoint.
        ``max_visit`` bounds the walk around hub entities (the entities first reached are
        kept). ``exclude`` names are walked through but left out of the result.

        The walk goes level by level over the compact adjacency (one vectorised gather per
        level, visit stamps instead of sets) and stops as soon as the levels found so far
        already fill ``max_entities`` and ``max_relations``: deeper levels rank below every
        entity and relation found, so the result is the same as walking the full depth and
        cutting the ranked lists. Each list is then sorted by one int64 key per item (see
        :mod:`~homeagent_core.memory.graph.recall`), and only the rows that make the cut are built.

        ``audience`` filters inside the walk: seeds no visible relation touches are dropped (unless
        ``seeds_visible`` says the caller drew them for this audience already) and only visible
        relations are crossed.
        """
        with self.lock:
            allowed = self.compact.scope_codes(audience)
            if allowed is not None and not seeds_visible:
                expand = self.compact.expand
                seeds = [
                    s for s in seeds if s in self.entities and len(expand(np.asarray([s], dtype=np.int64), allowed)[0])
                ]
            return graph_recall.recall(self, seeds, depth, max_entities, max_relations, max_visit, exclude, allowed)

    def to_networkx(self, audience: Audience = EVERYONE) -> nx.MultiDiGraph[int]:
        """A networkx ``MultiDiGraph`` of the active graph, built now (nodes = entity ids, edges keyed by
        relation id, carrying ``person`` and ``visibility``); a copy, so later writes do not show in it.
        With an ``audience``, only what it may see."""
        with self.lock:
            return self.compact.to_networkx(self.compact.scope_codes(audience))

    def out_edges(self, entity_id: int, audience: Audience = EVERYONE) -> list[tuple[int, int, int]]:
        """``(entity_id, target, relation id)`` of the active relations leaving an entity."""
        with self.lock:
            return self.compact.out_edges(entity_id, self.compact.scope_codes(audience))

    def in_edges(self, entity_id: int, audience: Audience = EVERYONE) -> list[tuple[int, int, int]]:
        """``(source, entity_id, relation id)`` of the active relations entering an entity."""
        with self.lock:
            return self.compact.in_edges(entity_id, self.compact.scope_codes(audience))

    def neighbours(self, entity_id: int, audience: Audience = EVERYONE) -> set[int]:
        """Entities related to ``entity_id`` in either direction (itself too, for a self-loop)."""
        with self.lock:
            return {other for other, _ in self.compact.incident(entity_id, self.compact.scope_codes(audience))}

    def digests(self, sentence_id: int | None) -> list[str]:
        """Digests of the media blocks a sentence contains, sorted."""
        blocks = self.blocks_of_sentence.get(sentence_id) if sentence_id is not None else None
        return sorted(self.blocks[b].digest for b in blocks) if blocks else []

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {
                "entities": len(self.entities),
                "relations": len(self.relations),
                "sentences": len(self.sentences),
                "blocks": len(self.blocks),
                "keyword_terms": len(self._postings),
                "entity_vectors": sum(len(i) for i in self._entity_vectors.values()),
                "block_vectors": sum(len(i) for i in self._block_vectors.values()),
            }

    def _check_compact(self) -> None:
        """Raise AssertionError unless the compact form equals one rebuilt from the rows."""
        g = self.compact
        expected = sorted(
            [(r.source_id, r.target_id, r.id) for r in self.relations.values()]
            + [(r.target_id, r.source_id, r.id) for r in self.relations.values() if r.source_id != r.target_id]
        )
        if sorted(g.edges()) != expected:
            raise AssertionError("compact adjacency disagrees with the relation rows")
        if set(g.live_relations().tolist()) != set(self.relations) or g.n_live != len(self.relations):
            raise AssertionError("compact relation columns disagree with the relation rows")
        scope_key = graph_scope_key
        if any(g.scope[r.id] != g.scopes.get(scope_key(r.person, r.visibility)) for r in self.relations.values()):
            raise AssertionError("a relation's scope code disagrees with its person and visibility")
        if not all(g.present[r.source_id] and g.present[r.target_id] for r in self.relations.values()):
            raise AssertionError("a relation's endpoint is not an entity of the mirror")
        if set(np.flatnonzero(g.present).tolist()) != set(self.entities):
            raise AssertionError("compact entity columns disagree with the entity rows")
        for e in self.entities.values():
            i = e.id
            if (g.name[i], g.type[i], int(g.mentions[i]), float(g.updated[i])) != (
                e.name,
                e.type,
                e.mention_count,
                e.updated_at,
            ):
                raise AssertionError(f"compact columns of entity {i} disagree with its row")
        graph_recall.check_kept(self)

    def snapshot(self) -> dict[str, Any]:
        """Everything the mirror holds, in the shape :meth:`GraphStore.sql_snapshot` returns.

        Also checks that every derived structure equals one rebuilt from the rows — the
        compact adjacency (CSR and delta, both directions) and its columns, the name map, the
        keyword postings and whole-name map, the vector indexes and the sentence→block map —
        so a test comparing snapshots covers them too.

        Raises:
            AssertionError: a derived structure disagrees with the rows.
        """
        with self.lock:
            self._check_compact()
            if self.ids_by_name != {e.name: e.id for e in self.entities.values()}:
                raise AssertionError("mirror name map disagrees with its entity rows")
            postings: dict[str, set[int]] = {}
            by_whole: dict[str, set[int]] = {}
            for e in self.entities.values():
                text = self._terms_of.get(e.id)
                terms = None if text is None else _split(text)
                if terms is None or len(set(terms)) != len(terms) or set(terms) != name_terms(e.name):
                    raise AssertionError(f"keyword terms of entity {e.id} disagree with its name")
                for t in terms:
                    postings.setdefault(t, set()).add(e.id)
                by_whole.setdefault(e.name.strip().lower(), set()).add(e.id)
            postings_now = {t: _ids(self._postings, t) for t in self._postings}
            by_whole_now = {t: _ids(self._by_whole, t) for t in self._by_whole}
            single = all(  # one id is held as an int, never as a one-member set
                not isinstance(v, set) or len(v) > 1 for v in (*self._postings.values(), *self._by_whole.values())
            )
            if set(self._terms_of) != set(self.entities) or postings_now != postings or by_whole_now != by_whole:
                raise AssertionError("keyword index disagrees with entity rows")
            if not single:
                raise AssertionError("keyword index holds a one-id set where the id itself belongs")
            vec_ids = {i for idx in self._entity_vectors.values() for i in idx.ids()}
            expected = {e.id for e in self.entities.values() if e.vector and e.vec_model}
            if vec_ids != expected:
                raise AssertionError("entity vector index disagrees with entity rows")
            blocks_of: dict[int, set[int]] = {}
            for sid, bid, *_ in self.block_edges.values():
                blocks_of.setdefault(sid, set()).add(bid)
            if dict(self.blocks_of_sentence) != blocks_of:
                raise AssertionError("sentence-to-block map disagrees with block edges")
            return {
                "entities": dict(self.entities),
                "relations": dict(self.relations),
                "sentences": dict(self.sentences),
                "blocks": dict(self.blocks),
                "block_edges": dict(self.block_edges),
            }
