"""In-memory mirror of the graph store, where every recall runs.

SQLite (:mod:`homeagent_core.memory.graph`) is the truth; this module keeps a networkx
``MultiDiGraph`` of the *active* graph next to it, loaded once on start and updated
write-through by every store operation, so recall never touches SQL. Beside the networkx graph
(nodes = entity ids, edges = active relations keyed by relation id) it maintains, under the
same lock and from the same calls:

* a compact adjacency map ``entity id -> {relation id: other endpoint}`` over both edge
  directions — the structure the recall walk reads (one flat dict per node instead of
  networkx's successor/predecessor/key-dict levels);
* a keyword index: entity-name terms (jieba words, CJK bigrams, Latin words, the whole
  lower-cased name) -> entity ids, plus whole name -> ids — the replacement of SQL ``LIKE``;
* vector indexes (one contiguous float32 matrix per embedding space) for entity-name and
  media-block vectors; a query is one matrix-vector product;
* sentences and media blocks with their ``contains`` edges, so recalled relations carry their
  source sentence and media digests.

Start-up reads each table with one streamed query, takes the keyword terms stored next to each
entity (no tokenizer run per name) and fills the networkx dicts in bulk. :meth:`GraphCache.snapshot`
cross-checks every derived structure against the rows, so the property test comparing the
mirror with SQLite covers them all.

All mutation and recall happen under one lock, held only for in-memory work (microseconds),
because store writes run in worker threads while recall runs on the event loop.
"""

from __future__ import annotations

import gc
import heapq
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from itertools import islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from homeagent_core.memory.graph_types import (
    BLOCK_COLUMNS,
    ENTITY_COLUMNS,
    RELATION_COLUMNS,
    BlockRow,
    EntityRow,
    RecalledEntity,
    RecalledRelation,
    RecallResult,
    RelationRow,
    VectorIndex,
    decode_vector,
)
from homeagent_core.memory.keywords import name_terms

if TYPE_CHECKING:
    import sqlite3

    import networkx as nx
    import numpy as np
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
_NO_DIGESTS: list[str] = []  # shared by relations without media, never mutated
_new = tuple.__new__  # builds a named tuple from a ready tuple, skipping its Python __new__
_ID = itemgetter(0)
_E_MENTIONS, _E_UPDATED = itemgetter(3), itemgetter(7)  # EntityRow.mention_count, .updated_at
_R_CONFIDENCE, _R_UPDATED = itemgetter(4), itemgetter(9)  # RelationRow.confidence, .updated_at


def _rank(rows: list[Any], first: Callable[[Any], Any], second: Callable[[Any], Any]) -> None:
    """Sort rows in place by ``first`` descending, then ``second`` descending, then id.

    Three stable C-level sorts (least significant key first) instead of one sort with a
    Python key function: no per-row tuple is built.
    """
    if len(rows) > 1:
        rows.sort(key=_ID)
        rows.sort(key=second, reverse=True)
        rows.sort(key=first, reverse=True)


def build_multidigraph(nodes: Iterable[int], edges: Iterable[tuple[int, int, int]]) -> nx.MultiDiGraph[int]:
    """A networkx ``MultiDiGraph`` with ``nodes`` and keyed ``edges`` ``(u, v, key)``, built in bulk.

    ``add_edges_from`` costs ~30 µs per edge on a multigraph (it builds views per edge); this
    fills the graph's adjacency dicts directly, in the exact shape ``add_edge`` leaves them
    (``succ[u][v]`` and ``pred[v][u]`` share one key dict), when the graph uses plain dicts;
    otherwise it falls back to the public methods.
    """
    import networkx as nx

    g: nx.MultiDiGraph[int] = nx.MultiDiGraph()
    factories = ("node_attr_dict", "adjlist_inner_dict", "edge_key_dict", "edge_attr_dict")
    plain = all(getattr(g, f + "_factory", None) is dict for f in factories)
    if not plain or getattr(g, "_adj", None) is not getattr(g, "_succ", 0):
        g.add_nodes_from(nodes)
        g.add_edges_from(edges)
        return g
    node, succ, pred = g._node, g._succ, g._pred
    for n in nodes:
        node[n] = {}
        succ[n] = {}
        pred[n] = {}
    for u, v, key in edges:
        try:
            out, inc = succ[u], pred[v]
        except KeyError:  # an endpoint not among ``nodes``: add it as add_edge would
            for n in (u, v):
                if n not in succ:
                    node[n], succ[n], pred[n] = {}, {}, {}
            out, inc = succ[u], pred[v]
        keys = out.get(v)
        if keys is None:
            keys = out[v] = inc[u] = {}  # one key dict shared by both directions
        keys[key] = {}
    return g


