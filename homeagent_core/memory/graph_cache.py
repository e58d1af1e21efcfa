"""In-memory mirror of the graph store, where every recall runs.

SQLite (:mod:`homeagent_core.memory.graph`) is the truth; this module keeps a networkx
``MultiDiGraph`` of the *active* graph next to it, loaded once on start and updated
write-through by every store operation, so recall never touches SQL:

* nodes are entity ids (attributes: name, type, mention_count, vec_model, timestamps), edges
  are active relations keyed by relation id;
* a keyword index maps entity-name terms (jieba words, CJK bigrams, Latin words, the whole
  name) to entity ids — the replacement of SQL ``LIKE``;
* vector indexes (one contiguous float32 matrix per embedding space) hold entity-name vectors
  and media-block vectors; a query is one matrix-vector product;
* sentences and media blocks with their ``contains`` edges, so recalled relations carry their
  source sentence and media digests.

All mutation and recall happen under one lock, held only for in-memory work (microseconds),
because store writes run in worker threads while recall runs on the event loop.
"""

from __future__ import annotations

import heapq
import threading
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from homeagent_core.memory.keywords import name_terms

if TYPE_CHECKING:
    import sqlite3

    import networkx as nx
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "BlockRow",
    "EntityRow",
    "GraphCache",
    "RecallResult",
    "RecalledEntity",
    "RecalledRelation",
    "RelationRow",
    "VectorIndex",
]


class EntityRow(NamedTuple):
    id: int
    name: str
    type: str
    mention_count: int
    vector: bytes | None
    vec_model: str
    created_at: float
    updated_at: float


class RelationRow(NamedTuple):
    id: int
    source_id: int
    target_id: int
    type: str
    confidence: float
    session: str
    sentence_id: int | None
    status: str
    created_at: float
    updated_at: float


class BlockRow(NamedTuple):
    id: int
    digest: str
    mime: str
    vector: bytes | None
    vec_model: str
    created_at: float


ENTITY_COLUMNS = "id, name, type, mention_count, vector, vec_model, created_at, updated_at"
RELATION_COLUMNS = "id, source_id, target_id, type, confidence, session, sentence_id, status, created_at, updated_at"
BLOCK_COLUMNS = "id, digest, mime, vector, vec_model, created_at"


@dataclass(slots=True)
class RecalledEntity:
    name: str
    type: str
    mention_count: int
    distance: int
    updated_at: float


@dataclass(slots=True)
class RecalledRelation:
    source: str
    target: str
    type: str
    confidence: float
    session: str
    distance: int
    updated_at: float
    sentence: str = ""
    media_digests: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RecallResult:
    """What a recall found: ranked entities and relations, and the seed names it started from."""

    entities: list[RecalledEntity] = field(default_factory=list)
    relations: list[RecalledRelation] = field(default_factory=list)
    seeds: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seeds": list(self.seeds),
            "entities": [asdict(e) for e in self.entities],
            "relations": [asdict(r) for r in self.relations],
        }


