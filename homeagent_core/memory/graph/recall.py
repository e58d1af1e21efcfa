"""Recall over the mirror's compact graph: the level-by-level walk and the ranking of what it found.

:meth:`GraphCache.recall <homeagent_core.memory.graph.cache.GraphCache.recall>` calls
:func:`recall` under the mirror's lock. The walk goes level by level over the CSR adjacency of
:class:`~homeagent_core.memory.graph.adjacency.CompactGraph` (one gather per level, visit stamps
instead of sets). Ranking then orders entities by (distance, mention count desc, recency desc,
id) and relations by (distance, confidence desc, recency desc, id).

A recall touches a few dozen items, so numpy's per-call overhead, not arithmetic, is its cost;
ranking therefore takes as few calls as possible. The compact graph keeps each id's place in
the global order of those keys (``erank``/``rrank``, recomputed when enough ids changed), so one
int64 per item — its distance in the high bits, its place in the low ones — sorts the whole
list, and equal keys side by side are the repeats to drop. An id whose keys changed since the
ranks were computed holds -1; a list with one such id is ranked by a ``lexsort`` over the
columns instead, with the same result.

The rows that make the cut are named tuples of immutable values, so the compact graph keeps
each one built (per id and distance, ``ebuilt``/``rbuilt``) and later recalls share it; a
write to an entity or relation drops its kept rows, and so does a rename of an endpoint or a
change to the sentence a relation cites. Only rows not kept yet are built, column by column.

A reader's audience (its scope codes, :meth:`CompactGraph.scope_codes`) filters every level's
edges as they are gathered: the walk never crosses a relation the reader may not see, so an
entity reachable only through such relations is never found, and the limits are filled with
visible items only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from homeagent_core.memory.graph.model import RecalledEntity, RecalledRelation, RecallResult

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_core.memory.graph.adjacency import CompactGraph
    from homeagent_core.memory.graph.model import EntityRow, RelationRow

__all__ = ["RecallSource", "rank_entities", "rank_relations", "recall"]

_I = np.int64
_NO_DIGESTS: list[str] = []  # shared by relations without media, never mutated
_new = tuple.__new__  # builds a named tuple from a ready tuple, skipping its Python __new__
_SHIFT = 40  # rank keys: distance << 40 | place in the global order (room for 10^12 ids)
_LOW = (1 << _SHIFT) - 1

class RecallSource(Protocol):
    """What the walk and the ranking read of the mirror (the ``GraphCache``, under its lock)."""

    @property
    def compact(self) -> CompactGraph: ...

    @property
    def entities(self) -> Mapping[int, EntityRow]: ...

    @property
    def relations(self) -> Mapping[int, RelationRow]: ...

    @property
    def sentences(self) -> Mapping[int, str]: ...

    @property
    def blocks_of_sentence(self) -> Mapping[int, set[int]]: ...

    def digests(self, sentence_id: int | None) -> list[str]:
        """Digests of the media blocks a sentence contains, sorted."""
        ...


def recall(
    cache: RecallSource,
    seeds: list[int],
    depth: int,
    max_entities: int,
    max_relations: int,
    max_visit: int,
    exclude: set[str] | None,
    allowed: npt.NDArray[np.int32] | None = None,
) -> RecallResult:
    """Walk from ``seeds`` up to ``depth`` hops and rank what was found (see ``GraphCache.recall``).

    The walk stops as soon as the levels found so far already fill ``max_entities`` and
    ``max_relations``: deeper levels rank below every entity and relation found, so the result
    is the same as walking the full depth and cutting the ranked lists.
    """
    g = cache.compact
    entities = cache.entities
    skip = exclude or set()
    start = [s for s in dict.fromkeys(seeds) if s in entities]
    level = np.asarray(start, dtype=_I)
    mark = g.next_stamp()
    estamp, rstamp = g.entity_stamp, g.relation_stamp
    estamp[level] = mark
    ent_levels: list[npt.NDArray[np.int64]] = [level]
    rel_levels: list[npt.NDArray[np.int64]] = []
    names = g.name
    n_ent = len(start) - (sum(1 for e in start if entities[e].name in skip) if skip else 0)
    n_rel = 0  # may count a relation twice (reached from both ends within one level)
    seen = len(start)
    while len(level) and len(ent_levels) <= depth:
        if n_ent >= max_entities and n_rel >= max_relations:
            n_rel = sum(len(np.unique(r)) for r in rel_levels)  # exact, only when it decides
            if n_rel >= max_relations:
                break
        rels, nbrs = g.expand(level, allowed)
        if rel_levels:  # at the seeds nothing is marked yet
            rels = rels[rstamp[rels] != mark]
        nbrs = nbrs[estamp[nbrs] != mark]
        last = len(ent_levels) == depth
        if last and len(nbrs) <= max_visit - seen:
            # the deepest level is only ranked: its duplicates are dropped there
            rel_levels.append(rels)
            ent_levels.append(nbrs)
            break
        rstamp[rels] = mark
        if len(nbrs) > 1:
            nbrs.sort()
            nxt = nbrs[np.concatenate(([True], nbrs[1:] != nbrs[:-1]))]
            room = max_visit - seen
            if len(nxt) > room:  # keep the entities reached first
                nxt, first = np.unique(g.expand(level, allowed)[1], return_index=True)
                nxt = nxt[np.argsort(first, kind="stable")]
                nxt = nxt[estamp[nxt] != mark][: max(room, 0)]
        else:
            nxt = nbrs
        estamp[nxt] = mark
        seen += len(nxt)
        rel_levels.append(rels)
        n_rel += len(rels)
        ent_levels.append(nxt)
        n_ent += sum(1 for n in names[nxt].tolist() if n not in skip) if skip else len(nxt)
        level = nxt
    return RecallResult(
        entities=rank_entities(g, ent_levels, max_entities, skip),
        relations=rank_relations(cache, rel_levels, max_relations),
        seeds=[entities[s].name for s in seeds if s in entities],
    )


def _by_rank(
    rank: npt.NDArray[np.int64], order: npt.NDArray[np.int64], levels: list[npt.NDArray[np.int64]], check: bool
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """The levels' ids in rank order with their distances, repeats dropped; None if one is unranked.

    ``check`` says whether any id may be unranked (-1) at all.
    """
    ids = levels[0] if len(levels) == 1 else np.concatenate(levels)
    keys = rank[ids]
    if check and len(keys) and keys.min() < 0:
        return None
    at = len(levels[0])
    for d in range(1, len(levels)):
        end = at + len(levels[d])
        keys[at:end] += d << _SHIFT
        at = end
    if len(keys) > 1:
        keys.sort()
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    return order[keys & _LOW], keys >> _SHIFT


def _by_columns(
    levels: list[npt.NDArray[np.int64]], first: npt.NDArray[Any], second: npt.NDArray[Any]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The same order as :func:`_by_rank`, by a ``lexsort`` over the key columns (any id may have changed)."""
    ids = np.concatenate(levels) if len(levels) > 1 else levels[0]
    dist = np.repeat(np.arange(len(levels), dtype=_I), [len(x) for x in levels])
    if len(ids) > 1:
        order = np.lexsort((ids, -second[ids], -first[ids], dist))
        ids, dist = ids[order], dist[order]
        # a repeat (the deepest level may list an entity twice; a relation is reached from both
        # ends within one level) lies side by side after the sort
        once = np.concatenate(([True], ids[1:] != ids[:-1]))
        ids, dist = ids[once], dist[once]
    return ids, dist