class GraphCache:
    """The networkx mirror of the active graph plus adjacency, keyword and vector indexes."""

    def __init__(self) -> None:
        import networkx as nx

        self.lock = threading.RLock()
        self.graph: nx.MultiDiGraph[int] = nx.MultiDiGraph()
        self.entities: dict[int, EntityRow] = {}
        self.ids_by_name: dict[str, int] = {}
        self.relations: dict[int, RelationRow] = {}
        self.sentences: dict[int, str] = {}
        self.blocks: dict[int, BlockRow] = {}
        self.block_edges: dict[int, tuple[int, int, str]] = {}
        self._blocks_of_sentence: defaultdict[int, set[int]] = defaultdict(set)
        self._adj: dict[int, dict[int, int]] = {}
        self._postings: dict[str, set[int]] = {}
        self._terms_of: dict[int, tuple[str, ...]] = {}
        self._by_whole: dict[str, set[int]] = {}
        self._entity_vectors: dict[tuple[str, int], VectorIndex] = {}
        self._block_vectors: dict[tuple[str, int], VectorIndex] = {}

    # ----------------------------------------------------------------- loading

    @classmethod
    def load(cls, conn: sqlite3.Connection) -> GraphCache:
        """Build the mirror from every row SQLite holds (active relations only).

        Entity rows carry their keyword terms (``entities.terms``); a row without them (written
        by an older version) is tokenised here. Repeated short strings (types, sessions, terms,
        vector spaces) are shared, which keeps the mirror's memory down. The cyclic garbage
        collector is paused while the rows stream in: they form no cycles, and its passes over
        the growing heap would otherwise cost about as much as the load itself.
        """
        paused = gc.isenabled()
        gc.disable()
        try:
            return cls._load(conn)
        finally:
            if paused:
                gc.enable()

    @classmethod
    def _load(cls, conn: sqlite3.Connection) -> GraphCache:
        cache = cls()
        shared: dict[str, str] = {}
        share = shared.setdefault
        entities, ids_by_name, adj = cache.entities, cache.ids_by_name, cache._adj
        postings, terms_of, by_whole = cache._postings, cache._terms_of, cache._by_whole
        with cache.lock:
            for eid, name, etype, mentions, vector, vec_model, created, updated, stored in conn.execute(
                f"SELECT {ENTITY_COLUMNS}, terms FROM entities"
            ):
                vec_model = share(vec_model, vec_model)
                row = EntityRow(eid, name, share(etype, etype), mentions, vector, vec_model, created, updated)
                entities[eid] = row
                ids_by_name[name] = eid
                adj[eid] = {}
                if stored:
                    parts = stored.split("\t")
                    terms = tuple(map(share, parts, parts))
                else:
                    terms = tuple(name_terms(name))
                terms_of[eid] = terms
                for term in terms:
                    ids = postings.get(term)
                    if ids is None:
                        postings[term] = {eid}
                    else:
                        ids.add(eid)
                whole = name.strip().lower()
                ids = by_whole.get(whole)
                if ids is None:
                    by_whole[whole] = {eid}
                else:
                    ids.add(eid)
                if vector:
                    cache._set_vector(cache._entity_vectors, eid, vector, row.vec_model)
            relations = cache.relations
            make = tuple.__new__
            edges: list[tuple[int, int, int]] = []
            add_edge = edges.append
            for rid, src, dst, rtype, conf, session, sid, _status, created, updated in conn.execute(
                f"SELECT {RELATION_COLUMNS} FROM relations WHERE status = 'active'"
            ):
                rtype, session = share(rtype, rtype), share(session, session)
                values = (rid, src, dst, rtype, conf, session, sid, "active", created, updated)
                relations[rid] = make(RelationRow, values)
                adj[src][rid] = dst
                adj[dst][rid] = src
                add_edge((src, dst, rid))
            cache.graph = build_multidigraph(entities, edges)
            del edges
            for sid, text in conn.execute("SELECT id, text FROM sentences"):
                cache.sentences[sid] = text
            for row in conn.execute(f"SELECT {BLOCK_COLUMNS} FROM memory_blocks"):
                cache.upsert_block(BlockRow(*row))
            for edge in conn.execute("SELECT id, sentence_id, block_id, type FROM memory_block_edges"):
                cache.upsert_block_edge(*edge)
        return cache

    # --------------------------------------------------------------- mutation

    def upsert_entity(self, row: EntityRow, terms: Iterable[str] | None = None) -> None:
        """Add or update an entity; ``terms`` are its stored keyword terms (computed if None)."""
        with self.lock:
            old = self.entities.get(row.id)
            if old is not None and old.name != row.name:
                self._unindex_name(row.id, old.name)
                self.ids_by_name.pop(old.name, None)
            self.entities[row.id] = row
            self.ids_by_name[row.name] = row.id
            if row.id not in self._adj:
                self._adj[row.id] = {}
                self.graph.add_node(row.id)
            if row.id not in self._terms_of:
                self._index_name(row.id, row.name, tuple(terms) if terms else tuple(name_terms(row.name)))
            self._set_vector(self._entity_vectors, row.id, row.vector, row.vec_model)

    def remove_entity(self, entity_id: int) -> None:
        with self.lock:
            row = self.entities.pop(entity_id, None)
            if row is None:
                return
            for rid, other in self._adj.pop(entity_id, {}).items():
                self.relations.pop(rid, None)
                if other != entity_id:
                    self._adj[other].pop(rid, None)
            if self.graph.has_node(entity_id):
                self.graph.remove_node(entity_id)
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
            old = self.relations.get(row.id)
            if old is not None and (old.source_id, old.target_id) != (row.source_id, row.target_id):
                self.remove_relation(row.id)
            self.relations[row.id] = row
            self.graph.add_edge(row.source_id, row.target_id, key=row.id)
            self._adj.setdefault(row.source_id, {})[row.id] = row.target_id
            self._adj.setdefault(row.target_id, {})[row.id] = row.source_id

    def remove_relation(self, relation_id: int) -> None:
        with self.lock:
            old = self.relations.pop(relation_id, None)
            if old is None:
                return
            if self.graph.has_edge(old.source_id, old.target_id, relation_id):
                self.graph.remove_edge(old.source_id, old.target_id, key=relation_id)
            for end in (old.source_id, old.target_id):
                nbrs = self._adj.get(end)
                if nbrs is not None:
                    nbrs.pop(relation_id, None)

    def upsert_sentence(self, sentence_id: int, text: str) -> None:
        with self.lock:
            self.sentences[sentence_id] = text

    def remove_sentence(self, sentence_id: int) -> None:
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

    def upsert_block_edge(self, edge_id: int, sentence_id: int, block_id: int, etype: str) -> None:
        with self.lock:
            self.remove_block_edge(edge_id)
            self.block_edges[edge_id] = (sentence_id, block_id, etype)
            self._blocks_of_sentence[sentence_id].add(block_id)

    def remove_block_edge(self, edge_id: int) -> None:
        with self.lock:
            old = self.block_edges.pop(edge_id, None)
            if old is None:
                return
            sid, bid, _ = old
            if not any(v[0] == sid and v[1] == bid for v in self.block_edges.values()):
                self._blocks_of_sentence[sid].discard(bid)
                if not self._blocks_of_sentence[sid]:
                    del self._blocks_of_sentence[sid]

    def _index_name(self, entity_id: int, name: str, terms: tuple[str, ...]) -> None:
        self._terms_of[entity_id] = terms
        for term in terms:
            self._postings.setdefault(term, set()).add(entity_id)
        self._by_whole.setdefault(name.strip().lower(), set()).add(entity_id)

    def _unindex_name(self, entity_id: int, name: str) -> None:
        for term in self._terms_of.pop(entity_id, ()):
            ids = self._postings.get(term)
            if ids is not None:
                ids.discard(entity_id)
                if not ids:
                    del self._postings[term]
        whole = name.strip().lower()
        ids = self._by_whole.get(whole)
        if ids is not None:
            ids.discard(entity_id)
            if not ids:
                del self._by_whole[whole]

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

    def keyword_seeds(self, keywords: list[str], limit: int = 10) -> list[int]:
        """Entity ids whose names match ``keywords``, best first.

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
                posts = [self._postings.get(t, _EMPTY) for t in kterms]
                if all(posts):
                    posts.sort(key=len)
                    inside = posts[0].intersection(*posts[1:])
                    for eid in inside:
                        scores[eid] = scores.get(eid, 0.0) + k / max(k, len(self._terms_of[eid]))
                for term in kterms:
                    for eid in self._by_whole.get(term, _EMPTY):
                        terms = self._terms_of[eid]
                        if eid not in inside and kterms.issuperset(terms):
                            scores[eid] = scores.get(eid, 0.0) + len(terms) / k
            ranked = heapq.nlargest(
                limit, scores.items(), key=lambda kv: (kv[1], self.entities[kv[0]].mention_count, -kv[0])
            )
            return [eid for eid, _ in ranked]

    def vector_seeds(self, query: npt.NDArray[np.float32], fingerprint: str, k: int = 5) -> list[tuple[int, float]]:
        """Entity ids nearest to ``query`` among vectors of the same space only."""
        with self.lock:
            index = self._entity_vectors.get((fingerprint, int(query.shape[-1])))
            return [] if index is None else index.search(query, k)

    def search_blocks(self, query: npt.NDArray[np.float32], fingerprint: str, k: int = 5) -> list[tuple[str, float]]:
        """Media digests nearest to ``query`` among block vectors of the same space only."""
        with self.lock:
            index = self._block_vectors.get((fingerprint, int(query.shape[-1])))
            if index is None:
                return []
            return [(self.blocks[bid].digest, score) for bid, score in index.search(query, k)]

    def recall(
        self,
        seeds: list[int],
        *,
        depth: int = 2,
        max_entities: int = 30,
        max_relations: int = 50,
        max_visit: int = 2000,
        exclude: set[str] | None = None,
    ) -> RecallResult:
        """Breadth-first walk (both edge directions) from ``seeds`` up to ``depth`` hops.

        Entities rank by (distance, mention count, recency, id); relations by (distance,
        confidence, recency, id); a relation's distance is that of its nearer endpoint.
        ``max_visit`` bounds the walk around hub entities. ``exclude`` names are walked
        through but left out of the result.

        The walk goes level by level over the compact adjacency map and stops as soon as the
        levels found so far already fill ``max_entities`` and ``max_relations``: deeper levels
        rank below every entity and relation found, so the result is the same as walking the
        full depth and cutting the ranked lists.
        """
        with self.lock:
            entities, adj = self.entities, self._adj
            skip = exclude or set()
            level = [s for s in dict.fromkeys(seeds) if s in entities]
            seen = set(level)
            ent_levels: list[list[int]] = [level]
            rel_levels: list[list[int]] = []
            n_ent = sum(1 for e in level if entities[e].name not in skip)
            n_rel = 0
            # relation id -> the endpoint it was reached towards, in order of first sight: each
            # level's update() runs in C, and the relations it adds come after ``before``
            reached: dict[int, int] = {}
            d = 0
            while level and d < depth and (n_ent < max_entities or n_rel < max_relations):
                before = len(reached)
                update = reached.update
                for node in level:
                    update(adj[node])
                rels = list(islice(reached, before, None))
                # a relation reached again from its other end within this level links two
                # nodes of this level, both already seen: overwritten values lose nothing
                nxt = [e for e in dict.fromkeys(islice(reached.values(), before, None)) if e not in seen]
                room = max_visit - len(seen)
                if len(nxt) > room:
                    nxt = nxt[: max(room, 0)]
                seen.update(nxt)
                rel_levels.append(rels)
                n_rel += len(rels)
                d += 1
                ent_levels.append(nxt)
                n_ent += sum(1 for e in nxt if entities[e].name not in skip) if skip else len(nxt)
                level = nxt
            out_entities: list[RecalledEntity] = []
            for d, ids in enumerate(ent_levels):
                need = max_entities - len(out_entities)
                if need <= 0:
                    break
                rows = [entities[e] for e in ids]
                if skip:
                    rows = [e for e in rows if e.name not in skip]
                _rank(rows, _E_MENTIONS, _E_UPDATED)
                out_entities += [_new(RecalledEntity, (e[1], e[2], e[3], d, e[7])) for e in rows[:need]]
            out_relations: list[RecalledRelation] = []
            relations, sentences = self.relations, self.sentences
            blocks_of = self._blocks_of_sentence
            for d, ids in enumerate(rel_levels):
                need = max_relations - len(out_relations)
                if need <= 0:
                    break
                rrows = [relations[r] for r in ids]
                _rank(rrows, _R_CONFIDENCE, _R_UPDATED)
                out_relations += [
                    _new(
                        RecalledRelation,
                        (
                            entities[r[1]][1],
                            entities[r[2]][1],
                            r[3],
                            r[4],
                            r[5],
                            d,
                            r[9],
                            sentences.get(r[6], "") if r[6] is not None else "",
                            self._digests(r[6]) if r[6] in blocks_of else _NO_DIGESTS,
                        ),
                    )
                    for r in rrows[:need]
                ]
            return RecallResult(
                entities=out_entities,
                relations=out_relations,
                seeds=[entities[s].name for s in seeds if s in entities],
            )

    def _digests(self, sentence_id: int | None) -> list[str]:
        """Digests of the media blocks a sentence contains, sorted."""
        blocks = self._blocks_of_sentence.get(sentence_id) if sentence_id is not None else None
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

    def snapshot(self) -> dict[str, Any]:
        """Everything the mirror holds, in the shape :meth:`GraphStore.sql_snapshot` returns.

        Also checks that every derived structure equals one rebuilt from the rows — the
        networkx graph (both directions), the adjacency map, the name map, the keyword
        postings and whole-name map, the vector indexes and the sentence→block map — so a test
        comparing snapshots covers them too.

        Raises:
            AssertionError: a derived structure disagrees with the rows.
        """
        with self.lock:
            rel_edges = {(r.source_id, r.target_id, r.id) for r in self.relations.values()}
            if set(self.graph.edges(keys=True)) != rel_edges or len(rel_edges) != self.graph.number_of_edges():
                raise AssertionError("mirror graph edges disagree with its relation rows")
            if {(u, v, k) for u, v, k in self.graph.in_edges(keys=True)} != rel_edges:
                raise AssertionError("mirror graph predecessors disagree with its successors")
            if set(self.graph.nodes) != set(self.entities):
                raise AssertionError("mirror graph nodes disagree with its entity rows")
            adj: dict[int, dict[int, int]] = {eid: {} for eid in self.entities}
            for r in self.relations.values():
                adj[r.source_id][r.id] = r.target_id
                adj[r.target_id][r.id] = r.source_id
            if self._adj != adj:
                raise AssertionError("mirror adjacency map disagrees with its relation rows")
            if self.ids_by_name != {e.name: e.id for e in self.entities.values()}:
                raise AssertionError("mirror name map disagrees with its entity rows")
            postings: dict[str, set[int]] = {}
            by_whole: dict[str, set[int]] = {}
            for e in self.entities.values():
                terms = self._terms_of.get(e.id)
                if terms is None or len(set(terms)) != len(terms) or set(terms) != name_terms(e.name):
                    raise AssertionError(f"keyword terms of entity {e.id} disagree with its name")
                for t in terms:
                    postings.setdefault(t, set()).add(e.id)
                by_whole.setdefault(e.name.strip().lower(), set()).add(e.id)
            if set(self._terms_of) != set(self.entities) or self._postings != postings or self._by_whole != by_whole:
                raise AssertionError("keyword index disagrees with entity rows")
            vec_ids = {i for idx in self._entity_vectors.values() for i in idx.ids()}
            expected = {e.id for e in self.entities.values() if e.vector and e.vec_model}
            if vec_ids != expected:
                raise AssertionError("entity vector index disagrees with entity rows")
            blocks_of: dict[int, set[int]] = {}
            for sid, bid, _ in self.block_edges.values():
                blocks_of.setdefault(sid, set()).add(bid)
            if dict(self._blocks_of_sentence) != blocks_of:
                raise AssertionError("sentence-to-block map disagrees with block edges")
            return {
                "entities": dict(self.entities),
                "relations": dict(self.relations),
                "sentences": dict(self.sentences),
                "blocks": dict(self.blocks),
                "block_edges": dict(self.block_edges),
            }
