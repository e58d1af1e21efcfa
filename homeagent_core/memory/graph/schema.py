"""Schema, migrations and input rules of the graph store.

* :data:`MIGRATIONS` — each entry moves ``graph.db`` from version *i* to *i + 1*; a database
  from a newer HomeAgent is refused untouched (:func:`migrate`).
* :func:`check_name` / :func:`check_relation` — the original's entity-name rules (2–50
  characters, a letter, CJK character, ``-`` or ``_``, no control characters).
* :data:`PURGE_CRITERIA` and :func:`purge_where` — the criteria ``purge`` understands, turned
  into one SQL condition.
* Stored keyword terms — each entity row keeps the terms the mirror indexes its name under
  (``entities.terms``, tab-joined), so start-up reads them instead of running the tokenizer
  over every name. ``graph_meta.terms_fingerprint`` records which tokenizer produced them; when
  the tokenizer changes the terms are recomputed once (:func:`backfill_terms`).
"""

from __future__ import annotations

import math
import sqlite3
import unicodedata
from collections.abc import Mapping
from typing import Any

from homeagent_core.memory.keywords import name_terms, terms_fingerprint
from homeagent_sdk.errors import MemoryStoreError

__all__ = [
    "DEFAULT_TYPE",
    "MIGRATIONS",
    "NAME_MAX",
    "NAME_MIN",
    "PURGE_CRITERIA",
    "RELATION_MAX",
    "SCHEMA_VERSION",
    "add_person_visibility",
    "backfill_terms",
    "check_name",
    "check_relation",
    "decode_terms",
    "encode_terms",
    "marks",
    "migrate",
    "purge_where",
]

DEFAULT_TYPE = "Concept"
NAME_MIN, NAME_MAX = 2, 50
RELATION_MAX = 50

PURGE_CRITERIA: dict[str, str] = {
    "subject_contains": "the source entity's name contains this text (case-insensitive)",
    "target_contains": "the target entity's name contains this text (case-insensitive)",
    "relation_type": "the relation type equals this text",
    "session": "the relation was committed in this session",
    "before": "the relation was last updated before this Unix time (seconds)",
    "max_confidence": "the relation's confidence is at most this value",
}

