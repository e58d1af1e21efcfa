"""Row and result types of graph memory, and the per-space vector index.

Shared by the SQLite store (:mod:`homeagent_core.memory.graph.store`) and its in-memory mirror
(:mod:`homeagent_core.memory.graph.cache`): the ``*Row`` tuples are SQLite rows exactly as the
``*_COLUMNS`` select them, the ``Recalled*`` classes are what a recall hands to callers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "BLOCK_COLUMNS",
    "EDGE_COLUMNS",
    "ENTITY_COLUMNS",
    "RELATION_COLUMNS",
    "BlockRow",
    "ChangedRows",
    "Changes",
    "EntityRow",
    "RecallResult",
    "RecalledEntity",
    "RecalledRelation",
    "RelationRow",
    "VectorIndex",
    "decode_vector",
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
    person: str = ""
    visibility: str = "private"


class BlockRow(NamedTuple):
    id: int
    digest: str
    mime: str
    vector: bytes | None
    vec_model: str
    created_at: float
    person: str = ""
    visibility: str = "private"


ENTITY_COLUMNS = "id, name, type, mention_count, vector, vec_model, created_at, updated_at"
RELATION_COLUMNS = (
    "id, source_id, target_id, type, confidence, session, sentence_id, status, created_at, updated_at,"
    " person, visibility"
)
BLOCK_COLUMNS = "id, digest, mime, vector, vec_model, created_at, person, visibility"
EDGE_COLUMNS = "id, sentence_id, block_id, type, person, visibility"


class RecalledEntity(NamedTuple):
    """An entity a recall found, ``distance`` hops from the nearest seed.

    A named tuple rather than a dataclass: a recall builds dozens per call, and building a
    tuple costs a fraction of running a dataclass ``__init__``.
    """

    name: str
    type: str
    mention_count: int
    distance: int
    updated_at: float


_NO_DIGESTS: list[str] = []  # shared default, never mutated


class RecalledRelation(NamedTuple):
    """A relation a recall found; its distance is that of its nearer endpoint."""

    source: str
    target: str
    type: str
    confidence: float
    session: str
    distance: int
    updated_at: float
    sentence: str = ""
    media_digests: list[str] = _NO_DIGESTS


@dataclass(slots=True)
class Changes:
    """Ids a write touched; the mirror re-reads exactly these rows after the commit."""

    entities: set[int] = field(default_factory=set)
    relations: set[int] = field(default_factory=set)
    sentences: set[int] = field(default_factory=set)
    blocks: set[int] = field(default_factory=set)
    block_edges: set[int] = field(default_factory=set)


@dataclass(slots=True)
class ChangedRows:
    """The committed rows of the ids a write touched (:class:`Changes`); an id without a row was deleted.

    ``entities`` maps an id to its row and stored keyword terms.
    """

    entities: dict[int, tuple[EntityRow, list[str]]] = field(default_factory=dict)
    relations: dict[int, RelationRow] = field(default_factory=dict)
    sentences: dict[int, str] = field(default_factory=dict)
    blocks: dict[int, BlockRow] = field(default_factory=dict)
    block_edges: dict[int, tuple[int, int, str, str, str]] = field(default_factory=dict)
    """edge id -> (sentence id, block id, type, person, visibility)."""


_ENTITY_FIELDS = RecalledEntity._fields
_RELATION_FIELDS = RecalledRelation._fields


@dataclass(slots=True)
class RecallResult:
    """What a recall found: ranked entities and relations, and the seed names it started from."""

    entities: list[RecalledEntity] = field(default_factory=list)
    relations: list[RecalledRelation] = field(default_factory=list)
    seeds: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seeds": list(self.seeds),
            "entities": [dict(zip(_ENTITY_FIELDS, e, strict=True)) for e in self.entities],
            "relations": [
                {**dict(zip(_RELATION_FIELDS, r, strict=True)), "media_digests": list(r.media_digests)}
                for r in self.relations
            ],
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

    def ids(self) -> set[int]:
        return set(self._row_of)

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

    def search(
        self, query: npt.NDArray[np.float32], k: int, allowed: npt.NDArray[np.bool_] | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` ids most similar to ``query`` (cosine; rows are L2-normalised).

        ``allowed`` (indexed by id; ids past its end count as not allowed) masks rows out
        *before* the top ``k`` is taken, so the result is the ``k`` best allowed ids.
        """
        import numpy as np

        if not self._row_of or k <= 0:
            return []
        scores = self._mat[: self._high] @ query.astype(np.float32, copy=False)
        ids = self._ids[: self._high]
        gone = ids < 0
        if allowed is not None:
            inside = (ids >= 0) & (ids < len(allowed))
            ok = np.zeros(len(ids), dtype=bool)
            ok[inside] = allowed[ids[inside]]
            gone |= ~ok
        scores[gone] = -np.inf
        k = min(k, int(len(ids) - np.count_nonzero(gone)))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self._ids[r]), float(scores[r])) for r in top]


def decode_vector(blob: bytes | None) -> npt.NDArray[np.float32] | None:
    """A stored vector blob as a float32 array (a view, no copy), or None when absent."""
    import numpy as np

    if not blob:
        return None
    return np.frombuffer(blob, dtype=np.float32)
