"""Reading a backup archive: verify it, restore it (``homeagent backup verify`` / ``restore``).

An archive is read once, as a stream: every member's SHA-256 and size are checked against the
manifest, no member may be missing or unlisted, and every database is opened (``PRAGMA
quick_check`` and the row counts of the manifest). A restore does all of that inside a staging
folder beside the target and renames it into place only when everything passed; see
:mod:`homeagent_core.ops.backup` for the archive layout.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any

from homeagent_core.ops.backup import (
    COPY_CHUNK,
    DATA,
    FORMAT,
    HEADER,
    MANIFEST,
    SQLITE_MAGIC,
    owner_alive,
    table_counts,
)
from homeagent_core.ops.errors import BackupError
from homeagent_core.ops.sealed import MAGIC, SealedReader
from homeagent_sdk._atomic import fsync_dir
from homeagent_sdk._version import __version__

__all__ = ["RestoreResult", "restore_backup", "verify_backup"]


@dataclass
class RestoreResult:
    target: Path
    aside: Path | None
    manifest: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def _open_archive(path: Path, passphrase: str | None) -> Iterator[tarfile.TarFile]:
    if not path.is_file():
        raise BackupError(f"{path} does not exist or is not a file")
    with path.open("rb") as raw:
        encrypted = raw.read(len(MAGIC)) == MAGIC
        raw.seek(0)
        if encrypted and passphrase is None:
            raise BackupError(f"{path} is encrypted; give its passphrase with --passphrase-env VAR")
        source: Any = SealedReader(raw, passphrase, str(path)) if encrypted and passphrase is not None else raw
        try:
            with tarfile.open(fileobj=source, mode="r|") as tar:
                yield tar
        except tarfile.TarError as exc:
            raise BackupError(f"{path} is not a readable backup archive (truncated or damaged: {exc})") from None


def _safe_rel(name: str, archive: Path) -> str:
    rel = PurePosixPath(name[len(DATA) :])
    if rel.is_absolute() or not rel.parts or ".." in rel.parts:
        raise BackupError(f"{archive} holds a member with an unsafe path {name!r}; it was not made by HomeAgent")
    return rel.as_posix()


def _check_database(path: Path, rel: str, expected: dict[str, Any] | None, archive: Path) -> None:
    try:
        with contextlib.closing(sqlite3.connect(str(path))) as db:
            result = db.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.Error as exc:
        raise BackupError(f"{rel} in {archive} does not open as a database: {exc}") from None
    if result != "ok":
        raise BackupError(f"{rel} in {archive} fails SQLite's check: {result}")
    if expected is not None and table_counts(path) != expected.get("tables"):
        raise BackupError(f"{rel} in {archive} does not hold the rows its manifest counts")


def _read(archive: Path, passphrase: str | None, dest: Path | None) -> dict[str, Any]:
    """Read ``archive`` once, checking everything; write the data under ``dest`` when given."""
    seen: dict[str, dict[str, Any]] = {}
    header: dict[str, Any] | None = None
    manifest: dict[str, Any] | None = None
    databases: list[tuple[str, Path]] = []
    scratch = Path(tempfile.mkdtemp(prefix="homeagent-verify-")) if dest is None else None
    try:
        with _open_archive(archive, passphrase) as tar:
            for member in tar:
                if member.name in (HEADER, MANIFEST):
                    blob = tar.extractfile(member)
                    parsed = json.loads(blob.read()) if blob is not None else None
                    if not isinstance(parsed, dict):
                        raise BackupError(f"{archive}: {member.name} is not a JSON object")
                    if member.name == HEADER:
                        header = parsed
                        _check_format(header, archive)
                    else:
                        manifest = parsed
                    continue
                if header is None:
                    raise BackupError(f"{archive} does not start with {HEADER}; it is not a HomeAgent backup")
                if not member.name.startswith(DATA) or not member.isfile():
                    raise BackupError(f"{archive} holds an unexpected member {member.name!r}")
                rel = _safe_rel(member.name, archive)
                src = tar.extractfile(member)
                assert src is not None
                sqlite_member = False
                target: Path | None
                if dest is not None:
                    target = dest / rel
                elif scratch is not None:
                    target = scratch / f"{len(databases)}.db"
                else:  # pragma: no cover - one of them is set
                    target = None
                sha, size, sqlite_member = _copy_member(src, target, keep=dest is not None)
                seen[rel] = {"sha256": sha, "size": size}
                if sqlite_member and target is not None:
                    if dest is not None:
                        os.chmod(target, member.mode & 0o777 or 0o600)
                    databases.append((rel, target))
                elif dest is not None and target is not None:
                    os.chmod(target, member.mode & 0o777 or 0o600)
        if manifest is None:
            raise BackupError(f"{archive} has no {MANIFEST}; it is truncated or incomplete")
        _compare(manifest, seen, archive)
        for rel, path in databases:
            _check_database(path, rel, manifest.get("stores", {}).get(rel), archive)
        return manifest
    except (ValueError, UnicodeDecodeError) as exc:
        raise BackupError(f"{archive} is damaged ({exc})") from None
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _copy_member(src: IO[bytes], target: Path | None, *, keep: bool) -> tuple[str, int, bool]:
    """Hash a member; write it to ``target`` (always for databases, for every file when ``keep``)."""
    sha, size = hashlib.sha256(), 0
    first = src.read(COPY_CHUNK)
    is_db = first.startswith(SQLITE_MAGIC)
    out: IO[bytes] | None = None
    if target is not None and (keep or is_db):
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        out = target.open("wb")
    try:
        chunk = first
        while chunk:
            sha.update(chunk)
            size += len(chunk)
            if out is not None:
                out.write(chunk)
            chunk = src.read(COPY_CHUNK)
        if out is not None:
            out.flush()
            os.fsync(out.fileno())
    finally:
        if out is not None:
            out.close()
    return sha.hexdigest(), size, is_db and out is not None


def _check_format(header: dict[str, Any], archive: Path) -> None:
    fmt = header.get("format")
    if not isinstance(fmt, int):
        raise BackupError(f"{archive} does not say which format it is in; it is not a HomeAgent backup")
    if fmt > FORMAT:
        raise BackupError(
            f"{archive} was made by HomeAgent {header.get('homeagent', '?')} in backup format {fmt}; this "
            f"HomeAgent ({__version__}) reads format {FORMAT} and older: upgrade HomeAgent to restore it"
        )


def _compare(manifest: dict[str, Any], seen: dict[str, dict[str, Any]], archive: Path) -> None:
    _check_format(manifest, archive)
    listed = manifest.get("members")
    if not isinstance(listed, dict):
        raise BackupError(f"{archive}: its manifest lists no members; it is damaged")
    missing = sorted(set(listed) - set(seen))
    extra = sorted(set(seen) - set(listed))
    if missing or extra:
        raise BackupError(f"{archive} does not match its manifest: missing {missing[:5]}, unlisted {extra[:5]}")
    for rel, facts in listed.items():
        if facts.get("sha256") != seen[rel]["sha256"] or facts.get("size") != seen[rel]["size"]:
            raise BackupError(f"{archive}: {rel} does not match its SHA-256 in the manifest (damaged or altered)")


def verify_backup(archive: Path, *, passphrase: str | None = None) -> dict[str, Any]:
    """Re-check every member's hash and open every database of ``archive``; returns its manifest.

    Raises:
        BackupError: the archive is truncated, damaged, altered, from a newer version, or
            encrypted and no passphrase was given.
        WrongPassphrase: the passphrase does not open it.
    """
    return _read(archive, passphrase, None)


def restore_backup(
    archive: Path, target: Path, *, passphrase: str | None = None, force: bool = False, store: str | None = None
) -> RestoreResult:
    """Restore ``archive`` into ``target`` (absent or empty; with ``force`` the old one is kept aside).

    Nothing is changed at ``target`` unless the whole archive checked out. An archive of a data
    directory whose memory is in PostgreSQL loads that memory into ``store`` (a
    ``postgresql://`` URL, saved as the restored ``core.memory.store``) or else the server the
    archived settings name; a tenant that already has memory there is replaced only with
    ``force``.

    Raises:
        BackupError: as :func:`verify_backup`, or ``target`` is not empty (without ``force``),
            or it is the data directory of the daemon running now, or the PostgreSQL part
            cannot be restored (then nothing is changed at ``target``).
    """
    from homeagent_core.datadir import running_data_dir

    target = target.expanduser().absolute()
    if target.exists() and not target.is_dir():
        raise BackupError(f"{target} exists and is not a directory; pick a new directory with --data")
    running = running_data_dir()
    if running is not None and target.exists() and running.resolve() == target.resolve():
        raise BackupError(f"{target} is the data directory of the running daemon; stop it (or restore elsewhere)")
    occupied = target.is_dir() and any(target.iterdir())
    if occupied and not force:
        raise BackupError(
            f"{target} is not empty; restore into a new or empty directory, or pass --force to move "
            f"the current one aside to {target.name}.before-restore-<time> and restore in its place"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.restoring-*"):  # left by a restore killed mid-way
        if not owner_alive(stale):
            shutil.rmtree(stale, ignore_errors=True)
    staging = target.parent / f".{target.name}.restoring-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    aside: Path | None = None
    try:
        manifest = _read(archive, passphrase, staging)
        if "postgresql" in manifest:
            _restore_postgresql(manifest, staging, archive, store=store, force=force)
        elif store is not None:
            raise BackupError(f"{archive} keeps its memory in SQLite files; --store applies only to an archive "
                              "of a data directory whose memory was in PostgreSQL")
        if occupied:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            aside = target.parent / f"{target.name}.before-restore-{stamp}"
            target.rename(aside)
        elif target.is_dir():
            target.rmdir()
        staging.rename(target)
        fsync_dir(target.parent)
    except OSError as exc:
        raise BackupError(f"the restore into {target} failed: {exc}; {target} was left as it was") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return RestoreResult(target, aside, manifest)


def _restore_postgresql(manifest: dict[str, Any], staging: Path, archive: Path, *, store: str | None,
                        force: bool) -> None:
    """Load the archive's PostgreSQL rows (now files under ``staging``) into their server."""
    from homeagent_core.ops.backup_pg import PG_PREFIX, check_versions, restore_tenant

    info = manifest["postgresql"]
    check_versions(info, archive)
    config = staging / "config.db"
    with contextlib.closing(sqlite3.connect(str(config))) as db:
        if store is not None:
            if not store.startswith(("postgresql://", "postgres://")):
                raise BackupError(f"--store must be a postgresql:// URL, not {store.split(':', 1)[0]!r}")
            with db:
                db.execute("UPDATE config SET value = ? WHERE key = 'core.memory.store'", (store,))
        row = db.execute("SELECT value FROM config WHERE key = 'core.memory.store'").fetchone()
    url = str(row[0]) if row else ""
    if not url.startswith(("postgresql://", "postgres://")):
        raise BackupError(f"{archive} holds PostgreSQL memory but its settings name no server; pass --store URL")
    restore_tenant(url, str(info["tenant"]), info, staging, force=force)
    shutil.rmtree(staging / PG_PREFIX.rstrip("/"), ignore_errors=True)