def _shared(
    built: npt.NDArray[Any], ids: npt.NDArray[np.int64], dist: npt.NDArray[np.int64], make: Callable[..., list[Any]]
) -> list[Any]:
    """The rows for ``ids`` at distances ``dist`` (ascending), from ``built`` where made before.

    Rows missing there are made by ``make(ids, dist)`` and kept; distances past the kept ones
    are made every time.
    """
    if not len(ids) or dist[-1] >= built.shape[1]:
        return make(ids, dist)
    rows: list[Any] = built[ids, dist].tolist()
    if all(rows):  # a named tuple is never empty, so only None is false
        return rows
    if not any(rows):
        rows = make(ids, dist)
        built[ids, dist] = np.fromiter(rows, dtype=object, count=len(rows))
        return rows
    miss = [i for i, row in enumerate(rows) if row is None]
    at = np.asarray(miss, dtype=_I)
    made = make(ids[at], dist[at])
    for i, row in zip(miss, made, strict=True):
        rows[i] = row
    built[ids[at], dist[at]] = np.fromiter(made, dtype=object, count=len(made))
    return rows


def rank_entities(
    g: CompactGraph, levels: list[npt.NDArray[np.int64]], limit: int, skip: set[str]
) -> list[RecalledEntity]:
    """The ``limit`` best entities of the walk's levels (level = distance), built; ``skip`` names left out."""
    got = _by_rank(g.erank, g.eorder, levels, g.n_unranked > 0)
    ids, dist = got if got is not None else _by_columns(levels, g.mentions, g.updated)
    if skip:
        keep = np.asarray([n not in skip for n in g.name[ids].tolist()], dtype=bool)
        ids, dist = ids[keep], dist[keep]
    if len(ids) > limit:
        ids, dist = ids[:limit], dist[:limit]

    def make(ids: npt.NDArray[np.int64], dist: npt.NDArray[np.int64]) -> list[RecalledEntity]:
        columns = (g.name[ids].tolist(), g.type[ids].tolist(), g.mentions[ids].tolist(), dist.tolist())
        return list(map(_new, repeat(RecalledEntity), zip(*columns, g.updated[ids].tolist(), strict=True)))

    return _shared(g.ebuilt, ids, dist, make)


