"""Copy the media blocks between a data directory (``media.db`` + blob files) and PostgreSQL, verified.

``homeagent store migrate`` calls :func:`migrate_media`. Each block is copied whole (digest, MIME
type, size, name, time, vector with its space's fingerprint) with its bytes, re-hashed on the way,
in its own transaction, so nothing is re-embedded and a rerun skips the blocks the target already
holds (resumable). At the end both sides are compared by count and by a SHA-256 over every row in
digest order (the digest itself covers the bytes); a mismatch is an error.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from homeagent_core.memory.media import FullRow, MediaIndex, MediaStore
from homeagent_core.memory.stores.postgresql.migrate import MigrationReport, migration_kinds
from homeagent_sdk.errors import MemoryStoreError

__all__ = ["media_checksum", "migrate_media"]


def _rows(index: MediaIndex, batch: int) -> Iterator[list[FullRow]]:
    after = ""
    while True:
        rows = index.full_rows(after, batch)
        if not rows:
            return
        after = rows[-1][0]
        yield rows


def media_checksum(index: MediaIndex) -> tuple[int, str]:
    """``(count, sha256)`` over every row of ``index`` in digest order."""
    digest = hashlib.sha256()
    count = 0
    for rows in _rows(index, 1000):
        for row in rows:
            head = json.dumps([row[0], row[1], row[2], row[3], repr(float(row[4])), row[6], row[7]], ensure_ascii=False)
            digest.update(hashlib.sha256(head.encode() + b"\0" + (row[5] or b"")).digest())
            count += 1
    return count, digest.hexdigest()


def migrate_media(
    source: str,
    target: str,
    *,
    data_dir: Path,
    tenant: str = "default",
    batch: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> MigrationReport:
    """Copy the media blocks from ``source`` to ``target`` (``sqlite`` = ``<data>/memory/media``, or a
    ``postgresql://`` URL), then verify.

    Raises:
        UsageError: both sides are the same kind, or a side is neither.
        MemoryStoreError: a side cannot be opened, a block's bytes are missing or damaged, or the
            verification failed.
    """
    from homeagent_core.memory.stores.postgresql.media import PgMediaIndex

    kinds = migration_kinds(source, target)
    root = data_dir / "memory" / "media"
    started = time.perf_counter()
    files = MediaStore(root)
    try:
        pg = MediaStore(root, index=PgMediaIndex(source if kinds[0] == "postgresql" else target, tenant=tenant))
    except BaseException:
        files.close()
        raise
    src, dst = (files, pg) if kinds[0] == "sqlite" else (pg, files)
    copied = skipped = 0
    try:
        present = {row[0] for rows in _rows(dst.index, batch) for row in rows}
        for rows in _rows(src.index, batch):
            for row in rows:
                if row[0] in present:
                    skipped += 1
                    continue
                dst.import_block(row, src.read_verified(row[0]))
                copied += 1
            if progress:
                progress(copied + skipped)
        source_count, source_sum = media_checksum(src.index)
        target_count, target_sum = media_checksum(dst.index)
    finally:
        files.close()
        pg.close()
    report = MigrationReport(copied, skipped, source_count, target_count, source_sum, target_sum,
                             time.perf_counter() - started)
    if not report.verified:
        raise MemoryStoreError(
            f"the copied media do not match their source: {source_count} blocks (sha256 {source_sum[:12]}) vs "
            f"{target_count} (sha256 {target_sum[:12]}); the target already held other blocks, or a daemon "
            "wrote meanwhile; stop the daemons and run the migration again"
        )
    return report
