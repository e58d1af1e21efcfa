"""Content-addressed media store: memory's images (and other attachments) as first-class blocks.

Layout under ``root`` (``<data>/memory/media/``)::

    media.db                 SQLite (WAL): one row per digest — mime, size, name, vector, vec_model
    blobs/<2 hex>/<62 hex>   the bytes, named by their sha256

Rules: identical bytes are stored once; a blob is written to ``<name>.tmp``, fsynced, then
renamed, and only then is its row committed, so a crash never leaves a row without its bytes;
every read re-hashes the bytes and raises :class:`MemoryStoreError` instead of returning
corrupted data; digests may be abbreviated to 12 or more hex characters when unambiguous. Each
block carries its own vector and the fingerprint of the space it was embedded in, and takes part
in vector search directly (no caption in between). There is no garbage collection and no
reference counting: deleting a block deletes its bytes. A store built with ``enabled=False``
(``core.memory.media.enabled=false``) keeps nothing: ``put`` returns ``None`` and ``search``
returns nothing, so callers fall back to text-only behaviour.

The metadata rows go through a :class:`MediaIndex`: ``media.db`` by default, or the tenant's
rows on PostgreSQL (:class:`~homeagent_core.memory.stores.postgresql.media.PgMediaIndex`), which also keeps
each block's bytes so that every daemon of the tenant can serve them: ``blobs/`` is then this
daemon's verified copy, filled from the database on first use.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from homeagent_core.embeddings.common import top_k
from homeagent_core.embeddings.reembed import ReembedStats, reembed_stale
from homeagent_core.workers import run_blocking
from homeagent_sdk._atomic import atomic_write
from homeagent_sdk._schema import StoreSchema, open_schema, script_step, version_one_if
from homeagent_sdk.embeddings import EmbeddingProvider, EmbedInput, InvalidEmbedInput
from homeagent_sdk.errors import MemoryStoreError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DEFAULT_MAX_BLOB_BYTES", "MEDIA_SCHEMA", "MIN_PREFIX", "MediaIndex", "MediaRecord", "MediaStore",
    "SqliteMediaIndex",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_BLOB_BYTES = 20 * 1024 * 1024
MIN_PREFIX = 12
_HEX = re.compile(r"^[0-9a-f]+$")
_MIME = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS media (
    digest     TEXT PRIMARY KEY,
    mime       TEXT NOT NULL,
    size       INTEGER NOT NULL,
    name       TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    vec        BLOB,
    dim        INTEGER NOT NULL DEFAULT 0,
    vec_model  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS media_vec_model ON media (vec_model);
"""
MEDIA_SCHEMA = StoreSchema("media.db", [script_step(_SCHEMA)], legacy=version_one_if("media"))
"""The schema of ``media/media.db``: one step per version (never edit a shipped one)."""


@dataclass(frozen=True)
class MediaRecord:
    """Metadata of one stored block (the bytes come from :meth:`MediaStore.get`)."""

    digest: str
    mime: str
    size: int
    name: str
    created_at: float
    vec_model: str = ""
    dimension: int = 0

    @property
    def short(self) -> str:
        return self.digest[:MIN_PREFIX]

    def to_dict(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "short": self.short,
            "mime": self.mime,
            "size": self.size,
            "name": self.name,
            "created_at": self.created_at,
            "vec_model": self.vec_model,
            "dimension": self.dimension,
        }


def _modality(mime: str) -> str | None:
    return "image" if mime.startswith("image/") else None


#: A metadata row: digest, mime, size, name, created_at, vec_model, dim.
Row = tuple[str, str, int, str, float, str, int]
#: A whole row as copied between backends: digest, mime, size, name, created_at, vec, dim, vec_model.
FullRow = tuple[str, str, int, str, float, "bytes | None", int, str]


