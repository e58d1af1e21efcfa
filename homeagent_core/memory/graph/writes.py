"""Write operations of the graph store, each the body of one SQL transaction.

Every function takes the open connection and a :class:`Changes` it fills with every id it
inserts, updates or deletes; :class:`~homeagent_core.memory.graph.store.GraphStore` runs it through
its persistence layer (:class:`~homeagent_core.memory.graph.sql.GraphSQL`) and then refreshes
exactly those rows in the mirror. ``clock`` gives the timestamp written.

Rules kept from the original:

* entity names are trimmed and must be 2–50 characters, contain a letter, a CJK character,
  ``-`` or ``_``, and no control characters; triples breaking this are skipped with a reason;
* committing an entity again counts a mention (``mention_count + 1``); a relation is unique on
  (source, target, type, session, person, visibility): the same triple again in the same session
  from the same person with the same visibility only refreshes its confidence and timestamp —
  one person's private statement never touches another's row;
* every relation, sentence, media block and block edge records the ``person`` it came from and
  its ``visibility`` (:mod:`homeagent_sdk.visibility`); entities are shared names. A sentence,
  block or block edge already stored keeps the marks of its first writer (what is shown is
  decided by the relations citing them);
* ``purge`` soft-deletes (``status = 'deleted'``, kept on disk, gone from recall) or hard-deletes
  relations matching criteria; ``edit`` is a hard delete of the old triple plus a commit of the
  new one, in one transaction;
* media are ``memory_blocks`` rows linked ``sentence --contains--> block``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from homeagent_core.memory.graph.model import Changes
from homeagent_core.memory.graph.schema import DEFAULT_TYPE, NAME_MAX, check_name, check_relation, marks
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.types import Triple
from homeagent_sdk.visibility import HOUSEHOLD, PRIVATE, valid_visibility

__all__ = [
    "Changes",
    "CommitResult",
    "PlannedTriple",
    "TripleWriter",
    "claim_for_owner",
    "commit",
    "commit_triples",
    "delete_entity",
    "edit",
    "merge",
    "merge_blocks",
    "plan_triples",
    "prune_batches",
    "purge",
]

_DIGEST = re.compile(r"^[0-9a-f]{64}$")


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


def commit(
    conn: sqlite3.Connection,
    ch: Changes,
    items: list[Triple],
    session: str,
    mimes: Mapping[str, str],
    batch_id: str | None,
    clock: Callable[[], float],
    person: str = "",
    visibility: str = PRIVATE,
) -> CommitResult:
    """Commit triples at most once per ``batch_id`` (recorded in the same transaction)."""
    if batch_id is not None:
        fresh = conn.execute(
            "INSERT INTO applied_batches (batch_id, applied_at) VALUES (?, ?)"
            " ON CONFLICT (batch_id) DO NOTHING RETURNING batch_id",
            (batch_id, clock()),
        ).fetchall()
        if not fresh:
            return CommitResult(duplicate=True)
    return commit_triples(conn, ch, items, session, mimes, clock, person, visibility)


def prune_batches(conn: sqlite3.Connection, older_than_s: float, clock: Callable[[], float]) -> int:
    """Forget batch ids recorded more than ``older_than_s`` seconds ago; returns how many."""
    cutoff = clock() - older_than_s
    gone = conn.execute("DELETE FROM applied_batches WHERE applied_at < ? RETURNING 1", (cutoff,))
    return len(gone.fetchall())


@dataclass(frozen=True, slots=True)
class PlannedTriple:
    """A triple that passed the checks, trimmed, with its sentence and usable media digests."""

    subject: str
    subject_type: str
    object: str
    object_type: str
    relation: str
    confidence: float
    sentence: str
    """The sentence text ("" for none)."""
    digests: tuple[str, ...]
    """Full sha256 digests to link to the sentence (empty without a sentence)."""


@runtime_checkable
class TripleWriter(Protocol):
    """A connection that writes a commit's planned triples its own way (a few set-based statements).

    It must leave the same rows, :class:`Changes` and :class:`CommitResult` (``skipped`` aside)
    as the statement-by-statement writes of :func:`commit_triples` on SQLite.
    """

    def write_triples(
        self,
        ch: Changes,
        planned: list[PlannedTriple],
        session: str,
        mimes: Mapping[str, str],
        now: float,
        person: str,
        visibility: str,
    ) -> CommitResult: ...


def plan_triples(triples: list[Triple]) -> tuple[list[PlannedTriple], list[str]]:
    """The valid triples, and the reasons for what is skipped (in triple order)."""
    planned: list[PlannedTriple] = []
    skipped: list[str] = []
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
            skipped.append(f"{t.subject!r} -{t.relation}-> {t.object!r}: {reason}")
            continue
        text = t.sentence_text.strip()
        if not text and t.media_digests:
            text = f"{subject}{relation}{obj}。"
        digests = []
        for digest in t.media_digests:
            if not text or not _DIGEST.match(digest):
                skipped.append(f"media digest {digest!r}: not a full sha256 digest")
            else:
                digests.append(digest)
        planned.append(
            PlannedTriple(
                subject, _entity_type(t.subject_type), obj, _entity_type(t.object_type), relation, float(conf),
                text, tuple(digests),
            )
        )
    return planned, skipped


def _entity_type(etype: str) -> str:
    return etype.strip()[:NAME_MAX] or DEFAULT_TYPE


def commit_triples(
    conn: sqlite3.Connection,
    ch: Changes,
    triples: list[Triple],
    session: str,
    mimes: Mapping[str, str],
    clock: Callable[[], float],
    person: str = "",
    visibility: str = PRIVATE,
) -> CommitResult:
    """Upsert each valid triple's entities, sentence, relation and media links (the body of a commit).

    Every row written records ``person`` and ``visibility``. A connection that is a
    :class:`TripleWriter` writes them itself (PostgreSQL: a few statements per commit instead of
    several per triple).

    Raises:
        MemoryStoreError: ``visibility`` is not a visibility (private, household, group:<thread>).
    """
    if not valid_visibility(visibility):
        raise MemoryStoreError(
            f"unknown visibility {visibility!r}; use {PRIVATE!r}, {HOUSEHOLD!r} or 'group:<thread>'"
        )
    now = clock()
    planned, skipped = plan_triples(triples)
    if isinstance(conn, TripleWriter):
        res = conn.write_triples(ch, planned, session, mimes, now, person, visibility)
    else:
        res = _write_each(conn, ch, planned, session, mimes, now, person, visibility)
    res.skipped = skipped
    return res


def _write_each(
    conn: sqlite3.Connection,
    ch: Changes,
    planned: list[PlannedTriple],
    session: str,
    mimes: Mapping[str, str],
    now: float,
    person: str,
    visibility: str,
) -> CommitResult:
    """Write the planned triples one statement at a time (SQLite: no round trips)."""
    res = CommitResult()
    for t in planned:
        sid = _upsert_entity(conn, t.subject, t.subject_type, now)
        oid = _upsert_entity(conn, t.object, t.object_type, now)
        for eid in (sid, oid):
            if eid not in ch.entities:
                res.entity_ids.append(eid)
                ch.entities.add(eid)
        sentence_id = _upsert_sentence(conn, t.sentence, session, now, person, visibility) if t.sentence else None
        if sentence_id is not None:
            ch.sentences.add(sentence_id)
            res.sentence_ids.append(sentence_id)
        row = conn.execute(
            "SELECT id FROM relations WHERE source_id = ? AND target_id = ? AND type = ? AND session = ?"
            " AND person = ? AND visibility = ?",
            (sid, oid, t.relation, session, person, visibility),
        ).fetchone()
        if row is not None:
            rid = row[0]
            conn.execute(
                "UPDATE relations SET confidence = ?, updated_at = ?, status = 'active',"
                " sentence_id = COALESCE(?, sentence_id) WHERE id = ?",
                (t.confidence, now, sentence_id, rid),
            )
            res.refreshed += 1
        else:
            rid = conn.execute(
                "INSERT INTO relations (source_id, target_id, type, confidence, session,"
                " sentence_id, created_at, updated_at, person, visibility) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (sid, oid, t.relation, t.confidence, session, sentence_id, now, now, person, visibility),
            ).lastrowid
            assert rid is not None
            res.added += 1
        ch.relations.add(rid)
        res.relation_ids.append(rid)
        for digest in t.digests:
            assert sentence_id is not None
            _link_block(conn, ch, sentence_id, digest, mimes.get(digest, ""), now, person, visibility)
            if digest not in res.block_digests:
                res.block_digests.append(digest)
    return res


def _upsert_entity(conn: sqlite3.Connection, name: str, etype: str, now: float) -> int:
    row = conn.execute(
        "INSERT INTO entities (name, type, mention_count, created_at, updated_at)"
        " VALUES (?, ?, 1, ?, ?) ON CONFLICT (name) DO UPDATE SET"
        " mention_count = entities.mention_count + 1, updated_at = excluded.updated_at,"
        " type = CASE WHEN excluded.type != 'Concept' THEN excluded.type ELSE entities.type END"
        " RETURNING id",
        (name, etype, now, now),
    ).fetchone()
    return int(row[0])


def _upsert_sentence(
    conn: sqlite3.Connection, text: str, session: str, now: float, person: str, visibility: str
) -> int:
    row = conn.execute("SELECT id FROM sentences WHERE text = ? AND session = ?", (text, session)).fetchone()
    if row is not None:
        return int(row[0])
    rid = conn.execute(
        "INSERT INTO sentences (text, session, created_at, person, visibility) VALUES (?, ?, ?, ?, ?)",
        (text, session, now, person, visibility),
    ).lastrowid
    assert rid is not None
    return rid


def _link_block(
    conn: sqlite3.Connection,
    ch: Changes,
    sentence_id: int,
    digest: str,
    mime: str,
    now: float,
    person: str,
    visibility: str,
) -> None:
    conn.execute(
        "INSERT INTO memory_blocks (digest, mime, created_at, person, visibility) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (digest) DO NOTHING",
        (digest, mime, now, person, visibility),
    )
    (bid,) = conn.execute("SELECT id FROM memory_blocks WHERE digest = ?", (digest,)).fetchone()
    conn.execute(
        "INSERT INTO memory_block_edges (sentence_id, block_id, type, created_at, person, visibility)"
        " VALUES (?, ?, 'contains', ?, ?, ?) ON CONFLICT DO NOTHING",
        (sentence_id, bid, now, person, visibility),
    )
    (eid,) = conn.execute(
        "SELECT id FROM memory_block_edges WHERE sentence_id = ? AND block_id = ? AND type = 'contains'",
        (sentence_id, bid),
    ).fetchone()
    ch.blocks.add(bid)
    ch.block_edges.add(eid)


def _entity_id(conn: sqlite3.Connection, name: str, what: str) -> tuple[int, int, str]:
    row = conn.execute("SELECT id, mention_count, type FROM entities WHERE name = ?", (name.strip(),)).fetchone()
    if row is None:
        raise MemoryStoreError(
            f"unknown entity {name!r} ({what}); names must match exactly — use memory_recall to find the stored name"
        )
    return int(row[0]), int(row[1]), str(row[2])


def merge(conn: sqlite3.Connection, ch: Changes, keep: str, drop: str, clock: Callable[[], float]) -> dict[str, int]:
    """Fold entity ``drop`` into ``keep``: its relations move over, mentions add up (see ``GraphStore.merge``)."""
    kid, _, ktype = _entity_id(conn, keep, "the entity to keep")
    did, dcount, dtype = _entity_id(conn, drop, "the entity to merge away")
    if kid == did:
        raise MemoryStoreError(f"cannot merge {keep!r} into itself; name two entities")
    now = clock()
    moved = deduplicated = removed = 0
    rows = conn.execute(
        "SELECT id, source_id, target_id, type, session, confidence, status, person, visibility FROM relations"
        " WHERE source_id = ? OR target_id = ?",
        (did, did),
    ).fetchall()
    for rid, s, t, rtype, session, conf, status, person, visibility in rows:
        ch.relations.add(rid)
        ns, nt = (kid if s == did else s), (kid if t == did else t)
        if ns == nt:
            conn.execute("DELETE FROM relations WHERE id = ?", (rid,))
            removed += 1
            continue
        dup = conn.execute(
            "SELECT id, confidence, status FROM relations WHERE source_id = ? AND"
            " target_id = ? AND type = ? AND session = ? AND person = ? AND visibility = ? AND id != ?",
            (ns, nt, rtype, session, person, visibility, rid),
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
    # traits keep kept's value where both have one (the rest go with the dropped entity)
    conn.execute(
        "UPDATE person_traits SET entity_id = ? WHERE entity_id = ? AND trait NOT IN"
        " (SELECT trait FROM person_traits WHERE entity_id = ?)",
        (kid, did, kid),
    )
    new_type = dtype if ktype == DEFAULT_TYPE else ktype
    conn.execute(
        "UPDATE entities SET mention_count = mention_count + ?, type = ?, updated_at = ? WHERE id = ?",
        (dcount, new_type, now, kid),
    )
    conn.execute("DELETE FROM entities WHERE id = ?", (did,))
    ch.entities.update((kid, did))
    return {"moved": moved, "deduplicated": deduplicated, "removed_self_loops": removed}


def purge(
    conn: sqlite3.Connection,
    ch: Changes,
    where: str,
    args: list[Any],
    mode: str,
    before_commit: Callable[[int], object] | None,
    clock: Callable[[], float],
) -> int:
    """Soft- or hard-delete the relations matching ``where`` (a :func:`purge_where` condition,
    AND-ed with an audience's condition when a turn purges only what it may see)."""
    if mode == "soft":
        rows = conn.execute(
            f"UPDATE relations SET status = 'deleted', updated_at = ? WHERE status = 'active' AND {where} RETURNING id",
            (clock(), *args),
        ).fetchall()
    else:
        rows = conn.execute(f"DELETE FROM relations WHERE {where} RETURNING id", args).fetchall()
    ch.relations.update(r[0] for r in rows)
    if before_commit is not None:
        before_commit(len(rows))
    return len(rows)


def edit(
    conn: sqlite3.Connection,
    ch: Changes,
    old: tuple[str, str, str],
    new: Triple,
    session: str,
    before_commit: Callable[[CommitResult], object] | None,
    clock: Callable[[], float],
    visible: tuple[str, list[Any]] = ("(1=1)", []),
) -> CommitResult:
    """Replace the relation ``old`` = (subject, relation, object), every session, with ``new``.

    Only relations matching ``visible`` (an audience's SQL condition over ``r.person`` and
    ``r.visibility``) are replaced; the new triple keeps each replaced relation's person and
    visibility.
    """
    subject, relation, obj = old
    where, args = visible
    found = conn.execute(
        "SELECT r.id, r.person, r.visibility FROM relations r JOIN entities s ON s.id = r.source_id"
        " JOIN entities t ON t.id = r.target_id"
        f" WHERE s.name = ? AND r.type = ? AND t.name = ? AND r.status = 'active' AND {where}",
        (subject.strip(), relation.strip(), obj.strip(), *args),
    ).fetchall()
    ids = [r[0] for r in found]
    if not ids:
        raise MemoryStoreError(
            f"no relation {subject!r} -{relation}-> {obj!r} to edit; use memory_recall"
            " to see the stored names and relation types"
        )
    conn.execute(f"DELETE FROM relations WHERE id IN ({marks(ids)})", ids)
    ch.relations.update(ids)
    result = CommitResult()
    for person, visibility in dict.fromkeys((r[1], r[2]) for r in found):
        part = commit_triples(conn, ch, [new], session, {}, clock, person, visibility)
        if part.skipped:
            raise MemoryStoreError(f"the new triple is invalid: {part.skipped[0]}")
        result.added += part.added
        result.refreshed += part.refreshed
        result.entity_ids += [e for e in part.entity_ids if e not in result.entity_ids]
        result.relation_ids += part.relation_ids
        result.sentence_ids += part.sentence_ids
    if before_commit is not None:
        before_commit(result)
    return result


def claim_for_owner(conn: sqlite3.Connection, ch: Changes, owner: str, alias: str, clock: Callable[[], float]) -> int:
    """Give the rows written before there were people (``person`` "") to ``owner``; returns the relations claimed.

    Relations, sentences, media blocks and block edges with no person become ``owner``'s (their
    visibility stays ``private``). The entity ``alias`` ("用户", the subject the distillers used
    for the one user there was) then becomes the owner's entity: renamed to ``owner``, or folded
    into it when the owner already has one (:func:`merge`). Idempotent: nothing is left to
    claim the second time.
    """
    rows = conn.execute("UPDATE relations SET person = ? WHERE person = '' RETURNING id", (owner,)).fetchall()
    ch.relations.update(r[0] for r in rows)
    marked = (("sentences", ch.sentences), ("memory_blocks", ch.blocks), ("memory_block_edges", ch.block_edges))
    for table, kind in marked:
        claimed = conn.execute(f"UPDATE {table} SET person = ? WHERE person = '' RETURNING id", (owner,))
        kind.update(r[0] for r in claimed)
    if alias and alias != owner and check_name(owner) is None:
        old = conn.execute("SELECT id FROM entities WHERE name = ?", (alias,)).fetchone()
        if old is not None:
            if conn.execute("SELECT 1 FROM entities WHERE name = ?", (owner,)).fetchone() is None:
                conn.execute(
                    "UPDATE entities SET name = ?, terms = '', type = 'person', updated_at = ? WHERE id = ?",
                    (owner, clock(), old[0]),
                )
                ch.entities.add(int(old[0]))
            else:
                merge(conn, ch, owner, alias, clock)
    return len(rows)


def delete_entity(conn: sqlite3.Connection, ch: Changes, name: str) -> int:
    """Delete an entity with all its relations and traits; returns the relations removed."""
    eid, _, _ = _entity_id(conn, name, "the entity to delete")
    ids = [r[0] for r in conn.execute("SELECT id FROM relations WHERE source_id = ? OR target_id = ?", (eid, eid))]
    conn.execute("DELETE FROM entities WHERE id = ?", (eid,))
    ch.relations.update(ids)
    ch.entities.add(eid)
    return len(ids)


def merge_blocks(conn: sqlite3.Connection, ch: Changes, keep: str, drop: str) -> int:
    """Fold media block ``drop`` into ``keep`` (full digests); returns edges moved."""
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
    # an edge the kept block already has stays once (the other goes with the dropped block)
    moved = len(
        conn.execute(
            "UPDATE memory_block_edges SET block_id = ? WHERE block_id = ? AND NOT EXISTS"
            " (SELECT 1 FROM memory_block_edges k WHERE k.block_id = ? AND"
            " k.sentence_id = memory_block_edges.sentence_id AND k.type = memory_block_edges.type) RETURNING id",
            (kid, did, kid),
        ).fetchall()
    )
    conn.execute("DELETE FROM memory_blocks WHERE id = ?", (did,))
    ch.blocks.update((kid, did))
    return int(moved)


def _prefixed(what: str, reason: str | None) -> str | None:
    return None if reason is None else f"{what}: {reason}"
