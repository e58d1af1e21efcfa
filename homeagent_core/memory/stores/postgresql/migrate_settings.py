"""Copy the shared settings between a data directory's ``config.db`` and PostgreSQL, verified.

Only the settings a tenant's daemons share are copied (:func:`homeagent_core.config.is_shared_key`);
the others stay in ``config.db``. A setting the target already holds is left as it is (resumable,
like the other stores); at the end both sides' shared settings are compared by count and SHA-256,
so a target holding a different value is reported instead of silently overwritten.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from homeagent_core.config import ConfigStore, is_shared_key
from homeagent_core.memory.stores.postgresql.migrate import MigrationReport, migration_kinds
from homeagent_sdk.errors import MemoryStoreError

__all__ = ["migrate_settings", "settings_checksum"]


def settings_checksum(values: dict[str, str]) -> tuple[int, str]:
    """``(count, sha256)`` of shared settings in key order."""
    text = json.dumps(sorted(values.items()), ensure_ascii=False)
    return len(values), hashlib.sha256(text.encode()).hexdigest()


def migrate_settings(source: str, target: str, *, data_dir: Path, tenant: str = "default") -> MigrationReport:
    """Copy the shared settings from ``source`` to ``target`` (``sqlite`` = ``<data>/config.db``, or a
    ``postgresql://`` URL), then verify.

    Raises:
        UsageError: both sides are the same kind, or a side is neither.
        MemoryStoreError: the database cannot be opened, or the two sides differ afterwards.
    """
    from homeagent_core.memory.stores.postgresql.settings import PgSharedSettings

    kinds = migration_kinds(source, target)
    started = time.perf_counter()
    pg = PgSharedSettings(source if kinds[0] == "postgresql" else target, tenant=tenant)
    config = ConfigStore(data_dir / "config.db")
    copied = skipped = 0
    try:
        local = {k: v for k, v in config.stored().items() if is_shared_key(k)}
        remote = pg.load()
        src, dst = (local, remote) if kinds[0] == "sqlite" else (remote, local)
        for key, value in sorted(src.items()):
            if key in dst:
                skipped += 1
                continue
            if kinds[1] == "postgresql":
                pg.put(key, value)
            else:
                config.set(key, value)
            dst[key] = value
            copied += 1
        local = {k: v for k, v in config.stored().items() if is_shared_key(k)}
        remote = pg.load()
    finally:
        config.close()
        pg.close()
    source_count, source_sum = settings_checksum(local if kinds[0] == "sqlite" else remote)
    target_count, target_sum = settings_checksum(remote if kinds[0] == "sqlite" else local)
    report = MigrationReport(copied, skipped, source_count, target_count, source_sum, target_sum,
                             time.perf_counter() - started)
    if not report.verified:
        raise MemoryStoreError(
            f"the shared settings differ after the copy: {source_count} settings (sha256 {source_sum[:12]}) vs "
            f"{target_count} (sha256 {target_sum[:12]}); the target already held other values; compare "
            "`homeagent config list core.` on both sides, then run the migration again"
        )
    return report