class VectorIndex:
    """Rows of one embedding space in a contiguous float32 matrix, addressed by integer id.

    Removed rows are zeroed and reused; search masks them out.
    """

    def __init__(self, dimension: int, capacity: int = 256) -> None:
        import numpy as np

        self.dimension = dimension
        self._mat: npt.NDArray[np.float32] = np.zeros((capacity, dimension), dtype=np.float32)
        self._ids: npt.NDArray[np.int64] = np.full(capacity, -1, dtype=np.int64)
        self._row_of: dict[int, int] = {}
        self._free: list[int] = []
        self._high = 0

    def __len__(self) -> int:
        return len(self._row_of)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._row_of

    def set(self, item_id: int, vector: npt.NDArray[np.float32]) -> None:
        import numpy as np

        row = self._row_of.get(item_id)
        if row is None:
            if self._free:
                row = self._free.pop()
            else:
                if self._high == len(self._ids):
                    grow = max(256, len(self._ids))
                    self._mat = np.concatenate([self._mat, np.zeros((grow, self.dimension), dtype=np.float32)])
                    self._ids = np.concatenate([self._ids, np.full(grow, -1, dtype=np.int64)])
                row = self._high
                self._high += 1
            self._row_of[item_id] = row
            self._ids[row] = item_id
        self._mat[row] = vector

    def remove(self, item_id: int) -> None:
        row = self._row_of.pop(item_id, None)
        if row is not None:
            self._mat[row] = 0.0
            self._ids[row] = -1
            self._free.append(row)

    def search(self, query: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The ``k`` ids most similar to ``query`` (cosine; rows are L2-normalised)."""
        import numpy as np

        if not self._row_of or k <= 0:
            return []
        scores = self._mat[: self._high] @ query.astype(np.float32, copy=False)
        scores[self._ids[: self._high] < 0] = -np.inf
        k = min(k, len(self._row_of))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self._ids[r]), float(scores[r])) for r in top]


def decode_vector(blob: bytes | None) -> npt.NDArray[np.float32] | None:
    import numpy as np

    if not blob:
        return None
    return np.frombuffer(blob, dtype=np.float32)


class GraphCache:
    """The networkx mirror of the active graph plus keyword and vector indexes."""

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
        self._postings: defaultdict[str, set[int]] = defaultdict(set)
        self._terms_of: dict[int, set[str]] = {}
        self._entity_vectors: dict[tuple[str, int], VectorIndex] = {}
        self._block_vectors: dict[tuple[str, int], VectorIndex] = {}

    # ----------------------------------------------------------------- loading

    @classmethod
    def load(cls, conn: sqlite3.Connection) -> GraphCache:
        """Build the mirror from every row SQLite holds (active relations only)."""
        cache = cls()
        with cache.lock:
            for row in conn.execute(f"SELECT {ENTITY_COLUMNS} FROM entities"):
                entity = EntityRow(*row)
                cache.entities[entity.id] = entity
                cache.ids_by_name[entity.name] = entity.id
                terms = name_terms(entity.name)
                cache._terms_of[entity.id] = terms
                for term in terms:
                    cache._postings[term].add(entity.id)
                if entity.vector:
                    cache._set_vector(
                        cache._entity_vectors, entity.id, entity.vector, entity.vec_model
                    )
            cache.graph.add_nodes_from(cache.entities)
            for sid, text in conn.execute("SELECT id, text FROM sentences"):
                cache.sentences[sid] = text
            for row in conn.execute(
                f"SELECT {RELATION_COLUMNS} FROM relations WHERE status = 'active'"
            ):
                cache.relations[row[0]] = RelationRow(*row)
            cache.graph.add_edges_from(
                (r.source_id, r.target_id, r.id) for r in cache.relations.values()
            )
            for row in conn.execute(f"SELECT {BLOCK_COLUMNS} FROM memory_blocks"):
                cache.upsert_block(BlockRow(*row))
            for eid, sid, bid, etype in conn.execute(
                "SELECT id, sentence_id, block_id, type FROM memory_block_edges"
            ):
                cache.upsert_block_edge(eid, sid, bid, etype)
        return cache

    # --------------------------------------------------------------- mutation

    def upsert_entity(self, row: EntityRow) -> None:
        with self.lock:
            old = self.entities.get(row.id)
            if old is not None and old.name != row.name:
                self._unindex_name(row.id)
                self.ids_by_name.pop(old.name, None)
            self.entities[row.id] = row
            self.ids_by_name[row.name] = row.id
            self.graph.add_node(row.id)
            if row.id not in self._terms_of:
                terms = name_terms(row.name)
                self._terms_of[row.id] = terms
                for term in terms:
                    self._postings[term].add(row.id)
            self._set_vector(self._entity_vectors, row.id, row.vector, row.vec_model)

    def remove_entity(self, entity_id: int) -> None:
        with self.lock:
            row = self.entities.pop(entity_id, None)
            if row is None:
                return
            if self.graph.has_node(entity_id):
                for _u, _v, key in list(self.graph.in_edges(entity_id, keys=True)) + list(
                    self.graph.out_edges(entity_id, keys=True)
                ):
                    self.relations.pop(key, None)
                self.graph.remove_node(entity_id)
            self.ids_by_name.pop(row.name, None)
            self._unindex_name(entity_id)
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
                self.graph.remove_edge(old.source_id, old.target_id, key=row.id)
            self.relations[row.id] = row
            self.graph.add_edge(row.source_id, row.target_id, key=row.id)

    def remove_relation(self, relation_id: int) -> None:
        with self.lock:
            old = self.relations.pop(relation_id, None)
            if old is not None and self.graph.has_edge(old.source_id, old.target_id, relation_id):
                self.graph.remove_edge(old.source_id, old.target_id, key=relation_id)

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

    def _unindex_name(self, entity_id: int) -> None:
        for term in self._terms_of.pop(entity_id, set()):
            ids = self._postings.get(term)
            if ids is not None:
                ids.discard(entity_id)
                if not ids:
                    del self._postings[term]

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
        over keywords; ties go to the more-mentioned entity.
        """
        with self.lock:
            scores: Counter[int] = Counter()
            for keyword in keywords:
                kterms = name_terms(keyword)
                if not kterms:
                    continue
                hits: Counter[int] = Counter()
                for term in kterms:
                    hits.update(self._postings.get(term, ()))
                for eid, n in hits.items():
                    nterms = len(self._terms_of[eid])
                    if n == len(kterms) or n == nterms:
                        scores[eid] += n / max(len(kterms), nterms)
            ranked = heapq.nlargest(limit, scores.items(), key=lambda kv: (kv[1], self.entities[kv[0]].mention_count))
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

        Entities rank by (distance, mention count, recency); relations by (distance,
        confidence, recency). ``max_visit`` bounds the walk around hub entities.
        ``exclude`` names are walked through but left out of the result.
        """
        with self.lock:
            dist: dict[int, int] = {}
            frontier: list[int] = []
            for s in seeds:
                if s in self.entities and s not in dist:
                    dist[s] = 0
                    frontier.append(s)
            rel_dist: dict[int, int] = {}
            succ, pred = self.graph._succ, self.graph._pred
            d = 0
            while frontier and d < depth:
                nxt: list[int] = []
                for node in frontier:
                    for adj in (succ[node], pred[node]):
                        for nbr, keys in adj.items():
                            for key in keys:
                                if key not in rel_dist:
                                    rel_dist[key] = d
                            if nbr not in dist and len(dist) < max_visit:
                                dist[nbr] = d + 1
                                nxt.append(nbr)
                frontier = nxt
                d += 1
            skip = exclude or set()
            ents = [self.entities[e] for e in dist if self.entities[e].name not in skip]
            ents.sort(key=lambda e: (dist[e.id], -e.mention_count, -e.updated_at))
            rels = heapq.nsmallest(
                max_relations,
                (self.relations[r] for r in rel_dist),
                key=lambda r: (rel_dist[r.id], -r.confidence, -r.updated_at, r.id),
            )
            return RecallResult(
                entities=[
                    RecalledEntity(e.name, e.type, e.mention_count, dist[e.id], e.updated_at)
                    for e in ents[:max_entities]
                ],
                relations=[self._recalled_relation(r, rel_dist[r.id]) for r in rels],
                seeds=[self.entities[s].name for s in seeds if s in self.entities],
            )

    def _recalled_relation(self, r: RelationRow, distance: int) -> RecalledRelation:
        sentence = self.sentences.get(r.sentence_id, "") if r.sentence_id is not None else ""
        digests = (
            sorted(self.blocks[b].digest for b in self._blocks_of_sentence.get(r.sentence_id, ()))
            if r.sentence_id is not None
            else []
        )
        return RecalledRelation(
            source=self.entities[r.source_id].name,
            target=self.entities[r.target_id].name,
            type=r.type,
            confidence=r.confidence,
            session=r.session,
            distance=distance,
            updated_at=r.updated_at,
            sentence=sentence,
            media_digests=digests,
        )

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

        Also checks the mirror's internal indexes agree with its rows (the graph's edges, the
        name map and the keyword postings), so a test comparing snapshots covers them too.
        """
        with self.lock:
            edges = {key: (u, v) for u, v, key in self.graph.edges(keys=True)}
            if edges != {r.id: (r.source_id, r.target_id) for r in self.relations.values()}:
                raise AssertionError("mirror graph edges disagree with its relation rows")
            if set(self.graph.nodes) != set(self.entities):
                raise AssertionError("mirror graph nodes disagree with its entity rows")
            if self.ids_by_name != {e.name: e.id for e in self.entities.values()}:
                raise AssertionError("mirror name map disagrees with its entity rows")
            for eid, terms in self._terms_of.items():
                if any(eid not in self._postings[t] for t in terms):
                    raise AssertionError(f"keyword index lost entity {eid}")
            vec_ids = {i for idx in self._entity_vectors.values() for i in idx._row_of}
            expected = {e.id for e in self.entities.values() if e.vector and e.vec_model}
            if vec_ids != expected:
                raise AssertionError("entity vector index disagrees with entity rows")
            return {
                "entities": dict(self.entities),
                "relations": dict(self.relations),
                "sentences": dict(self.sentences),
                "blocks": dict(self.blocks),
                "block_edges": dict(self.block_edges),
            }