class MediaIndex(Protocol):
    """Where the media store keeps its metadata rows (and, on a shared database, the bytes)."""

    def lookup(self, prefix: str, limit: int) -> list[str]:
        """Digests equal to (64 hex) or starting with ``prefix``, at most ``limit``."""
        ...

    def row(self, digest: str) -> Row | None: ...

    def insert(self, row: FullRow, data: bytes) -> None:
        """Add a block (``data`` is kept where the index serves bytes to other daemons)."""
        ...

    def set_vectors(self, rows: list[tuple[str, bytes, int, str]]) -> list[str]:
        """Set ``(digest, vec, dim, vec_model)`` in one transaction; returns the digests still present."""
        ...

    def delete(self, digest: str) -> None: ...

    def page(self, limit: int, offset: int) -> list[Row]:
        """Rows oldest first."""
        ...

    def full_rows(self, after: str, limit: int) -> list[FullRow]:
        """Whole rows with digest > ``after``, in digest order (for copying between backends)."""
        ...

    def count(self) -> int: ...

    def vectors(self, vec_model: str, dim: int) -> list[tuple[str, bytes]]:
        """``(digest, vector bytes)`` of the blocks embedded in this space."""
        ...

    def stale(self, vec_model: str) -> list[tuple[str, str, str]]:
        """``(digest, mime, vec_model)`` of blocks not embedded in ``vec_model``, by digest."""
        ...

    def blob(self, digest: str) -> bytes | None:
        """The block's bytes if the index keeps them (``None``: only the local file has them)."""
        ...

    def follow(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change()`` after another daemon changed the rows (never, for a local index)."""
        ...

    def close(self) -> None: ...


class SqliteMediaIndex(MediaIndex):
    """The metadata rows in ``<root>/media.db`` (SQLite, WAL); bytes stay in the blob files.

    Raises:
        MemoryStoreError: the database cannot be opened.
        DataFormatError: the database is from a newer HomeAgent, or migrating it failed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            db = sqlite3.connect(path, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            open_schema(db, path, MEDIA_SCHEMA)
        except sqlite3.Error as exc:
            raise MemoryStoreError(f"cannot open the media store at {path}: {exc}") from exc
        self._db = db

    _COLUMNS = "digest, mime, size, name, created_at, vec_model, dim"
    _FULL = "digest, mime, size, name, created_at, vec, dim, vec_model"

    def lookup(self, prefix: str, limit: int) -> list[str]:
        if len(prefix) == 64:
            found = self._db.execute("SELECT digest FROM media WHERE digest = ?", (prefix,)).fetchall()
        else:
            upper = prefix + "g"  # sorts after every hex continuation of the prefix
            found = self._db.execute(
                "SELECT digest FROM media WHERE digest >= ? AND digest < ? LIMIT ?", (prefix, upper, limit)
            ).fetchall()
        return [str(r[0]) for r in found]

    def row(self, digest: str) -> Row | None:
        row = self._db.execute(f"SELECT {self._COLUMNS} FROM media WHERE digest = ?", (digest,)).fetchone()
        return _row(row) if row is not None else None

    def insert(self, row: FullRow, data: bytes) -> None:
        with self._db:
            self._db.execute(f"INSERT INTO media ({self._FULL}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)

    def set_vectors(self, rows: list[tuple[str, bytes, int, str]]) -> list[str]:
        present = []
        with self._db:
            for digest, vec, dim, fp in rows:
                cur = self._db.execute(
                    "UPDATE media SET vec = ?, dim = ?, vec_model = ? WHERE digest = ?", (vec, dim, fp, digest)
                )
                if cur.rowcount:
                    present.append(digest)
        return present

    def delete(self, digest: str) -> None:
        with self._db:
            self._db.execute("DELETE FROM media WHERE digest = ?", (digest,))

    def page(self, limit: int, offset: int) -> list[Row]:
        rows = self._db.execute(
            f"SELECT {self._COLUMNS} FROM media ORDER BY created_at, digest LIMIT ? OFFSET ?", (limit, offset)
        ).fetchall()
        return [_row(r) for r in rows]

    def full_rows(self, after: str, limit: int) -> list[FullRow]:
        rows = self._db.execute(
            f"SELECT {self._FULL} FROM media WHERE digest > ? ORDER BY digest LIMIT ?", (after, limit)
        ).fetchall()
        return [(r[0], r[1], int(r[2]), r[3], float(r[4]), r[5], int(r[6]), r[7]) for r in rows]

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM media").fetchone()[0])

    def vectors(self, vec_model: str, dim: int) -> list[tuple[str, bytes]]:
        return [(str(d), bytes(v)) for d, v in self._db.execute(
            "SELECT digest, vec FROM media WHERE vec_model = ? AND dim = ? AND vec IS NOT NULL", (vec_model, dim)
        )]

    def stale(self, vec_model: str) -> list[tuple[str, str, str]]:
        return [(str(d), str(m), str(v)) for d, m, v in self._db.execute(
            "SELECT digest, mime, vec_model FROM media WHERE vec_model != ? ORDER BY digest", (vec_model,)
        )]

    def blob(self, digest: str) -> bytes | None:
        return None

    def follow(self, on_change: Callable[[], None]) -> None:
        return None

    def close(self) -> None:
        self._db.close()


def _row(row: Any) -> Row:
    return (str(row[0]), str(row[1]), int(row[2]), str(row[3]), float(row[4]), str(row[5]), int(row[6]))


class MediaStore:
    """sha256-addressed blobs with SQLite metadata and per-block vectors.

    Args:
        root: the store's directory (created if missing).
        embedder: the active unified-space provider; blocks whose modality it embeds get a
            vector on ``put``. ``None`` (or a text-only provider) stores blocks without vectors;
            :meth:`reembed_stale` fills them in once a multimodal space is active.
        max_blob_bytes: per-blob size cap.
        enabled: ``False`` turns the store into a silent no-op (text-only behaviour).
        index: where the metadata rows live; ``None`` = ``<root>/media.db``. The store closes it.

    Construction opens SQLite and loads the vectors of the active space into memory; do it
    off the event loop. All other methods are async and do their IO in worker threads.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        embedder: EmbeddingProvider | None = None,
        max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
        enabled: bool = True,
        index: MediaIndex | None = None,
    ) -> None:
        self.root = Path(root)
        self.enabled = enabled
        self.embedder = embedder
        self.max_blob_bytes = max_blob_bytes
        self._lock = threading.RLock()
        self._db: MediaIndex | None = None
        self._vectors: dict[str, npt.NDArray[np.float32]] = {}
        self._matrix: tuple[list[str], npt.NDArray[np.float32]] | None = None
        if not enabled:
            if index is not None:
                index.close()
            return
        try:
            (self.root / "blobs").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MemoryStoreError(f"cannot open the media store at {self.root}: {exc}") from exc
        self._db = SqliteMediaIndex(self.root / "media.db") if index is None else index
        self._load_vectors()
        self._conn().follow(self._on_change)

    # -- plumbing --------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        return self.embedder.info.fingerprint if self.embedder is not None else ""

    def _conn(self) -> MediaIndex:
        if self._db is None:
            raise MemoryStoreError("the media store is disabled (core.memory.media.enabled=false) or closed")
        return self._db

    def _blob_path(self, digest: str) -> Path:
        return self.root / "blobs" / digest[:2] / digest[2:]

    def blob_path(self, ref: str) -> Path:
        """The file holding the bytes of ``ref`` (for channels that send a file by path); read-only use.

        On a shared database a block another daemon stored is copied here from the database first.

        Raises:
            MemoryStoreError: malformed, unknown or ambiguous reference, or bytes nowhere to be found.
        """
        digest = self.resolve(ref)
        path = self._blob_path(digest)
        if not path.is_file():
            self._get_sync(digest)
        return path

    def _load_vectors(self) -> None:
        import numpy as np

        fp = self.fingerprint
        if not fp:
            return
        assert self.embedder is not None
        dim = self.embedder.info.dimension
        vectors = {digest: np.frombuffer(blob, dtype=np.float32).copy()
                   for digest, blob in self._conn().vectors(fp, dim)}
        with self._lock:
            self._vectors = vectors
            self._matrix = None

    def _on_change(self) -> None:
        """Another daemon changed the rows: reload the vectors of the active space."""
        if self._db is not None:
            self._load_vectors()

    @staticmethod
    def _record(row: Row) -> MediaRecord:
        return MediaRecord(row[0], row[1], int(row[2]), row[3], float(row[4]), row[5], int(row[6]))

    # -- addressing ------------------------------------------------------------------------

    def _resolve_locked(self, ref: str) -> str:
        ref = ref.strip().lower().removeprefix("sha256:")
        if not _HEX.match(ref) or len(ref) > 64:
            raise MemoryStoreError(
                f"{ref[:80]!r} is not a media digest; use the sha256 hex digest or at least "
                f"its first {MIN_PREFIX} characters"
            )
        if len(ref) < MIN_PREFIX:
            raise MemoryStoreError(
                f"media digest prefix {ref!r} is too short ({len(ref)} hex); give at least {MIN_PREFIX} characters"
            )
        found = self._conn().lookup(ref, 3)
        if not found:
            raise MemoryStoreError(f"no media with digest {ref}")
        if len(found) > 1:
            shown = ", ".join(r[:16] for r in found)
            raise MemoryStoreError(
                f"media digest prefix {ref!r} is ambiguous (matches {shown}...); give more characters"
            )
        return found[0]

    def resolve(self, ref: str) -> str:
        """The full digest of ``ref`` (a 64-hex digest or a prefix of at least 12 hex).

        Raises:
            MemoryStoreError: malformed, too short, unknown or ambiguous.
        """
        with self._lock:
            return self._resolve_locked(ref)

    # -- writing ---------------------------------------------------------------------------

    def _write_blob(self, digest: str, data: bytes) -> None:
        path = self._blob_path(digest)
        if path.is_file():
            with contextlib.suppress(OSError):
                if hashlib.sha256(path.read_bytes()).hexdigest() == digest:
                    return  # same bytes already there (a crash before the row was written)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, tmp=path.with_name(path.name + ".tmp"))

    def _put_sync(self, digest: str, data: bytes, mime: str, name: str, vec: Any, vec_model: str) -> MediaRecord:
        with self._lock:
            db = self._conn()
            row = db.row(digest)
            self._write_blob(digest, data)  # also heals a blob damaged since it was stored
            if row is not None and (vec is None or row[5] == vec_model):
                return self._record(row)
            blob = vec.tobytes() if vec is not None else None
            dim = int(vec.shape[0]) if vec is not None else 0
            if row is None:
                db.insert((digest, mime, len(data), name, time.time(), blob, dim, vec_model), data)
            elif vec is not None and blob is not None:
                db.set_vectors([(digest, blob, dim, vec_model)])
            if vec is not None:
                self._vectors[digest] = vec
                self._matrix = None
            row = db.row(digest)
            if row is None:
                raise MemoryStoreError(f"media {digest[:MIN_PREFIX]} was deleted while it was being stored")
            return self._record(row)

    async def put(self, data: bytes, mime: str, *, name: str = "") -> MediaRecord | None:
        """Store ``data`` (deduplicated by sha256) and embed it when the space allows.

        Returns the block's record, or ``None`` when the store is disabled.

        Raises:
            MemoryStoreError: empty data, bytes over the size cap, a malformed MIME type, or
                image bytes that do not decode as an image.
        """
        if not self.enabled:
            return None
        if not isinstance(data, bytes | bytearray | memoryview):
            raise MemoryStoreError(f"media data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if not data:
            raise MemoryStoreError("refusing to store empty media (0 bytes)")
        if len(data) > self.max_blob_bytes:
            raise MemoryStoreError(
                f"media {name or mime} is {len(data)} bytes; the per-blob limit is "
                f"{self.max_blob_bytes} bytes (core.memory.media.max_bytes)"
            )
        mime = mime.strip().lower()
        if not _MIME.match(mime):
            raise MemoryStoreError(f"{mime!r} is not a MIME type such as image/png")
        digest = await run_blocking("memory", lambda: hashlib.sha256(data).hexdigest())
        vec, vec_model = None, ""
        modality = _modality(mime)
        if self.embedder is not None and modality and self.embedder.supports(modality):
            try:
                vec = (await self.embedder.embed([EmbedInput(data=data, mime=mime)]))[0]
            except InvalidEmbedInput as exc:
                raise MemoryStoreError(f"cannot store {name or mime}: {exc}") from exc
            vec_model = self.fingerprint
        return await run_blocking("memory", self._put_sync, digest, data, mime, name, vec, vec_model)

    def _delete_sync(self, ref: str) -> bool:
        with self._lock:
            try:
                digest = self._resolve_locked(ref)
            except MemoryStoreError:
                if len(ref.strip()) == 64:
                    return False
                raise
            self._conn().delete(digest)
            with contextlib.suppress(FileNotFoundError):
                self._blob_path(digest).unlink()
            if self._vectors.pop(digest, None) is not None:
                self._matrix = None
            return True

    async def delete(self, ref: str) -> bool:
        """Delete a block and its bytes. Returns ``False`` for an unknown full digest."""
        return await run_blocking("memory", self._delete_sync, ref)

    # -- reading ---------------------------------------------------------------------------

    def _get_sync(self, ref: str) -> tuple[MediaRecord, bytes]:
        with self._lock:
            digest = self._resolve_locked(ref)
            row = self._conn().row(digest)
        if row is None:
            raise MemoryStoreError(f"no media with digest {digest}")
        path = self._blob_path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            shared = self._conn().blob(digest)  # stored by another daemon of a shared database
            if shared is None:
                raise MemoryStoreError(
                    f"media {digest[:MIN_PREFIX]} has no blob at {path}; its bytes were removed outside HomeAgent"
                ) from exc
            if hashlib.sha256(shared).hexdigest() != digest:
                raise MemoryStoreError(
                    f"media {digest[:MIN_PREFIX]} is corrupt in the database: its bytes do not hash to its digest"
                ) from exc
            self._write_blob(digest, shared)
            data = shared
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise MemoryStoreError(
                f"media {digest[:MIN_PREFIX]} is corrupt: {path} hashes to {actual[:16]}..., "
                "not its digest; restore the file from a backup or delete the block"
            )
        return self._record(row), data

    @property
    def index(self) -> MediaIndex:
        """Where the metadata rows live (for copying them between backends).

        Raises:
            MemoryStoreError: the store is disabled or closed.
        """
        return self._conn()

    def read_verified(self, digest: str) -> bytes:
        """The verified bytes of a block, in the calling thread (for copying between backends)."""
        return self._get_sync(digest)[1]

    def import_block(self, row: FullRow, data: bytes) -> None:
        """Store a whole row (times, names and vector kept) with its bytes, in the calling thread.

        Raises:
            MemoryStoreError: ``data`` does not hash to the row's digest.
        """
        if hashlib.sha256(data).hexdigest() != row[0]:
            raise MemoryStoreError(f"media {row[0][:MIN_PREFIX]}: the bytes do not hash to the digest; not copied")
        with self._lock:
            self._write_blob(row[0], data)
            self._conn().insert(row, data)

    async def get(self, ref: str) -> bytes:
        """The verified bytes of a block.

        Raises:
            MemoryStoreError: unknown/ambiguous reference, missing or corrupted blob.
        """
        return (await run_blocking("memory", self._get_sync, ref))[1]

    async def get_with_record(self, ref: str) -> tuple[MediaRecord, bytes]:
        """Record and verified bytes of a block."""
        return await run_blocking("memory", self._get_sync, ref)

    def _info_sync(self, ref: str) -> MediaRecord:
        with self._lock:
            digest = self._resolve_locked(ref)
            row = self._conn().row(digest)
        if row is None:
            raise MemoryStoreError(f"no media with digest {digest}")
        return self._record(row)

    async def info(self, ref: str) -> MediaRecord:
        """The metadata of a block (no bytes read)."""
        return await run_blocking("memory", self._info_sync, ref)

    def _list_sync(self, limit: int, offset: int) -> list[MediaRecord]:
        with self._lock:
            rows = self._conn().page(limit, offset)
        return [self._record(r) for r in rows]

    async def records(self, limit: int = 100, offset: int = 0) -> list[MediaRecord]:
        """Blocks, oldest first."""
        if not self.enabled:
            return []
        return await run_blocking("memory", self._list_sync, limit, offset)

    def __len__(self) -> int:
        if self._db is None:
            return 0
        with self._lock:
            return self._conn().count()

    # -- vectors ---------------------------------------------------------------------------

    def _current_matrix(self) -> tuple[list[str], npt.NDArray[np.float32]]:
        import numpy as np

        with self._lock:
            if self._matrix is None:
                keys = list(self._vectors)
                dim = self.embedder.info.dimension if self.embedder else 0
                mat = np.stack([self._vectors[k] for k in keys]) if keys else np.zeros((0, dim), dtype=np.float32)
                self._matrix = (keys, np.ascontiguousarray(mat, dtype=np.float32))
            return self._matrix

    def _nearest(self, vec: npt.NDArray[np.float32], k: int) -> tuple[list[str], list[tuple[int, float]]]:
        keys, matrix = self._current_matrix()
        return keys, top_k(matrix, vec, k)

    async def search(self, query: str | EmbedInput, k: int = 5) -> list[tuple[MediaRecord, float]]:
        """Blocks nearest to ``query`` (text or an image) in the active space, best first.

        Only blocks embedded in the active space (same fingerprint and dimension) take part.
        Returns ``[]`` when the store is disabled or no embedder is set.
        """
        if not self.enabled or self.embedder is None or k <= 0:
            return []
        item = EmbedInput.of_text(query) if isinstance(query, str) else query
        vec = (await self.embedder.embed([item]))[0]
        if not vec.any():
            return []
        keys, hits = await run_blocking("memory", self._nearest, vec, k)  # the lock may wait on a writer
        out: list[tuple[MediaRecord, float]] = []
        for idx, score in hits:
            try:
                out.append((await self.info(keys[idx]), score))
            except MemoryStoreError:
                continue  # deleted meanwhile
        return out

    def _stale_index(self) -> list[tuple[str, str, str]]:
        """Digests whose vector is missing or from another space and that the space embeds."""
        embedder = self.embedder
        with self._lock:
            rows = self._conn().stale(self.fingerprint)
        return [
            (d, m, v) for d, m, v in rows if embedder is not None and (mod := _modality(m)) and embedder.supports(mod)
        ]

    def _load_batch(self, rows: list[tuple[str, str, str]]) -> list[tuple[str, EmbedInput, str]]:
        out = []
        for digest, mime, vec_model in rows:
            try:
                _, data = self._get_sync(digest)
            except MemoryStoreError as exc:
                log.warning("skipping media %s while re-embedding: %s", digest[:12], exc)
                continue
            out.append((digest, EmbedInput(data=data, mime=mime), vec_model))
        return out

    async def _stale_batches(self, batch_size: int) -> AsyncIterator[list[tuple[str, EmbedInput, str]]]:
        index = await run_blocking("memory", self._stale_index)
        for start in range(0, len(index), batch_size):
            yield await run_blocking("memory", self._load_batch, index[start : start + batch_size])

    def _write_vectors(self, rows: list[tuple[str, Any, str]]) -> None:
        with self._lock:
            vectors = {digest: vec for digest, vec, _ in rows}
            present = self._conn().set_vectors([(d, v.tobytes(), int(v.shape[0]), fp) for d, v, fp in rows])
            for digest in present:  # not deleted meanwhile
                self._vectors[digest] = vectors[digest]
            self._matrix = None

    async def _awrite_vectors(self, rows: list[tuple[str, Any, str]]) -> None:
        await run_blocking("memory", self._write_vectors, rows)

    async def reembed_stale(self, batch_size: int = 16) -> ReembedStats:
        """Embed blocks stored without a vector or in another space; resumable.

        Blocks the active provider cannot embed (no embedder, text-only space) are left as
        they are: they are never given another model's vector.
        """
        if not self.enabled or self.embedder is None:
            return ReembedStats()
        return await reembed_stale(
            self._stale_batches(batch_size),
            self.embedder,
            self._awrite_vectors,
            batch_size=batch_size,
        )

    def close(self) -> None:
        """Close the database; later calls raise :class:`MemoryStoreError`."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