# Each entry migrates the schema from version i to i + 1; never edit a shipped entry.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE entities (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL DEFAULT 'Concept',
            mention_count INTEGER NOT NULL DEFAULT 0,
            vector BLOB,
            vec_model TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL)""",
        """CREATE TABLE sentences (
            id INTEGER PRIMARY KEY,
            text TEXT NOT NULL,
            session TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            UNIQUE (text, session))""",
        """CREATE TABLE relations (
            id INTEGER PRIMARY KEY,
            source_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            target_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            type TEXT NOT NULL,
            confidence REAL NOT NULL DEFAULT 1.0,
            session TEXT NOT NULL DEFAULT '',
            sentence_id INTEGER REFERENCES sentences(id) ON DELETE SET NULL,
            status TEXT NOT NULL DEFAULT 'active',
            reviewed_at REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (source_id, target_id, type, session))""",
        "CREATE INDEX relations_target ON relations(target_id)",
        "CREATE INDEX relations_sentence ON relations(sentence_id)",
        """CREATE TABLE memory_blocks (
            id INTEGER PRIMARY KEY,
            digest TEXT NOT NULL UNIQUE,
            mime TEXT NOT NULL DEFAULT '',
            vector BLOB,
            vec_model TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL)""",
        """CREATE TABLE memory_block_edges (
            id INTEGER PRIMARY KEY,
            sentence_id INTEGER NOT NULL REFERENCES sentences(id) ON DELETE CASCADE,
            block_id INTEGER NOT NULL REFERENCES memory_blocks(id) ON DELETE CASCADE,
            type TEXT NOT NULL DEFAULT 'contains',
            created_at REAL NOT NULL,
            UNIQUE (sentence_id, block_id, type))""",
        "CREATE INDEX block_edges_block ON memory_block_edges(block_id)",
        """CREATE TABLE person_traits (
            entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            trait TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (entity_id, trait))""",
    ],
    [
        # '' = not computed yet; filled in the writing transaction or at the next start.
        "ALTER TABLE entities ADD COLUMN terms TEXT NOT NULL DEFAULT ''",
        "CREATE TABLE graph_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        # Writers that may replay a batch after a crash (the rule distiller) record its id in
        # the same transaction as its triples, so a replay is recognised and skipped.
        "CREATE TABLE applied_batches (batch_id TEXT PRIMARY KEY, applied_at REAL NOT NULL)",
    ],
    [
        # The review heartbeat counts answers that gave a relation no usable verdict since its
        # last change, so a batch the model never answers is retried a bounded number of times.
        "ALTER TABLE relations ADD COLUMN review_attempts INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relations ADD COLUMN review_attempted_at REAL",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, path: str) -> None:
    """Bring ``conn``'s schema to :data:`SCHEMA_VERSION`, one transaction per version.

    Raises:
        MemoryStoreError: the database was written by a newer schema (it is left untouched).
    """
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    current = int(row[0] or 0)
    if current > SCHEMA_VERSION:
        raise MemoryStoreError(
            f"graph memory {path} has schema version {current}, written by a newer "
            f"HomeAgent; this version understands up to {SCHEMA_VERSION}. Upgrade HomeAgent,"
            " or point core.memory.graph at another file (the data was not touched)."
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


#: Tables whose rows record whom they came from and who may see them.
MARKED_TABLES = ("relations", "sentences", "memory_blocks", "memory_block_edges")

_RELATIONS_WITH_MARKS = """CREATE TABLE relations_marked (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    target_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    confidence REAL NOT NULL DEFAULT 1.0,
    session TEXT NOT NULL DEFAULT '',
    sentence_id INTEGER REFERENCES sentences(id) ON DELETE SET NULL,
    status TEXT NOT NULL DEFAULT 'active',
    reviewed_at REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    review_attempts INTEGER NOT NULL DEFAULT 0,
    review_attempted_at REAL,
    person TEXT NOT NULL DEFAULT '',
    visibility TEXT NOT NULL DEFAULT 'private',
    UNIQUE (source_id, target_id, type, session, person, visibility))"""


def add_person_visibility(conn: sqlite3.Connection) -> bool:
    """Give relations, sentences, media blocks and block edges a ``person`` and a ``visibility``.

    The step that brings a graph written before there were people up to date (idempotent: a
    database that has the columns is left alone; returns whether anything changed). Existing
    rows get ``person`` "" — the owner's, claimed under the owner's name by
    :func:`~homeagent_core.memory.graph.writes.claim_for_owner` once the person registry is
    open — and ``visibility`` ``private``. A relation is then unique per (source, target,
    type, session, person, visibility): one person's private statement never refreshes
    another's row. SQLite cannot change a table's UNIQUE constraint in place, so ``relations``
    is rebuilt (ids kept). Runs in one transaction.
    """
    have = {r[1] for r in conn.execute("PRAGMA table_info(relations)")}
    if "person" in have and "visibility" in have:
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table in MARKED_TABLES[1:]:
            cols = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            if "person" not in cols:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN person TEXT NOT NULL DEFAULT ''")
            if "visibility" not in cols:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN visibility TEXT NOT NULL DEFAULT 'private'")
        conn.execute("DROP TABLE IF EXISTS relations_marked")
        conn.execute(_RELATIONS_WITH_MARKS)
        columns = (
            "id, source_id, target_id, type, confidence, session, sentence_id, status, reviewed_at,"
            " created_at, updated_at, review_attempts, review_attempted_at"
        )
        conn.execute(f"INSERT INTO relations_marked ({columns}) SELECT {columns} FROM relations")
        conn.execute("DROP TABLE relations")
        conn.execute("ALTER TABLE relations_marked RENAME TO relations")
        conn.execute("CREATE INDEX relations_target ON relations(target_id)")
        conn.execute("CREATE INDEX relations_sentence ON relations(sentence_id)")
        conn.execute("CREATE INDEX relations_person ON relations(person, visibility)")
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'mirror_stamp'").fetchone():
            # the rebuild fires no trigger: a mirror file saved before it must not match
            conn.execute("UPDATE mirror_stamp SET generation = generation + 1")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return True


def encode_terms(terms: set[str] | frozenset[str]) -> str:
    """Terms as stored in ``entities.terms`` (tab-joined; names never hold control characters)."""
    return "\t".join(sorted(terms))


def decode_terms(stored: str) -> list[str]:
    return stored.split("\t") if stored else []


def backfill_terms(conn: sqlite3.Connection, ids: list[int] | None = None) -> int:
    """Compute missing ``entities.terms`` (all of them after a tokenizer change).

    ``ids`` limits the check to those rows (a write's touched entities); None checks the whole
    table and first compares the stored tokenizer fingerprint. Runs inside the caller's
    transaction when there is one. Returns how many rows were filled.
    """
    if ids is None:
        fingerprint = terms_fingerprint()
        row = conn.execute("SELECT value FROM graph_meta WHERE key = 'terms_fingerprint'").fetchone()
        if row is None or row[0] != fingerprint:
            conn.execute("UPDATE entities SET terms = '' WHERE terms != ''")
            conn.execute(
                "INSERT INTO graph_meta (key, value) VALUES ('terms_fingerprint', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (fingerprint,),
            )
        todo = conn.execute("SELECT id, name FROM entities WHERE terms = ''").fetchall()
    else:
        todo = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            todo += conn.execute(
                f"SELECT id, name FROM entities WHERE terms = '' AND id IN ({marks(chunk)})", chunk
            ).fetchall()
    if todo:
        conn.executemany(
            "UPDATE entities SET terms = ? WHERE id = ?",
            [(encode_terms(name_terms(name)), eid) for eid, name in todo],
        )
    return len(todo)


def check_name(name: str) -> str | None:
    """Why ``name`` (already trimmed) cannot be an entity name, or None when it can."""
    if not name:
        return "the name is empty"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co") for c in name):
        return "the name contains control characters"
    if len(name) < NAME_MIN:
        return f"the name {name!r} is shorter than {NAME_MIN} characters"
    if len(name) > NAME_MAX:
        return f"the name is longer than {NAME_MAX} characters ({len(name)})"
    if not any(c.isalpha() or c in "-_" for c in name):
        return f"the name {name!r} has no letter, CJK character, '-' or '_'"
    return None


def check_relation(relation: str) -> str | None:
    """Why ``relation`` (already trimmed) cannot be a relation type, or None when it can."""
    if not relation:
        return "the relation is empty"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co") for c in relation):
        return "the relation contains control characters"
    if len(relation) > RELATION_MAX:
        return f"the relation is longer than {RELATION_MAX} characters ({len(relation)})"
    return None


def marks(items: list[Any]) -> str:
    """``?, ?, …`` for an ``IN (…)`` over ``items``."""
    return ", ".join("?" * len(items))


def purge_where(criteria: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The SQL condition (over ``relations``) and its arguments for purge ``criteria``.

    Raises:
        MemoryStoreError: no criteria, an unknown key, or a value of the wrong kind.
    """
    if not isinstance(criteria, Mapping) or not criteria:
        raise MemoryStoreError("purge needs at least one criterion: " + ", ".join(sorted(PURGE_CRITERIA)))
    unknown = sorted(set(criteria) - set(PURGE_CRITERIA))
    if unknown:
        raise MemoryStoreError(f"unknown purge criteria {unknown}; use: {', '.join(sorted(PURGE_CRITERIA))}")
    conds: list[str] = []
    args: list[Any] = []
    for key, value in criteria.items():
        if key in ("subject_contains", "target_contains", "relation_type", "session"):
            if not isinstance(value, str) or (key != "session" and not value.strip()):
                raise MemoryStoreError(f"purge criterion {key} must be a non-empty string")
            if key == "relation_type":
                conds.append("type = ?")
                args.append(value.strip())
            elif key == "session":
                conds.append("session = ?")
                args.append(value)
            else:
                col = "source_id" if key == "subject_contains" else "target_id"
                conds.append(f"{col} IN (SELECT id FROM entities WHERE instr(lower(name), lower(?)) > 0)")
                args.append(value.strip())
        else:
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise MemoryStoreError(f"purge criterion {key} must be a number, got {value!r}")
            conds.append("updated_at < ?" if key == "before" else "confidence <= ?")
            args.append(float(value))
    return " AND ".join(conds), args
