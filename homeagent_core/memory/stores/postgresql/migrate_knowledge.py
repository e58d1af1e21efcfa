"""Copy the knowledge base between a data directory (``<data>/knowledge``) and PostgreSQL, verified.

Each entry (name and content) is written whole, one file or one transaction at a time, so a rerun
skips the entries the target already holds (resumable). The cached index (vectors) is not copied:
it is rebuilt from the entries at the first search. At the end both sides are compared by count
and by a SHA-256 over every entry in name order; a mismatch is an error.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from homeagent_core.memory.knowledge.base import DiskKnowledge, KnowledgeStorage
from homeagent_core.memory.stores.postgresql.migrate import MigrationReport, migration_kinds
from homeagent_sdk.errors import MemoryStoreError

__all__ = ["knowledge_checksum", "migrate_knowledge"]


def knowledge_checksum(storage: KnowledgeStorage) -> tuple[int, str]:
    """``(count, sha256)`` over every entry's name and content, in name order."""
    digest = hashlib.sha256()
    entries = sorted((name, content) for name, content, _ in storage.load())
    for name, content in entries:
        digest.update(hashlib.sha256(json.dumps([name, content], ensure_ascii=False).encode()).digest())
    return len(entries), digest.hexdigest()


def migrate_knowledge(source: str, target: str, *, data_dir: Path, tenant: str = "default") -> MigrationReport:
    """Copy the knowledge entries from ``source`` to ``target`` (``sqlite`` = the data directory's
    files, or a ``postgresql://`` URL), then verify.

    Raises:
        UsageError: both sides are the same kind, or a side is neither.
        MemoryStoreError: the database cannot be opened, or the verification failed.
    """
    from homeagent_core.memory.stores.postgresql.knowledge import PgKnowledge

    kinds = migration_kinds(source, target)
    started = time.perf_counter()
    pg = PgKnowledge(source if kinds[0] == "postgresql" else target, tenant=tenant)
    files = DiskKnowledge(data_dir / "knowledge")
    src: KnowledgeStorage = files if kinds[0] == "sqlite" else pg
    dst: KnowledgeStorage = pg if kinds[0] == "sqlite" else files
    copied = skipped = 0
    try:
        present = {name for name, _, _ in dst.load()}
        for name, content, _ in src.load():
            if name in present:
                skipped += 1
                continue
            dst.write(name, content)
            copied += 1
        source_count, source_sum = knowledge_checksum(src)
        target_count, target_sum = knowledge_checksum(dst)
    finally:
        pg.close()
    report = MigrationReport(copied, skipped, source_count, target_count, source_sum, target_sum,
                             time.perf_counter() - started)
    if not report.verified:
        raise MemoryStoreError(
            f"the copied knowledge base does not match its source: {source_count} entries (sha256 "
            f"{source_sum[:12]}) vs {target_count} (sha256 {target_sum[:12]}); the target already held other "
            "entries or other versions of them; stop the daemons and run the migration again"
        )
    return report
