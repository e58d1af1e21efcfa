"""A graph commit's triples on PostgreSQL in a few set-based statements, sent in one round trip.

The SQLite graph writes a commit statement by statement (about seven per triple), which costs
nothing in-process but is a round trip each to a server. :func:`write_triples` leaves the same
rows, :class:`~homeagent_core.memory.graph.writes.Changes` and
:class:`~homeagent_core.memory.graph.writes.CommitResult` with one statement per table, all
sent together in pipeline mode (the server runs them in order, in the caller's transaction):

* entities: the commit's names with their mention counts and the last type that is not the
  default (what repeated single upserts leave), keyword terms filled for new names;
* sentences: inserted unless present, ids read back by (text, session);
* relations: one row per (source, target, type) with the last confidence and the last sentence
  given, ``ON CONFLICT`` refreshing an existing one; ``xmax = 0`` tells an insert from a refresh,
  so ``added``/``refreshed`` count as one triple at a time would;
* media blocks and their ``contains`` edges (only when the commit links media).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from homeagent_core.memory.graph.schema import DEFAULT_TYPE, encode_terms
from homeagent_core.memory.graph.writes import Changes, CommitResult, PlannedTriple
from homeagent_core.memory.keywords import name_terms

if TYPE_CHECKING:
    import psycopg

__all__ = ["write_triples"]

_ENTITIES = (
    "INSERT INTO entities (name, type, mention_count, terms, created_at, updated_at)"
    " SELECT u.name, u.type, u.mentions, u.terms, %(now)s, %(now)s"
    " FROM unnest(%(names)s::text[], %(types)s::text[], %(counts)s::bigint[], %(terms)s::text[])"
    " WITH ORDINALITY AS u(name, type, mentions, terms, ord) ORDER BY u.ord"
    " ON CONFLICT (name) DO UPDATE SET mention_count = entities.mention_count + excluded.mention_count,"
    " updated_at = excluded.updated_at,"
    f" type = CASE WHEN excluded.type != '{DEFAULT_TYPE}' THEN excluded.type ELSE entities.type END,"
    " terms = CASE WHEN entities.terms = '' THEN excluded.terms ELSE entities.terms END"
    " RETURNING id, name"
)
_SENTENCES = (
    "WITH added AS (INSERT INTO sentences (text, session, created_at, person, visibility)"
    " SELECT u.text, %(session)s, %(now)s, %(person)s, %(visibility)s"
    " FROM unnest(%(texts)s::text[]) WITH ORDINALITY AS u(text, ord)"
    " ORDER BY u.ord ON CONFLICT (text, session) DO NOTHING RETURNING id, text)"
    " SELECT id, text FROM added UNION ALL"
    " SELECT id, text FROM sentences WHERE session = %(session)s AND text = ANY(%(texts)s::text[])"
)
_RELATIONS = (
    "INSERT INTO relations (source_id, target_id, type, confidence, session, sentence_id, created_at, updated_at,"
    " person, visibility)"
    " SELECT s.id, o.id, u.type, u.confidence, %(session)s, snt.id, %(now)s, %(now)s, %(person)s, %(visibility)s"
    " FROM unnest(%(subjects)s::text[], %(objects)s::text[], %(types)s::text[], %(confidences)s::float8[],"
    " %(texts)s::text[]) WITH ORDINALITY AS u(subject, object, type, confidence, text, ord)"
    " JOIN entities s ON s.name = u.subject JOIN entities o ON o.name = u.object"
    " LEFT JOIN sentences snt ON snt.text = u.text AND snt.session = %(session)s"
    " ORDER BY u.ord"
    " ON CONFLICT (source_id, target_id, type, session, person, visibility)"
    " DO UPDATE SET confidence = excluded.confidence,"
    " updated_at = excluded.updated_at, status = 'active',"
    " sentence_id = COALESCE(excluded.sentence_id, relations.sentence_id)"
    " RETURNING id, source_id, target_id, type, xmax = 0"
)
_BLOCKS = (
    "INSERT INTO memory_blocks (digest, mime, created_at, person, visibility)"
    " SELECT u.digest, u.mime, %(now)s, %(person)s, %(visibility)s FROM unnest(%(digests)s::text[], %(mimes)s::text[])"
    " WITH ORDINALITY AS u(digest, mime, ord) ORDER BY u.ord ON CONFLICT (digest) DO NOTHING"
)
_EDGES = (
    "INSERT INTO memory_block_edges (sentence_id, block_id, type, created_at, person, visibility)"
    " SELECT s.id, b.id, 'contains', %(now)s, %(person)s, %(visibility)s"
    " FROM unnest(%(texts)s::text[], %(digests)s::text[])"
    " WITH ORDINALITY AS u(text, digest, ord)"
    " JOIN sentences s ON s.text = u.text AND s.session = %(session)s JOIN memory_blocks b ON b.digest = u.digest"
    " ORDER BY u.ord ON CONFLICT DO NOTHING"
)
_LINKED = (
    "SELECT e.id, e.block_id FROM unnest(%(texts)s::text[], %(digests)s::text[]) AS u(text, digest)"
    " JOIN sentences s ON s.text = u.text AND s.session = %(session)s JOIN memory_blocks b ON b.digest = u.digest"
    " JOIN memory_block_edges e ON e.sentence_id = s.id AND e.block_id = b.id AND e.type = 'contains'"
)


def write_triples(
    conn: psycopg.Connection[Any],
    ch: Changes,
    planned: list[PlannedTriple],
    session: str,
    mimes: Mapping[str, str],
    now: float,
    person: str = "",
    visibility: str = "private",
) -> CommitResult:
    """Write a commit's planned triples in the caller's transaction (see the module text).

    Every row written records ``person`` and ``visibility``; a relation is refreshed only when
    the same person wrote it with the same visibility.
    """
    res = CommitResult()
    if not planned:
        return res
    mentions: dict[str, list[Any]] = {}  # name -> [mentions, last type that is not the default], in first-use order
    for t in planned:
        for name, etype in ((t.subject, t.subject_type), (t.object, t.object_type)):
            entry = mentions.setdefault(name, [0, DEFAULT_TYPE])
            entry[0] += 1
            if etype != DEFAULT_TYPE:
                entry[1] = etype
    relations: dict[tuple[str, str, str], list[Any]] = {}  # key -> [triples, last confidence, last sentence]
    for t in planned:
        entry = relations.setdefault((t.subject, t.object, t.relation), [0, 0.0, ""])
        entry[0] += 1
        entry[1] = t.confidence
        entry[2] = t.sentence or entry[2]
    texts = list(dict.fromkeys(t.sentence for t in planned if t.sentence))
    links = list(dict.fromkeys((t.sentence, d) for t in planned for d in t.digests))
    digests = list(dict.fromkeys(d for _, d in links))
    names = list(mentions)
    common = {"now": now, "session": session, "person": person, "visibility": visibility}
    with conn.pipeline(), conn.cursor() as entity_cur, conn.cursor() as sentence_cur, conn.cursor() as relation_cur:
        entity_cur.execute(_ENTITIES, {
            **common, "names": names, "types": [mentions[n][1] for n in names],
            "counts": [mentions[n][0] for n in names], "terms": [encode_terms(name_terms(n)) for n in names],
        })
        sentence_cur.execute(_SENTENCES, {**common, "texts": texts})
        keys = list(relations)
        relation_cur.execute(_RELATIONS, {
            **common, "subjects": [k[0] for k in keys], "objects": [k[1] for k in keys],
            "types": [k[2] for k in keys], "confidences": [relations[k][1] for k in keys],
            "texts": [relations[k][2] or None for k in keys],
        })
        link_cur = None
        if links:
            pairs = {**common, "texts": [s for s, _ in links], "digests": [d for _, d in links]}
            conn.execute(_BLOCKS, {**common, "digests": digests, "mimes": [mimes.get(d, "") for d in digests]})
            conn.execute(_EDGES, pairs)
            link_cur = conn.execute(_LINKED, pairs)
        entity_ids = {name: int(eid) for eid, name in entity_cur.fetchall()}
        sentence_ids = {text: int(sid) for sid, text in sentence_cur.fetchall()}
        written = relation_cur.fetchall()
        linked = link_cur.fetchall() if link_cur is not None else []
    relation_ids: dict[tuple[int, int, str], tuple[int, bool]] = {
        (int(s), int(o), rtype): (int(rid), bool(inserted)) for rid, s, o, rtype, inserted in written
    }
    counted: set[tuple[int, int, str]] = set()
    for t in planned:
        sid, oid = entity_ids[t.subject], entity_ids[t.object]
        for eid in (sid, oid):
            if eid not in ch.entities:
                res.entity_ids.append(eid)
                ch.entities.add(eid)
        if t.sentence:
            ch.sentences.add(sentence_ids[t.sentence])
            res.sentence_ids.append(sentence_ids[t.sentence])
        key = (sid, oid, t.relation)
        rid, inserted = relation_ids[key]
        if inserted and key not in counted:
            res.added += 1
        else:
            res.refreshed += 1
        counted.add(key)
        ch.relations.add(rid)
        res.relation_ids.append(rid)
        for digest in t.digests:
            if digest not in res.block_digests:
                res.block_digests.append(digest)
    for eid, bid in linked:
        ch.block_edges.add(int(eid))
        ch.blocks.add(int(bid))
    return res
