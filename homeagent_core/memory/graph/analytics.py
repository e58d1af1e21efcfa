"""Graph analytics a personal memory uses, computed on the mirror's compact columns.

Three questions the graph answers better than counting mentions:

* **Who matters now?** :meth:`GraphAnalytics.refresh` computes entity *salience*: PageRank
  over the undirected relation graph, each relation weighted by its confidence and by how
  recently it was written (half-life ``half_life_days``). The recall index names the most
  salient recalled entities as "高频" instead of the most mentioned ones, so a friend met
  every week outranks a word that was said often once.
* **Which entities are the same thing?** :meth:`GraphAnalytics.duplicate_candidates` finds
  pairs whose names share a character bigram *and* whose neighbourhoods overlap (Jaccard of
  their neighbour sets): "王小明" and "小明" who both know 小李 and live in 杭州. The merge
  heartbeat proposes them next to the pairs whose names alone are near-identical.
* **How are two things connected?** :meth:`GraphAnalytics.path` is the shortest chain of
  relations between two entities (``memory_path``; "how do I know 小李?").

Salience is a snapshot: it is recomputed in a worker thread by the merge heartbeat and at
start-up, never on the event loop (PageRank over 100k entities takes about a second); until
the first refresh the index falls back to mention counts.

PageRank is :func:`pagerank`, power iteration in numpy over the mirror's compact columns:
the same numbers as networkx's ``pagerank`` (which needs scipy, not a base dependency),
without building a networkx graph first. Neighbour sets and shortest paths are read straight
from the compact adjacency: a breadth-first search there answers in microseconds, where
building a networkx view first would cost seconds on a large graph.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from homeagent_core.memory.keywords import bigrams
from homeagent_sdk.visibility import EVERYONE, Audience

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_core.memory.graph.cache import GraphCache

__all__ = ["GraphAnalytics", "PathStep", "pagerank"]


@dataclass(frozen=True, slots=True)
class PathStep:
    """One relation on a path, in its stored direction (``source -relation-> target``)."""

    source: str
    relation: str
    target: str
    sentence: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "relation": self.relation, "target": self.target, "sentence": self.sentence}


def pagerank(
    n: int,
    a: np.ndarray,
    b: np.ndarray,
    weight: np.ndarray,
    *,
    alpha: float = 0.85,
    max_iter: int = 100,
    tol: float = 1.0e-6,
) -> np.ndarray:
    """PageRank of an undirected weighted graph of ``n`` nodes, one entry per node.

    ``a[i] - b[i]`` is an edge of weight ``weight[i]`` (node indices, each pair once). The
    walk follows an edge in proportion to its weight, jumps to a uniformly chosen node with
    probability ``1 - alpha``, and leaves a node without (positively weighted) edges to a
    uniformly chosen node: networkx's ``pagerank`` with its defaults, power iteration stopping
    when the L1 change is below ``n * tol`` (or after ``max_iter`` rounds), computed with numpy
    alone (networkx's own needs scipy).
    """
    if n == 0:
        return np.zeros(0)
    src = np.concatenate([a, b]).astype(np.intp, copy=False)
    dst = np.concatenate([b, a]).astype(np.intp, copy=False)
    w = np.concatenate([weight, weight]).astype(np.float64, copy=False)
    out = np.bincount(src, weights=w, minlength=n)
    dangling = out <= 0
    share = w / np.where(dangling, 1.0, out)[src]
    x = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        last = x
        x = alpha * np.bincount(dst, weights=last[src] * share, minlength=n)
        x += (alpha * last[dangling].sum() + 1.0 - alpha) / n
        if np.abs(x - last).sum() < n * tol:
            break
    return x


class GraphAnalytics:
    """Salience, duplicate candidates and paths over one :class:`GraphCache`.

    Args:
        cache: the graph mirror (its compact columns and adjacency are what is read).
        half_life_days: how fast a relation's weight in salience halves with age.
    """

    def __init__(self, cache: GraphCache, *, half_life_days: float = 30.0) -> None:
        self.cache = cache
        self.half_life_days = half_life_days
        self._salience: dict[int, float] = {}
        self._computed_at = 0.0
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- salience

    def refresh(self, now: float | None = None) -> int:
        """Recompute salience (call from a worker thread); returns how many entities got one."""
        now = time.time() if now is None else now
        decay = math.log(2) / max(self.half_life_days * 86400.0, 1.0)
        cache = self.cache
        with cache.lock:
            g = cache.compact
            present = np.flatnonzero(g.present)
            rids = g.live_relations()
            src, dst = g.src[rids], g.dst[rids]
            confidence, updated = g.confidence[rids], g.rupdated[rids]
        # one weight per unordered pair: the relations' confidences, each halved per half-life of age
        keep = src != dst
        lo, hi = np.minimum(src, dst)[keep], np.maximum(src, dst)[keep]
        updated = updated[keep]
        age = np.maximum(0.0, now - np.where(updated == 0, now, updated))
        weight = np.maximum(confidence[keep], 0.05) * np.exp(-decay * age)
        pairs, slot = np.unique(np.stack([lo, hi], axis=1), axis=0, return_inverse=True)
        totals = np.bincount(slot.reshape(-1), weights=weight, minlength=len(pairs))
        nodes = np.union1d(present, pairs.reshape(-1))
        ranks = pagerank(len(nodes), np.searchsorted(nodes, pairs[:, 0]), np.searchsorted(nodes, pairs[:, 1]), totals)
        scores = dict(zip(nodes.tolist(), ranks.tolist(), strict=True))
        with self._lock:
            self._salience = scores
            self._computed_at = now
        return len(scores)

    @property
    def computed_at(self) -> float:
        """When salience was last computed (0 = never)."""
        return self._computed_at

    def salience_of(self, entity_ids: Iterable[int]) -> dict[int, float]:
        """Salience of the given entities (missing ones score 0); empty before the first refresh."""
        with self._lock:
            if not self._salience:
                return {}
            return {e: self._salience.get(e, 0.0) for e in entity_ids}

    def salient_names(self, names: Iterable[str], limit: int) -> list[str] | None:
        """The ``limit`` most salient of ``names`` (ties: input order), or ``None`` before a refresh."""
        ordered = list(names)
        with self.cache.lock:
            ids = [self.cache.ids_by_name.get(n) for n in ordered]
        scores = self.salience_of(i for i in ids if i is not None)
        if not scores:
            return None
        ranked = sorted(range(len(ordered)), key=lambda i: (-scores.get(ids[i] or -1, 0.0), i))
        return [ordered[i] for i in ranked[:limit]]

    # ------------------------------------------------------------- duplicates

    def duplicate_candidates(
        self,
        *,
        min_overlap: float = 0.5,
        min_shared: int = 2,
        max_pairs: int = 10,
        max_posting: int = 200,
    ) -> list[tuple[str, str, float]]:
        """Entity pairs with a shared name bigram whose neighbour sets overlap.

        Score = Jaccard of the two neighbour sets (entities related to either, excluding the
        pair itself); pairs need ``min_shared`` common neighbours and ``min_overlap``. Best
        first, at most ``max_pairs``.
        """
        cache = self.cache
        with cache.lock:
            names = {eid: row.name for eid, row in cache.entities.items()}
            g = cache.compact
            rids = g.live_relations()
            ends = zip(g.src[rids].tolist(), g.dst[rids].tolist(), strict=True)
        neighbours: dict[int, set[int]] = {}
        for a, b in ends:
            neighbours.setdefault(a, set()).add(b)
            neighbours.setdefault(b, set()).add(a)
        postings: dict[str, list[int]] = {}
        for eid in neighbours:
            for gram in bigrams(names[eid]):
                postings.setdefault(gram, []).append(eid)
        seen: set[tuple[int, int]] = set()
        pairs: list[tuple[str, str, float]] = []
        for plist in postings.values():
            if len(plist) > max_posting:
                continue
            for i, a in enumerate(plist):
                for b in plist[i + 1 :]:
                    key = (a, b) if a < b else (b, a)
                    if key in seen:
                        continue
                    seen.add(key)
                    na, nb = neighbours[a] - {b}, neighbours[b] - {a}
                    shared = len(na & nb)
                    if shared < min_shared:
                        continue
                    score = shared / len(na | nb)
                    if score >= min_overlap:
                        first, second = sorted((names[a], names[b]))
                        pairs.append((first, second, round(score, 3)))
        pairs.sort(key=lambda p: (-p[2], p[0], p[1]))
        return pairs[:max_pairs]

    # ------------------------------------------------------------------ paths

    def path(
        self, source: str, target: str, *, max_hops: int = 6, audience: Audience = EVERYONE
    ) -> list[PathStep] | None:
        """The shortest chain of relations between two entities (either direction), or ``None``.

        A breadth-first search over the compact adjacency (relations in id order), at most
        ``max_hops`` deep; between two entities on the chain the most confident relation is shown.
        Only relations ``audience`` may see are walked.

        Raises:
            KeyError: an entity name is unknown (the message lists close names).
        """
        cache = self.cache
        with cache.lock:
            a, b = cache.ids_by_name.get(source.strip()), cache.ids_by_name.get(target.strip())
            for name, eid in ((source, a), (target, b)):
                if eid is None:
                    close = sorted(n for n in cache.ids_by_name if bigrams(n) & bigrams(name))[:10]
                    raise KeyError(f"unknown entity {name!r}" + (f"; close names: {', '.join(close)}" if close else ""))
            assert a is not None and b is not None
            if a == b:
                return []
            allowed = cache.compact.scope_codes(audience)
            nodes = self._shortest(a, b, max_hops, allowed)
            if nodes is None:
                return None
            steps: list[PathStep] = []
            for u, v in itertools.pairwise(nodes):
                rid, forward = self._best_edge(u, v, allowed)
                row = cache.relations[rid]
                src, dst = (u, v) if forward else (v, u)
                sentence = cache.sentences.get(row[6], "") if row[6] is not None else ""
                steps.append(PathStep(cache.entities[src].name, row[3], cache.entities[dst].name, sentence))
            return steps

    def _shortest(self, a: int, b: int, max_hops: int, allowed: npt.NDArray[np.int32] | None) -> list[int] | None:
        """Entity ids of a shortest chain ``a`` … ``b`` (at most ``max_hops`` relations), or ``None``."""
        g = self.cache.compact
        parent = {a: a}
        level = [a]
        for _ in range(max_hops):
            nxt: list[int] = []
            for node in level:
                for other, _rid in g.incident(node, allowed):
                    if other in parent:
                        continue
                    parent[other] = node
                    if other == b:
                        chain = [b]
                        while chain[-1] != a:
                            chain.append(parent[chain[-1]])
                        return chain[::-1]
                    nxt.append(other)
            if not nxt:
                return None
            level = nxt
        return None

    def _best_edge(self, u: int, v: int, allowed: npt.NDArray[np.int32] | None) -> tuple[int, bool]:
        """The most confident relation between ``u`` and ``v`` and whether it points u → v."""
        g = self.cache.compact
        options = [
            (-float(g.confidence[rid]), rid, int(g.src[rid]) == u)
            for other, rid in g.incident(u, allowed)
            if other == v
        ]
        _, rid, forward = min(options)
        return rid, forward

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"salience_entities": len(self._salience), "salience_computed_at": self._computed_at}
