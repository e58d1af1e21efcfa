"""Copy the conversation log between a data directory's JSONL files and PostgreSQL, verified.

``homeagent store migrate`` calls :func:`migrate_textlog` after the documents and the graph.
Records are copied whole (ids, times, channels, attachments, tool summaries) in write order.
The copy is resumable: each batch is one transaction (PostgreSQL) or one fsync'd append (files),
and a rerun skips the records whose id the target already holds. At the end both sides are
compared by count and by a SHA-256 over every record in write order; a mismatch is an error.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from homeagent_core.memory.stores.postgresql.migrate import MigrationReport, migration_kinds
from homeagent_sdk.errors import MemoryStoreError

__all__ = ["log_checksum", "migrate_textlog"]


def log_checksum(records: Iterable[dict[str, Any]]) -> tuple[int, str]:
    """``(count, sha256)`` of log records given in write order (key order does not matter)."""
    digest = hashlib.sha256()
    count = 0
    for record in records:
        digest.update(hashlib.sha256(json.dumps(record, ensure_ascii=False, sort_keys=True).encode()).digest())
        count += 1
    return count, digest.hexdigest()


def _batches(records: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for record in records:
        batch.append(record)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def migrate_textlog(
    source: str,
    target: str,
    *,
    data_dir: Path,
    tenant: str = "default",
    batch: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> MigrationReport:
    """Copy the conversation log from ``source`` to ``target`` (``sqlite`` = the data directory's
    files, or a ``postgresql://`` URL), then verify.

    Raises:
        UsageError: both sides are the same kind, or a side is neither.
        MemoryStoreError: a side cannot be opened, or the verification failed.
    """
    from homeagent_core.memory.stores.postgresql.textlog import PgTextLog
    from homeagent_core.memory.textlog import TextLog

    kinds = migration_kinds(source, target)
    started = time.perf_counter()
    pg = PgTextLog(source if kinds[0] == "postgresql" else target, tenant=tenant, follow=False)
    try:
        files = TextLog(data_dir / "memory" / "text")
    except BaseException:
        pg.close()
        raise
    src: Any = files if kinds[0] == "sqlite" else pg
    dst: Any = pg if kinds[0] == "sqlite" else files
    copied = skipped = 0
    try:
        present = {str(r["id"]) for r in dst.iter_records()}
        for rows in _batches(src.iter_records(), batch):
            fresh = [r for r in rows if str(r.get("id")) not in present]
            skipped += len(rows) - len(fresh)
            dst.import_records(fresh)
            copied += len(fresh)
            if progress:
                progress(copied + skipped)
        source_count, source_sum = log_checksum(src.iter_records())
        target_count, target_sum = log_checksum(dst.iter_records())
    finally:
        files.close()
        pg.close()
    report = MigrationReport(copied, skipped, source_count, target_count, source_sum, target_sum,
                             time.perf_counter() - started)
    if not report.verified:
        raise MemoryStoreError(
            f"the copied conversation log does not match its source: {source_count} records (sha256 "
            f"{source_sum[:12]}) vs {target_count} (sha256 {target_sum[:12]}); the target already held other "
            "records, or a daemon wrote meanwhile; stop the daemons and run the migration again"
        )
    return report
