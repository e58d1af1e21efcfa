"""The graph mirror's relation columns, CSR adjacency and rank orders, saved beside ``graph.db``.

Opening a graph of a million relations spends most of its time reading the relation rows and
building the compact form from them. ``<db>.mirror`` keeps that compact form: after a clean
load or on close the store writes it, and the next open reads it instead of the relations
table when its stamp matches the database (entities, sentences and media are still read from
SQLite: the keyword index is built from the entity rows).

Layout: an 8-byte magic, a little-endian ``u32`` header length, a JSON header (format version,
the stamp, and per array its name, dtype, shape and crc32), then the raw little-endian arrays.
Writes go to ``<name>.tmp``, are fsynced and renamed over the old file, and the folder is
fsynced, so a crash leaves the previous file or the new one (a partial ``.tmp`` is ignored and
removed on the next write).

The stamp (:func:`read_stamp`) is the database's identity (a random id stored when the store
first opens it), its write generation (bumped by triggers inside every transaction that
writes an entity or relation row, so any commit after the file was written — also the last
one before a ``kill -9`` — makes the file stale), the schema version, the entity count and the
highest entity and relation ids. A file whose stamp, structure or checksums do
not match is refused with the reason, and the store loads from SQLite as without a file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import struct
import uuid
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from homeagent_core.memory.graph.schema import SCHEMA_VERSION
from homeagent_sdk._atomic import atomic_file

__all__ = [
    "MirrorFileError",
    "ensure_identity",
    "mirror_path",
    "read_mirror",
    "read_stamp",
    "remove_partial",
    "write_mirror",
]

log = logging.getLogger("homeagent_core.memory.graph.store")

MAGIC = b"HAGRAPH\x01"
VERSION = 1
_CHUNK = 1 << 20
Stamp = dict[str, Any]


class MirrorFileError(ValueError):
    """A mirror file that cannot be used: missing, of another database or generation, or damaged."""


def mirror_path(db_path: str) -> Path:
    """Where the mirror file of the database at ``db_path`` lives."""
    return Path(db_path + ".mirror")


def _tmp(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")


def ensure_identity(conn: sqlite3.Connection) -> None:
    """Give the database its identity and write generation, and the triggers that count writes.

    The ``mirror_stamp`` table holds one row; a trigger on every insert, update and delete of an
    entity or relation row bumps its generation inside the writing transaction, whoever writes
    (the store, the store migration, an older HomeAgent, the sqlite3 shell). It is a cache
    stamp, not graph data, so it is not in the schema migrations nor copied between databases.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS mirror_stamp"
        " (id INTEGER PRIMARY KEY CHECK (id = 1), identity TEXT NOT NULL, generation INTEGER NOT NULL)"
    )
    conn.execute("INSERT OR IGNORE INTO mirror_stamp (id, identity, generation) VALUES (1, ?, 0)", (uuid.uuid4().hex,))
    for table in ("entities", "relations"):
        for event in ("INSERT", "UPDATE", "DELETE"):
            conn.execute(
                f"CREATE TRIGGER IF NOT EXISTS mirror_stamp_{table}_{event.lower()} AFTER {event} ON {table}"
                " BEGIN UPDATE mirror_stamp SET generation = generation + 1; END"
            )


def read_stamp(conn: sqlite3.Connection) -> Stamp:
    """What a mirror file must have been written for: identity, generation, schema and row numbers."""
    row = conn.execute("SELECT identity, generation FROM mirror_stamp").fetchone()
    identity, generation = row if row is not None else ("", -1)
    (entities, max_entity) = conn.execute("SELECT count(*), coalesce(max(id), 0) FROM entities").fetchone()
    (max_relation,) = conn.execute("SELECT coalesce(max(id), 0) FROM relations").fetchone()
    return {
        "identity": str(identity),
        "generation": int(generation),
        "schema": SCHEMA_VERSION,
        "entities": int(entities),
        "max_entity": int(max_entity),
        "max_relation": int(max_relation),
    }


def write_mirror(path: Path, stamp: Stamp, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` with ``stamp`` to ``path`` atomically (tmp file, fsync, rename, fsync the folder)."""
    parts = {name: np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")) for name, a in arrays.items()}
    for name, a in parts.items():
        if a.dtype.hasobject:
            raise TypeError(f"mirror array {name} holds Python objects; only numbers are saved")
    fields = [
        {"name": name, "dtype": a.dtype.newbyteorder("<").str, "shape": list(a.shape), "crc32": zlib.crc32(a.data)}
        for name, a in parts.items()
    ]
    header = json.dumps({"version": VERSION, "stamp": stamp, "arrays": fields}).encode()
    with atomic_file(path, tmp=_tmp(path)) as fh:
        fh.write(MAGIC + struct.pack("<I", len(header)) + header)
        for a in parts.values():
            view = a.reshape(-1).view(np.uint8).data
            for start in range(0, len(view), _CHUNK):
                fh.write(view[start : start + _CHUNK])


def read_mirror(path: Path, stamp: Stamp) -> dict[str, np.ndarray]:
    """The arrays of the mirror file at ``path``, checked against ``stamp`` and their checksums.

    Raises:
        MirrorFileError: the file is missing, of another format, written for another database
            or generation, truncated, or damaged (the message says which).
    """
    try:
        with open(path, "rb") as fh:
            data = memoryview(fh.read())
    except FileNotFoundError:
        raise MirrorFileError(f"{path}: no mirror file") from None
    except OSError as exc:
        raise MirrorFileError(f"{path}: cannot read: {exc}") from exc
    head = len(MAGIC) + 4
    if len(data) < head or bytes(data[: len(MAGIC)]) != MAGIC:
        raise MirrorFileError(f"{path}: not a graph mirror file of version {VERSION}")
    (size,) = struct.unpack("<I", data[len(MAGIC) : head])
    try:
        meta = json.loads(bytes(data[head : head + size]))
        fields, saved = list(meta["arrays"]), dict(meta["stamp"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
        raise MirrorFileError(f"{path}: unreadable header: {exc}") from exc
    if meta.get("version") != VERSION:
        raise MirrorFileError(f"{path}: format version {meta.get('version')} is not {VERSION}")
    if saved.get("identity") != stamp["identity"]:
        raise MirrorFileError(f"{path}: written for another graph database")
    if saved != stamp:
        changed = ", ".join(f"{k} {saved.get(k)!r} -> {v!r}" for k, v in stamp.items() if saved.get(k) != v)
        raise MirrorFileError(f"{path}: stale, the database changed since it was written ({changed})")
    out: dict[str, np.ndarray] = {}
    offset = head + size
    try:
        for field in fields:
            dtype = np.dtype(field["dtype"])
            if dtype.hasobject:
                raise MirrorFileError(f"{path}: array {field['name']} is not numeric")
            shape = tuple(int(n) for n in field["shape"])
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            chunk = data[offset : offset + nbytes]
            if len(chunk) != nbytes:
                raise MirrorFileError(f"{path}: truncated in array {field['name']}")
            if zlib.crc32(chunk) != int(field["crc32"]):
                raise MirrorFileError(f"{path}: array {field['name']} is damaged (checksum mismatch)")
            out[str(field["name"])] = np.frombuffer(chunk, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))
            offset += nbytes
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, MirrorFileError):
            raise
        raise MirrorFileError(f"{path}: unreadable array description: {exc}") from exc
    if offset != len(data):
        raise MirrorFileError(f"{path}: trailing bytes after the last array")
    return out


def remove_partial(path: Path) -> None:
    """Delete a partial file a crash left mid-write (readers never look at it)."""
    with contextlib.suppress(OSError):
        _tmp(path).unlink()