def rank_relations(cache: RecallSource, levels: list[npt.NDArray[np.int64]], limit: int) -> list[RecalledRelation]:
    """The ``limit`` best relations of the walk's levels (level = distance), built.

    Rows of relations whose sentence holds media are made anew each time (their digests come
    from the block maps); the others are kept for later recalls.
    """
    if not levels:
        return []
    g = cache.compact
    got = _by_rank(g.rrank, g.rorder, levels, g.n_unranked > 0)
    ids, dist = got if got is not None else _by_columns(levels, g.confidence, g.rupdated)
    if len(ids) > limit:
        ids, dist = ids[:limit], dist[:limit]
    sids = g.sentence[ids].tolist()
    blocks_of = cache.blocks_of_sentence

    def make(ids: npt.NDArray[np.int64], dist: npt.NDArray[np.int64], sids: list[int] = sids) -> list[RecalledRelation]:
        digests: Iterable[list[str]] = (
            [cache.digests(s) if s in blocks_of else _NO_DIGESTS for s in sids]
            if not blocks_of.keys().isdisjoint(sids)
            else repeat(_NO_DIGESTS)
        )
        names = g.name
        return list(
            map(
                _new,
                repeat(RecalledRelation),
                zip(
                    names[g.src[ids]].tolist(),
                    names[g.dst[ids]].tolist(),
                    g.rtype[ids].tolist(),
                    g.confidence[ids].tolist(),
                    g.session[ids].tolist(),
                    dist.tolist(),
                    g.rupdated[ids].tolist(),
                    map(cache.sentences.get, sids, repeat("")),
                    digests,
                    strict=False,  # ``digests`` may be an endless repeat
                ),
            )
        )

    if not blocks_of.keys().isdisjoint(sids):
        return make(ids, dist)
    return _shared(g.rbuilt, ids, dist, lambda i, d: make(i, d, g.sentence[i].tolist()))


def check_kept(cache: RecallSource) -> None:
    """Raise AssertionError unless the rank orders and the kept rows agree with the columns.

    Ranked ids (rank >= 0) must lie in the order of their current keys, and every kept row must
    equal the row made now (a relation whose sentence holds media is made anew at each recall,
    so only its other fields are compared).
    """
    g = cache.compact
    for rank, order, first, second in (
        (g.erank, g.eorder, g.mentions, g.updated),
        (g.rrank, g.rorder, g.confidence, g.rupdated),
    ):
        ids = np.flatnonzero(rank[: len(first)] >= 0)
        ids = ids[np.argsort(rank[ids])]
        keys = [(-float(first[i]), -float(second[i]), i) for i in ids.tolist()]
        if keys != sorted(keys) or not np.array_equal(order[rank[ids]], ids):
            raise AssertionError("a rank order disagrees with the columns it ranks by")
    for built, present, entity in ((g.ebuilt, g.present, True), (g.rbuilt, g.live, False)):
        rows, dists = np.nonzero(built != None)  # noqa: E711 (element-wise)
        for i, d in zip(rows.tolist(), dists.tolist(), strict=True):
            if not present[i]:
                raise AssertionError(f"a recalled row is kept for id {i}, which is gone")
            kept = built[i, d]
            if entity:
                e = cache.entities[i]
                now: tuple[object, ...] = RecalledEntity(e.name, e.type, e.mention_count, d, e.updated_at)
            else:
                r = cache.relations[i]
                source, target = cache.entities[r.source_id].name, cache.entities[r.target_id].name
                sentence = cache.sentences.get(r.sentence_id, "") if r.sentence_id is not None else ""
                now = RecalledRelation(source, target, r.type, r.confidence, r.session, d, r.updated_at, sentence)
                kept = kept[:8]
                now = now[:8]
            if kept != now:
                raise AssertionError(f"the recalled row kept for id {i} at distance {d} is out of date: {kept}")
