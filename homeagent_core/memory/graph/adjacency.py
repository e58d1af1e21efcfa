"""The compact numeric form of the active graph: CSR adjacency plus per-id columns.

Recall walks this instead of Python dicts. Nodes are entity ids and edges are active relations,
stored once per direction (a self-loop once) in CSR form: ``indptr[n]:indptr[n + 1]`` is node
``n``'s slice of ``csr``, whose rows are (relation id, other endpoint). Next to it, numpy columns
indexed by id hold what recall ranks and returns: an entity's name, type, mention count and
recency; a relation's endpoints, type, confidence, session, sentence and recency. A walk level
is a handful of vectorised gathers, and ranking is one ``lexsort``.

CSR arrays cannot take an insert in place, so writes go to a small *delta*: new or moved edges
live in per-node dicts, and removed relations are marked *dead* in the CSR (the walk drops
them). When the delta grows past a fraction of the graph (:attr:`CompactGraph.merge_at`), it is
merged: the CSR is rebuilt from the relation columns with one stable ``argsort`` (well under a
second at a million relations), so writes stay O(1) and walks stay vectorised.

Recall also reads two derived structures kept here (see :mod:`~homeagent_core.memory.graph.recall`):
rank orders (each id's place in the order recall ranks by; -1 once its keys change, all
recomputed when enough changed, like the merge) and the recalled rows built so far per id and
distance (dropped when a write touches the id). :meth:`CompactGraph.export` and
:meth:`CompactGraph.load_saved` are the form saved in the mirror file; :class:`RelationRows`
reads relation rows from the columns, so the mirror keeps no row object per relation.

Each relation also records whom it came from (``person``) and who may see it (``visibility``,
:mod:`homeagent_sdk.visibility`), and a small integer *scope* per relation names the pair for
the walk: 0 is ``household``, and every private person and every group has its own code. A
reader's :class:`~homeagent_sdk.visibility.Audience` is a handful of codes
(:meth:`CompactGraph.scope_codes`), so filtering a walk level is one vectorised comparison on the
edges it gathered — the filter runs inside the walk, not on its result.

networkx is not kept next to it: :meth:`CompactGraph.to_networkx` builds a ``MultiDiGraph`` on
demand, for code that wants one (its edges carry ``person`` and ``visibility``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from homeagent_core.memory.graph.model import RelationRow
from homeagent_core.memory.graph.packing import build_multidigraph, decode_strings, encode_strings
from homeagent_sdk.visibility import HOUSEHOLD, PRIVATE, Audience

if TYPE_CHECKING:
    import networkx as nx
    import numpy.typing as npt

__all__ = ["CompactGraph", "RelationRows", "build_multidigraph", "decode_strings", "encode_strings", "scope_key"]

IntArray = "npt.NDArray[np.int64]"
_I = np.int64
_NO_SENTENCE = -1
BUILT_DEPTH = 3  # recalled rows are kept for distances 0, 1 and 2 (the default recall depth)
_NO_SCOPE = -1  # a code no relation holds (an audience's scope nobody wrote in)


def scope_key(person: str, visibility: str) -> str:
    """What decides who sees a relation: its visibility, and for a private one its person."""
    return f"{PRIVATE}\x00{person}" if visibility == PRIVATE else visibility


def _grown(arr: npt.NDArray[Any], size: int, fill: Any) -> npt.NDArray[Any]:
    """``arr`` with room for index ``size - 1`` (capacity doubles), new slots set to ``fill``."""
    if size <= len(arr):
        return arr
    out = np.empty(max(size, 2 * len(arr), 16), dtype=arr.dtype)
    out[: len(arr)] = arr
    out[len(arr) :] = fill
    return out


def _grown_rows(arr: npt.NDArray[Any], size: int) -> npt.NDArray[Any]:
    """A 2-D object array ``arr`` with room for row ``size - 1`` (capacity doubles), new rows None."""
    if size <= len(arr):
        return arr
    out = np.empty((max(size, 2 * len(arr), 16), arr.shape[1]), dtype=object)
    out[: len(arr)] = arr
    return out


class CompactGraph:
    """CSR adjacency with a write delta, and the numeric columns recall ranks by.

    Not thread-safe by itself: the owning :class:`~homeagent_core.memory.graph.cache.GraphCache`
    calls it under its lock.
    """

    def __init__(self) -> None:
        # entity columns, indexed by entity id
        self.present = np.zeros(0, dtype=bool)
        self.name = np.empty(0, dtype=object)
        self.type = np.empty(0, dtype=object)
        self.mentions = np.zeros(0, dtype=_I)
        self.updated = np.zeros(0, dtype=np.float64)
        # relation columns, indexed by relation id: with them the mirror keeps no row objects
        # (:class:`RelationRows` reads a relation's row from them)
        self.live = np.zeros(0, dtype=bool)
        self.src = np.zeros(0, dtype=_I)
        self.dst = np.zeros(0, dtype=_I)
        self.rtype = np.empty(0, dtype=object)
        self.confidence = np.zeros(0, dtype=np.float64)
        self.session = np.empty(0, dtype=object)
        self.sentence = np.zeros(0, dtype=_I)
        self.rcreated = np.zeros(0, dtype=np.float64)
        self.rupdated = np.zeros(0, dtype=np.float64)
        # whom each relation came from and who may see it; ``scope`` codes the pair for the walk
        self.person = np.empty(0, dtype=object)
        self.visibility = np.empty(0, dtype=object)
        self.scope = np.full(0, _NO_SCOPE, dtype=np.int32)
        self.scopes: dict[str, int] = {HOUSEHOLD: 0}
        # rank orders: ``erank[e]`` is entity e's place in the order recall ranks by (mentions
        # desc, recency desc, id), ``eorder`` the inverse; the same for relations (confidence
        # desc, recency desc, id). An id whose keys changed since they were computed holds -1.
        self.erank = np.zeros(0, dtype=_I)
        self.eorder = np.zeros(0, dtype=_I)
        self.rrank = np.zeros(0, dtype=_I)
        self.rorder = np.zeros(0, dtype=_I)
        self.n_unranked = 0
        self.reranks = 0
        # recalled rows already built, per id and distance (None: not built, or changed since):
        # they are immutable named tuples, so recalls share them; set by graph_recall
        self.ebuilt = np.empty((0, BUILT_DEPTH), dtype=object)
        self.rbuilt = np.empty((0, BUILT_DEPTH), dtype=object)
        # CSR (built) + delta (since the build)
        self.indptr = np.zeros(1, dtype=_I)
        self._ptr = self.indptr.data  # plain-int reads of indptr, for small frontiers
        self.csr = np.zeros((0, 2), dtype=_I)  # per edge: relation id, other endpoint
        self.in_csr = np.zeros(0, dtype=bool)
        self.dead = np.zeros(0, dtype=bool)
        self.n_dead = 0
        self.delta: dict[int, dict[int, int]] = {}
        self.n_delta = 0
        self.n_live = 0
        self.merges = 0
        self.merge_floor = 4096
        # visit stamps for walks (a walk marks with a fresh number: no clearing between walks)
        self.entity_stamp = np.zeros(0, dtype=np.int32)
        self.relation_stamp = np.zeros(0, dtype=np.int32)
        self.stamp = 0

    @property
    def merge_at(self) -> int:
        """Delta size (new edges + dead ones) that triggers a merge into the CSR.

        ``merge_floor`` (4096) or a sixteenth of the graph, whichever is larger: a merge costs
        O(E log E), so merging at a fixed fraction keeps its cost per write constant.
        """
        return max(self.merge_floor, self.n_live // 16)

    # ------------------------------------------------------------------ loading

    def load(
        self,
        entities: tuple[list[int], list[str], list[str], list[int], list[float]],
        relations: tuple[
            list[int], list[int], list[int], list[str], list[float], list[str], list[Any], list[float], list[float],
            list[str], list[str],
        ],
        *,
        build: bool = True,
    ) -> None:
        """Fill the columns from whole tables at once (columns as lists, ids first) and build the CSR.

        ``build=False`` leaves the CSR and ranks unbuilt (the caller fills them).
        """
        eid, name, etype, mentions, updated = entities
        ids = np.asarray(eid, dtype=_I)
        size = int(ids.max()) + 1 if len(ids) else 0
        self._grow_entities(size)
        self.present[ids] = True
        self.name[ids] = name
        self.type[ids] = etype
        self.mentions[ids] = mentions
        self.updated[ids] = updated
        rid, src, dst, rtype, conf, session, sentence, rcreated, rupdated, person, visibility = relations
        rids = np.asarray(rid, dtype=_I)
        size = int(rids.max()) + 1 if len(rids) else 0
        self._grow_relations(size)
        self.live[rids] = True
        self.src[rids] = src
        self.dst[rids] = dst
        self.rtype[rids] = rtype
        self.confidence[rids] = conf
        self.session[rids] = session
        self.sentence[rids] = [_NO_SENTENCE if s is None else s for s in sentence]
        self.rcreated[rids] = rcreated
        self.rupdated[rids] = rupdated
        self.person[rids] = person
        self.visibility[rids] = visibility
        self.scope[rids] = self._codes(person, visibility)
        self.n_live = len(rids)
        if build:
            self.merge()
            self.rerank()

    def _grow_entities(self, size: int) -> None:
        if size <= len(self.present):
            return
        self.present = _grown(self.present, size, False)
        self.name = _grown(self.name, size, None)
        self.type = _grown(self.type, size, None)
        self.erank = _grown(self.erank, size, -1)
        self.ebuilt = _grown_rows(self.ebuilt, size)
        self.mentions = _grown(self.mentions, size, 0)
        self.updated = _grown(self.updated, size, 0.0)
        self.entity_stamp = _grown(self.entity_stamp, size, 0)
        # new nodes get empty CSR rows, so every entity slot can be looked up without a bounds check
        self.indptr = _grown(self.indptr, len(self.present) + 1, self.indptr[-1])
        self._ptr = self.indptr.data

    def _grow_relations(self, size: int) -> None:
        if size <= len(self.live):
            return
        self.live = _grown(self.live, size, False)
        self.src = _grown(self.src, size, 0)
        self.dst = _grown(self.dst, size, 0)
        self.rtype = _grown(self.rtype, size, None)
        self.session = _grown(self.session, size, None)
        self.rcreated = _grown(self.rcreated, size, 0.0)
        self.rrank = _grown(self.rrank, size, -1)
        self.rbuilt = _grown_rows(self.rbuilt, size)
        self.confidence = _grown(self.confidence, size, 0.0)
        self.sentence = _grown(self.sentence, size, _NO_SENTENCE)
        self.rupdated = _grown(self.rupdated, size, 0.0)
        self.person = _grown(self.person, size, None)
        self.visibility = _grown(self.visibility, size, None)
        self.scope = _grown(self.scope, size, _NO_SCOPE)
        self.in_csr = _grown(self.in_csr, size, False)
        self.dead = _grown(self.dead, size, False)
        self.relation_stamp = _grown(self.relation_stamp, size, 0)

    def _code(self, person: str, visibility: str) -> int:
        key = scope_key(person, visibility)
        code = self.scopes.get(key)
        if code is None:
            code = self.scopes[key] = len(self.scopes)
        return code

    def _codes(self, person: Iterable[str], visibility: Iterable[str]) -> list[int]:
        code = self._code
        return [code(p, v) for p, v in zip(person, visibility, strict=True)]

    def scope_codes(self, audience: Audience) -> npt.NDArray[np.int32] | None:
        """The scope codes of the relations ``audience`` may see; None when it sees everything."""
        if audience.everything:
            return None
        codes = [0]
        if audience.person:
            codes.append(self.scopes.get(scope_key(audience.person, PRIVATE), _NO_SCOPE))
        if audience.group:
            codes.append(self.scopes.get(f"group:{audience.group}", _NO_SCOPE))
        return np.asarray(codes, dtype=np.int32)

    def visible(self, rels: npt.NDArray[np.int64], allowed: npt.NDArray[np.int32]) -> npt.NDArray[np.bool_]:
        """Which of the relations ``rels`` have a scope in ``allowed`` (at most three codes)."""
        scope = self.scope[rels]
        mask: npt.NDArray[np.bool_] = scope == allowed[0]
        for code in allowed[1:].tolist():
            if code != _NO_SCOPE:
                mask |= scope == code
        return mask

    def visible_entities(self, allowed: npt.NDArray[np.int32] | None) -> npt.NDArray[np.bool_]:
        """Per entity id: whether a relation ``allowed`` may see touches it (every present one for None)."""
        if allowed is None:
            return self.present.copy()
        rids = self.live_relations()
        rids = rids[self.visible(rids, allowed)]
        out = np.zeros(len(self.present), dtype=bool)
        out[self.src[rids]] = True
        out[self.dst[rids]] = True
        return out

    def merge(self) -> None:
        """Rebuild the CSR from the live relation columns; the delta becomes empty."""
        rids = np.flatnonzero(self.live[: len(self.src)]).astype(_I)
        src, dst = self.src[rids], self.dst[rids]
        loop = src == dst
        heads = np.concatenate([src, dst[~loop]])
        tails = np.concatenate([dst, src[~loop]])
        keys = np.concatenate([rids, rids[~loop]])
        order = np.argsort(heads, kind="stable")  # by node; relation ids ascending per direction
        n_nodes = len(self.present)
        counts = np.bincount(heads, minlength=n_nodes) if len(heads) else np.zeros(n_nodes, dtype=_I)
        self.indptr = np.zeros(n_nodes + 1, dtype=_I)
        np.cumsum(counts, out=self.indptr[1:])
        self._ptr = self.indptr.data
        self.csr = np.stack([keys[order], tails[order]], axis=1)
        self.in_csr[:] = False
        self.in_csr[rids] = True
        self.dead[:] = False
        self.n_dead = 0
        self.delta = {}
        self.n_delta = 0
        self.merges += 1

    def rerank(self) -> None:
        """Recompute the rank orders of every present entity and live relation (none left at -1)."""
        eids = np.flatnonzero(self.present).astype(_I)
        self.eorder = eids[np.lexsort((eids, -self.updated[eids], -self.mentions[eids]))]
        self.erank = np.full(len(self.present), -1, dtype=_I)
        self.erank[self.eorder] = np.arange(len(eids), dtype=_I)
        rids = self.live_relations()
        self.rorder = rids[np.lexsort((rids, -self.rupdated[rids], -self.confidence[rids]))]
        self.rrank = np.full(len(self.live), -1, dtype=_I)
        self.rrank[self.rorder] = np.arange(len(rids), dtype=_I)
        self.n_unranked = 0
        self.reranks += 1

    # ------------------------------------------------------------ saved form

    def export(self) -> tuple[dict[str, npt.NDArray[Any]], dict[str, npt.NDArray[Any]]]:
        """Copies of the relation columns, CSR and rank orders, for the mirror file.

        Merges the delta and recomputes the ranks first (also when only removals happened since),
        so the CSR holds every live relation and the orders only present ids.
        Returns the numeric arrays and the two string columns (relation type, session) as
        object arrays, which :func:`encode_strings` turns into codes outside the caller's lock.
        """
        if self.delta or self.n_dead:
            self.merge()
        present = np.flatnonzero(self.present)
        rids = self.live_relations()
        # a removal leaves its id in the orders (ranks at -1, uncounted): the file holds present ids only
        if self.n_unranked or len(self.eorder) != len(present) or len(self.rorder) != len(rids):
            self.rerank()
        ne = int(present[-1]) + 1 if len(present) else 0
        nr = int(rids[-1]) + 1 if len(rids) else 0
        numeric = {
            "live": self.live[:nr],
            "src": self.src[:nr],
            "dst": self.dst[:nr],
            "confidence": self.confidence[:nr],
            "sentence": self.sentence[:nr],
            "rcreated": self.rcreated[:nr],
            "rupdated": self.rupdated[:nr],
            "indptr": self.indptr[: ne + 1],
            "csr": self.csr,
            "erank": self.erank[:ne],
            "eorder": self.eorder,
            "rrank": self.rrank[:nr],
            "rorder": self.rorder,
        }
        strings = {
            "rtype": self.rtype[:nr],
            "session": self.session[:nr],
            "person": self.person[:nr],
            "visibility": self.visibility[:nr],
        }
        return {k: v.copy() for k, v in numeric.items()}, {k: v.copy() for k, v in strings.items()}

    def load_saved(self, entities: tuple[list[int], list[str], list[str], list[int], list[float]], saved: Any) -> None:
        """Fill the columns from whole entity columns and a mirror file's arrays (no CSR build, no ranking).

        Raises:
            ValueError: the arrays do not fit together or do not fit the entities (nothing is changed then).
        """
        eid = entities[0]
        ne = max(eid) + 1 if eid else 0
        a = saved
        live = a["live"].astype(bool)
        nr = len(live)
        rids = np.flatnonzero(live)
        if any(len(a[k]) != nr for k in ("src", "dst", "confidence", "sentence", "rcreated", "rupdated", "rrank")):
            raise ValueError("relation columns of different lengths")
        if len(a["indptr"]) != ne + 1 or len(a["erank"]) != ne or len(a["eorder"]) != len(eid):
            raise ValueError("entity arrays do not fit the entity rows")
        if a["csr"].shape != (int(a["indptr"][-1]), 2) or len(a["rorder"]) != len(rids):
            raise ValueError("adjacency arrays do not fit the relation columns")
        present = np.zeros(ne, dtype=bool)
        present[np.asarray(eid, dtype=_I)] = True
        ends = np.concatenate([a["src"][rids], a["dst"][rids]])
        if len(ends) and (ends.min() < 0 or ends.max() >= ne or not present[ends].all()):
            raise ValueError("a relation's endpoint is not an entity of the database")
        rtype, session = decode_strings(a["rtype_codes"], a["rtype_vocab"]), decode_strings(
            a["session_codes"], a["session_vocab"]
        )
        person = decode_strings(a["person_codes"], a["person_vocab"])
        visibility = decode_strings(a["visibility_codes"], a["visibility_vocab"])
        if len(rtype) != nr or len(session) != nr or len(person) != nr or len(visibility) != nr:
            raise ValueError("string columns do not fit the relation columns")
        self.load(entities, ([], [], [], [], [], [], [], [], [], [], []), build=False)
        self._grow_relations(nr)
        self._grow_entities(ne)
        self.live[:nr] = live
        for name in ("src", "dst", "confidence", "sentence", "rcreated", "rupdated"):
            getattr(self, name)[:nr] = a[name]
        self.rtype[:nr] = rtype
        self.session[:nr] = session
        self.person[:nr] = person
        self.visibility[:nr] = visibility
        self.scope[rids] = self._codes(person[rids].tolist(), visibility[rids].tolist())
        self.n_live = len(rids)
        self.indptr = np.full(len(self.present) + 1, a["indptr"][-1], dtype=_I)
        self.indptr[: ne + 1] = a["indptr"]
        self._ptr = self.indptr.data
        self.csr = a["csr"].astype(_I)
        self.in_csr[:] = False
        self.in_csr[:nr] = live
        self.erank[:] = -1
        self.erank[:ne] = a["erank"]
        self.eorder = a["eorder"].astype(_I)
        self.rrank[:] = -1
        self.rrank[:nr] = a["rrank"]
        self.rorder = a["rorder"].astype(_I)
        self.n_unranked = 0

    # ---------------------------------------------------------------- mutation

    def set_entity(self, eid: int, name: str, etype: str, mentions: int, updated: float) -> None:
        """Add or update an entity's columns."""
        self._grow_entities(eid + 1)
        if not self.present[eid] or self.mentions[eid] != mentions or self.updated[eid] != updated:
            self.erank[eid] = -1
            self.n_unranked += 1
        old = self.name[eid]
        self.present[eid] = True
        self.name[eid] = name
        self.type[eid] = etype
        self.mentions[eid] = mentions
        self.updated[eid] = updated
        self.ebuilt[eid] = None
        if old != name:  # relations recalled before show the old name: build them anew
            for _, rid in self.incident(eid):
                self.rbuilt[rid] = None
        self._maybe_merge()

    def drop_entity(self, eid: int) -> list[int]:
        """Remove an entity and every relation touching it; returns those relation ids."""
        if eid >= len(self.present) or not self.present[eid]:
            return []
        gone = [rid for _, rid in self.incident(eid)]
        for rid in gone:
            self.drop_relation(rid)
        self.present[eid] = False
        self.name[eid] = None
        self.type[eid] = None
        self.ebuilt[eid] = None
        self.erank[eid] = -1
        return gone

    def set_relation(
        self,
        rid: int,
        src: int,
        dst: int,
        rtype: str,
        confidence: float,
        session: str,
        sentence: int | None,
        created: float,
        updated: float,
        person: str = "",
        visibility: str = PRIVATE,
    ) -> None:
        """Add or update an active relation (an endpoint change moves its edges)."""
        self._grow_relations(rid + 1)
        self._grow_entities(max(src, dst) + 1)
        if self.live[rid] and (self.src[rid] != src or self.dst[rid] != dst):
            self.drop_relation(rid)
        if not self.live[rid] or self.confidence[rid] != confidence or self.rupdated[rid] != updated:
            self.rrank[rid] = -1
            self.n_unranked += 1
        if not self.live[rid]:
            self.live[rid] = True
            self.n_live += 1
            self.src[rid], self.dst[rid] = src, dst
            self.delta.setdefault(src, {})[rid] = dst
            self.delta.setdefault(dst, {})[rid] = src
            self.n_delta += 1
        self.rtype[rid] = rtype
        self.confidence[rid] = confidence
        self.session[rid] = session
        self.sentence[rid] = _NO_SENTENCE if sentence is None else sentence
        self.rcreated[rid] = created
        self.rupdated[rid] = updated
        self.person[rid] = person
        self.visibility[rid] = visibility
        self.scope[rid] = self._code(person, visibility)
        self.rbuilt[rid] = None
        self._maybe_merge()

    def drop_relation(self, rid: int) -> None:
        """Remove a relation's edges (no-op when it is not live)."""
        if rid >= len(self.live) or not self.live[rid]:
            return
        self.live[rid] = False
        self.n_live -= 1
        if self.in_csr[rid]:
            self.in_csr[rid] = False
            self.dead[rid] = True
            self.n_dead += 1
        else:
            for end in (int(self.src[rid]), int(self.dst[rid])):
                nbrs = self.delta.get(end)
                if nbrs is not None and nbrs.pop(rid, None) is not None and not nbrs:
                    del self.delta[end]
            self.n_delta -= 1
        self.rtype[rid] = None
        self.session[rid] = None
        self.person[rid] = None
        self.visibility[rid] = None
        self.scope[rid] = _NO_SCOPE
        self.rbuilt[rid] = None
        self.rrank[rid] = -1
        self._maybe_merge()

    def forget_sentences(self, sentence_ids: Iterable[int]) -> None:
        """Drop the built rows of relations citing these sentences (their text changed or went)."""
        sids = np.fromiter(sentence_ids, dtype=_I)
        if len(sids):
            n = len(self.rbuilt)
            self.rbuilt[np.isin(self.sentence[:n], sids)] = None

    def _maybe_merge(self) -> None:
        if self.n_delta + self.n_dead > self.merge_at:
            self.merge()
        if self.n_unranked > self.merge_at:
            self.rerank()

    # ------------------------------------------------------------------- reads

    def expand(
        self, nodes: npt.NDArray[np.int64], allowed: npt.NDArray[np.int32] | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Every live edge at ``nodes``: ``(relation ids, other endpoints)``, CSR part first.

        ``allowed`` (:meth:`scope_codes`) keeps only the edges of relations that audience may see.
        """
        indptr, csr = self.indptr, self.csr
        if len(nodes) <= 16:  # a few slices beat the vectorised gather's dozen numpy calls
            ptr = self._ptr
            spans = [(ptr[n], ptr[n + 1]) for n in nodes.tolist()]
            if len(spans) == 1:
                a, b = spans[0]
                edges = csr[a:b]
            else:
                edges = np.concatenate([csr[a:b] for a, b in spans]) if spans else csr[:0]
        else:
            starts = indptr[nodes]
            lens = indptr[nodes + 1] - starts
            ends = np.cumsum(lens)
            total = int(ends[-1]) if len(ends) else 0
            idx = np.arange(total, dtype=_I) + np.repeat(starts - ends + lens, lens)
            edges = csr[idx]
        if self.n_dead and len(edges):
            edges = edges[~self.dead[edges[:, 0]]]
        if self.delta:
            extra: list[tuple[int, int]] = []
            get = self.delta.get
            for n in nodes.tolist():
                more = get(n)
                if more:
                    extra += more.items()
            if extra:
                edges = np.concatenate([edges, np.asarray(extra, dtype=_I)])
        if allowed is not None and len(edges):
            edges = edges[self.visible(edges[:, 0], allowed)]
        rels, nbrs = edges[:, 0], edges[:, 1]
        return rels, nbrs

    def incident(self, node: int, allowed: npt.NDArray[np.int32] | None = None) -> list[tuple[int, int]]:
        """``(other endpoint, relation id)`` of every live edge at ``node`` (that ``allowed`` sees), by relation id."""
        rels, nbrs = self.expand(np.asarray([node], dtype=_I), allowed)
        return sorted(zip(nbrs.tolist(), rels.tolist(), strict=True), key=lambda p: p[1])

    def out_edges(self, node: int, allowed: npt.NDArray[np.int32] | None = None) -> list[tuple[int, int, int]]:
        """``(node, target, relation id)`` of the live relations leaving ``node``, by relation id."""
        return [(node, other, rid) for other, rid in self.incident(node, allowed) if int(self.src[rid]) == node]

    def in_edges(self, node: int, allowed: npt.NDArray[np.int32] | None = None) -> list[tuple[int, int, int]]:
        """``(source, node, relation id)`` of the live relations entering ``node``, by relation id."""
        return [(other, node, rid) for other, rid in self.incident(node, allowed) if int(self.dst[rid]) == node]

    def next_stamp(self) -> int:
        """A fresh visit mark for a walk (the stamp arrays are cleared when the counter wraps)."""
        self.stamp += 1
        if self.stamp >= 2**31 - 1:
            self.entity_stamp[:] = 0
            self.relation_stamp[:] = 0
            self.stamp = 1
        return self.stamp

    def live_relations(self) -> npt.NDArray[np.int64]:
        """Ids of the live relations, ascending."""
        return np.flatnonzero(self.live).astype(_I)

    def edges(self) -> Iterator[tuple[int, int, int]]:
        """``(source, target, relation id)`` of every edge the CSR and delta hold (both passes).

        Used by consistency checks: each live relation must come out exactly once per endpoint.
        """
        for n in range(len(self.indptr) - 1):
            a, b = int(self.indptr[n]), int(self.indptr[n + 1])
            for rid, other in self.csr[a:b].tolist():
                if not self.dead[rid]:
                    yield n, other, rid
        for n, more in self.delta.items():
            for rid, other in more.items():
                yield n, other, rid

    def to_networkx(self, allowed: npt.NDArray[np.int32] | None = None) -> nx.MultiDiGraph[int]:
        """A fresh networkx ``MultiDiGraph``: nodes = entity ids, edges = live relations keyed by id,
        each with its ``person`` and ``visibility``.

        With ``allowed`` (:meth:`scope_codes`) only the relations that audience sees are edges, and
        only entities they touch are nodes.
        """
        rids = self.live_relations()
        if allowed is None:
            nodes = np.flatnonzero(self.present).tolist()
        else:
            rids = rids[self.visible(rids, allowed)]
            nodes = np.flatnonzero(self.visible_entities(allowed)).tolist()
        edges = zip(self.src[rids].tolist(), self.dst[rids].tolist(), rids.tolist(), strict=True)
        attrs = (
            {"person": p, "visibility": v}
            for p, v in zip(self.person[rids].tolist(), self.visibility[rids].tolist(), strict=True)
        )
        return build_multidigraph(nodes, edges, attrs)


class RelationRows(Mapping[int, RelationRow]):
    """The active relations by id, read from a :class:`CompactGraph`'s columns (a live view).

    The mirror keeps no row object per relation: a row is made when asked for, equal to what
    SQLite holds for it (every relation here is active).
    """

    def __init__(self, graph: CompactGraph) -> None:
        self._g = graph

    def __getitem__(self, rid: int) -> RelationRow:
        g = self._g
        try:
            if not g.live[rid] or rid < 0:
                raise KeyError(rid)
        except (IndexError, TypeError, ValueError):
            raise KeyError(rid) from None
        sentence = int(g.sentence[rid])
        return RelationRow(
            int(rid),
            int(g.src[rid]),
            int(g.dst[rid]),
            g.rtype[rid],
            float(g.confidence[rid]),
            g.session[rid],
            None if sentence == _NO_SENTENCE else sentence,
            "active",
            float(g.rcreated[rid]),
            float(g.rupdated[rid]),
            g.person[rid],
            g.visibility[rid],
        )

    def __contains__(self, rid: object) -> bool:
        try:
            return bool(self._g.live[rid]) and int(rid) >= 0  # type: ignore[call-overload]
        except (IndexError, TypeError, ValueError):
            return False

    def __iter__(self) -> Iterator[int]:
        return iter(self._g.live_relations().tolist())

    def __len__(self) -> int:
        return self._g.n_live

    def values(self) -> list[RelationRow]:  # type: ignore[override]
        """Every row, made column-wise (one pass per column instead of one lookup per id)."""
        g = self._g
        rids = g.live_relations()
        sentences = [None if s == _NO_SENTENCE else s for s in g.sentence[rids].tolist()]
        columns = zip(
            rids.tolist(),
            g.src[rids].tolist(),
            g.dst[rids].tolist(),
            g.rtype[rids].tolist(),
            g.confidence[rids].tolist(),
            g.session[rids].tolist(),
            sentences,
            repeat("active"),
            g.rcreated[rids].tolist(),
            g.rupdated[rids].tolist(),
            g.person[rids].tolist(),
            g.visibility[rids].tolist(),
        )
        return list(map(RelationRow._make, columns))
