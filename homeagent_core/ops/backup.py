"""Backup and restore of a data directory, online and consistent (``homeagent backup``).

What goes in: every file of the data directory except sockets, lock files, SQLite's ``-wal``,
``-shm`` and ``-journal`` files, temporary files, ``__pycache__``/cache folders and the
``backups/`` folder itself. Every SQLite database, wherever it lies (``config.db``,
``memory/*.db``, ``plugin_data/<name>/*.db``, ...; found by its header, not its name), is copied
with SQLite's online backup API, never as a file. The databases in WAL mode are pinned first:
one read transaction on each, opened one after the other in a tight loop, so they are all
copied as of that moment while the daemon keeps writing. Caches derived from a database (files
named ``<db>.<suffix>`` beside it, such as the lexical snapshot) are copied *before* the pin,
so they are never newer than their database — the same state a crash leaves, which the stores
already handle. Other files are read after the pin: a blob a pinned row names was written
before the row, so it is there; an append-only log (``*.jsonl``, ``*.log``) is cut at its size
at the pin and at its last complete line, so no half-written record goes in.

The archive is a tar stream: ``HOMEAGENT-BACKUP.json`` first (format, time, version), the data
under ``data/``, ``MANIFEST.json`` last (the format, the stores with their row counts per
table, and the size and SHA-256 of every member). With a passphrase it is sealed as a stream
(:mod:`homeagent_core.ops.sealed`). It is written under a hidden temporary name in the target
folder, fsynced, and renamed to its final name only when complete, so an interrupted backup
(``kill -9``, a full disk) never leaves a file that :func:`list_backups` shows.

Verifying and restoring an archive is :mod:`homeagent_core.ops.restore`: it reads the archive
once, checks every hash against the manifest and opens every database (``PRAGMA quick_check``
and the row counts) inside a staging folder next to the target; only when all of it passed is
the staging folder renamed into place. A non-empty target is refused unless ``force``, which
moves it aside to ``<target>.before-restore-<time>``.
PostgreSQL-backed memory stores (``core.memory.store`` set to a URL): the tenant's rows of every
table are copied from one snapshot of the server, taken while the SQLite files are pinned
(:mod:`homeagent_core.ops.backup_pg`), and restored into the database the restored settings name.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import sqlite3
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from homeagent_core.ops.errors import BackupError, WrongPassphrase
from homeagent_core.ops.sealed import MAGIC, SealedWriter, read_public_header
from homeagent_sdk._atomic import fsync_dir
from homeagent_sdk._version import __version__
from homeagent_sdk.errors import HomeAgentError

__all__ = [
    "ARCHIVE_NAME",
    "COPY_CHUNK",
    "DATA",
    "FORMAT",
    "HEADER",
    "MANIFEST",
    "SQLITE_MAGIC",
    "BackupError",
    "BackupInfo",
    "WrongPassphrase",
    "backup_folder",
    "create_backup",
    "list_backups",
    "lower_priority",
    "owner_alive",
    "prune_backups",
    "table_counts",
]

#: The archive format this version writes and the newest it reads.
FORMAT = 1
HEADER = "HOMEAGENT-BACKUP.json"
MANIFEST = "MANIFEST.json"
DATA = "data/"
SQLITE_MAGIC = b"SQLite format 3\x00"
_SKIP_DIRS = {"__pycache__", ".cache", "cache", "caches"}
_SKIP_NAME = re.compile(r"(-wal|-shm|-journal|\.lock|\.sock|\.pid|\.tmp\d*|\.partial-\d+|\.restoring-\d+)$")
_LOG_SUFFIXES = (".jsonl", ".log")
ARCHIVE_NAME = re.compile(r"^homeagent-(\d{8}T\d{6}Z)(?:-\d+)?\.tar(\.enc)?$")
COPY_CHUNK = 1 << 20


@dataclass
class BackupInfo:
    """One archive in a backup folder, as :func:`list_backups` sees it without a passphrase."""

    path: Path
    size: int
    created: str
    encrypted: bool
    format: int | None
    homeagent: str
    status: str  # "complete" | "damaged: <reason>"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "name": self.path.name,
            "size": self.size,
            "created": self.created,
            "encrypted": self.encrypted,
            "format": self.format,
            "homeagent": self.homeagent,
            "status": self.status,
        }


def backup_folder(data: Path) -> Path:
    """Where backups of ``data`` go unless told otherwise: ``<data>/backups``."""
    return data / "backups"


# ---------------------------------------------------------------------------------- scanning


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _walk(data: Path) -> Iterator[Path]:
    """Every regular file of the data directory that belongs in a backup, in a stable order."""
    for root, dirs, files in os.walk(data):
        here = Path(root)
        keep = []
        for name in sorted(dirs):
            path = here / name
            skip = name in _SKIP_DIRS or name.startswith(".backup-stage-") or (here == data and name == "backups")
            if skip or path.is_symlink():
                continue
            keep.append(name)
        dirs[:] = keep
        for name in sorted(files):
            path = here / name
            if _SKIP_NAME.search(name) or path.is_symlink() or not path.is_file():
                continue
            yield path


def _derived(path: Path, databases: set[Path]) -> bool:
    """``<db>.<suffix>`` beside a database: a cache the store rebuilds or checks on open."""
    return any(path.name.startswith(db.name + ".") and path.parent == db.parent for db in databases)


def _postgres_in_use(data: Path) -> tuple[str, str] | None:
    """``(url, tenant)`` when the data directory keeps its memory in PostgreSQL (``core.memory.store``)."""
    config = data / "config.db"
    if not config.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{config}?mode=ro", uri=True)) as db:
            rows = dict(db.execute(
                "SELECT key, value FROM config WHERE key IN ('core.memory.store', 'core.memory.tenant')"
            ).fetchall())
    except sqlite3.Error:
        return None
    value = str(rows.get("core.memory.store") or "")
    if not value.startswith(("postgresql://", "postgres://")):
        return None
    return value, str(rows.get("core.memory.tenant") or "default")


# ---------------------------------------------------------------------------------- writing


class _Hashing(io.RawIOBase):
    """Reads exactly ``size`` bytes of ``src`` and hashes them on the way."""

    def __init__(self, src: IO[bytes], size: int) -> None:
        self.src, self.left, self.sha = src, size, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.src.read(n)
        self.left -= len(data)
        self.sha.update(data)
        return data


def _complete_prefix(path: Path, size: int) -> int:
    """The length of ``path``'s first ``size`` bytes up to and including their last newline."""
    with path.open("rb") as f:
        end = size
        while end > 0:
            start = max(0, end - 65536)
            f.seek(start)
            block = f.read(end - start)
            at = block.rfind(b"\n")
            if at >= 0:
                return start + at + 1
            end = start
    return 0


class _Writer:
    def __init__(self, tar: tarfile.TarFile) -> None:
        self.tar = tar
        self.members: dict[str, dict[str, Any]] = {}

    def add_bytes(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
        self.tar.addfile(info, io.BytesIO(data))

    def add_file(self, rel: str, path: Path, kind: str, size: int | None = None) -> None:
        try:
            f = path.open("rb")
        except FileNotFoundError:  # removed since the scan (a temporary file, a replaced cache)
            return
        with f:
            stat = os.fstat(f.fileno())
            length = stat.st_size if size is None else size
            info = tarfile.TarInfo(DATA + rel)
            info.size, info.mtime, info.mode = length, int(stat.st_mtime), stat.st_mode & 0o777
            reader = _Hashing(f, length)
            try:
                self.tar.addfile(info, reader)
            except tarfile.ReadError as exc:
                raise BackupError(f"{path} shrank while it was copied ({exc}); run the backup again") from None
        self.members[rel] = {"sha256": reader.sha.hexdigest(), "size": length, "kind": kind}


def table_counts(path: Path) -> dict[str, int]:
    with contextlib.closing(sqlite3.connect(str(path))) as db:
        tables = [
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "AND COALESCE(sql, '') NOT LIKE 'CREATE VIRTUAL%' ORDER BY name"
            )
        ]
        return {t: int(db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]) for t in tables}


def _open_source(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
    db.execute("PRAGMA busy_timeout = 30000")
    return db


def _pin(path: Path) -> sqlite3.Connection | None:
    """A read transaction on a WAL database, holding its current state until released."""
    db = _open_source(path)
    if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
        db.close()
        return None
    db.execute("BEGIN")
    db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return db


def _space_message(exc: OSError, where: Path) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return (
            f"no room to write the backup in {where} ({exc.strerror}); free some space or choose "
            "another place with --out; no archive was left behind"
        )
    return f"the backup could not be written to {where}: {exc}; no archive was left behind"


def _final_name(folder: Path, encrypted: bool, now: datetime) -> Path:
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    suffix = ".tar.enc" if encrypted else ".tar"
    path, n = folder / f"homeagent-{stamp}{suffix}", 1
    while path.exists():
        path, n = folder / f"homeagent-{stamp}-{n}{suffix}", n + 1
    return path


def owner_alive(path: Path) -> bool:
    """Whether the process whose id ends ``path``'s name (``…-<pid>``) still runs."""
    tail = path.name.rsplit("-", 1)[-1]
    pid = int(tail) if tail.isdigit() else 0
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_partials(folder: Path) -> None:
    """Delete the temporary files of backups whose process is gone (a ``kill -9`` mid-backup)."""
    for path in folder.glob(".homeagent-*.partial-*"):
        if not owner_alive(path):
            with contextlib.suppress(OSError):
                path.unlink()
    for stage in folder.glob(".backup-stage-*"):
        if stage.is_dir() and not owner_alive(stage):
            shutil.rmtree(stage, ignore_errors=True)


def lower_priority(niceness: int = 10) -> None:
    """Run the calling thread at a lower CPU priority (Linux: per thread), so a backup yields the
    CPU to the daemon's turns and runs at full speed only when nothing else wants it."""
    with contextlib.suppress(OSError, AttributeError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + niceness))


def create_backup(
    data: Path, out: Path | None = None, *, passphrase: str | None = None, now: datetime | None = None
) -> tuple[Path, dict[str, Any]]:
    """Write one archive of ``data``; returns its path and manifest.

    ``out`` is a file path or an existing folder (default :func:`backup_folder`). Callers that
    share the machine with a daemon call :func:`lower_priority` on the thread first.

    Raises:
        BackupError: ``data`` is not a data directory, its memory lives in PostgreSQL, or the
            archive could not be written (then nothing is left at ``out``).
    """
    data = data.expanduser().resolve()
    if not data.is_dir():
        raise BackupError(f"{data} is not a directory; pass the data directory with --data")
    postgres = _postgres_in_use(data)
    now = now or datetime.now(UTC)
    if out is None:
        folder = backup_folder(data)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        final = _final_name(folder, passphrase is not None, now)
    elif out.is_dir():
        final = _final_name(out, passphrase is not None, now)
    else:
        final = out
        if final.exists():
            raise BackupError(f"{final} already exists; choose another file name or a folder with --out")
    folder = final.parent
    if not folder.is_dir():
        raise BackupError(f"the folder {folder} for the backup does not exist; create it or pick another --out")
    _remove_stale_partials(folder)
    token = secrets.token_hex(4)  # two backups of one process never share their temporary names
    partial = folder / f".{final.name}.{token}.partial-{os.getpid()}"
    stage = folder / f".backup-stage-{token}-{os.getpid()}"
    stage.mkdir(mode=0o700)
    header = {"format": FORMAT, "homeagent": __version__, "created": now.isoformat(timespec="seconds")}
    try:
        with partial.open("xb") as raw:
            os.chmod(partial, 0o600)
            sealed = SealedWriter(raw, passphrase, header) if passphrase is not None else None
            sink: Any = sealed if sealed is not None else raw
            with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                manifest = _write_members(data, tar, stage, header, postgres)
            if sealed is not None:
                sealed.finish()
            raw.flush()
            os.fsync(raw.fileno())
        partial.replace(final)
        fsync_dir(folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise BackupError(_space_message(exc, folder)) from None
    except sqlite3.Error as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise BackupError(f"a database of {data} could not be read for the backup: {exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return final, manifest


def _write_members(
    data: Path, tar: tarfile.TarFile, stage: Path, header: dict[str, Any], postgres: tuple[str, str] | None
) -> dict[str, Any]:
    writer = _Writer(tar)
    writer.add_bytes(HEADER, json.dumps(header, indent=2).encode())
    first = list(_walk(data))
    databases = {p for p in first if _is_sqlite(p)}
    for path in first:  # caches derived from a database: never newer than it
        if path not in databases and _derived(path, databases):
            writer.add_file(path.relative_to(data).as_posix(), path, "derived")
    pins: dict[Path, sqlite3.Connection] = {}
    try:
        for path in sorted(databases):
            pin = _pin(path)
            if pin is not None:
                pins[path] = pin
        pg = None
        if postgres is not None:  # the server's snapshot, taken while the SQLite files are pinned
            from homeagent_core.ops.backup_pg import dump_tenant

            pg = dump_tenant(postgres[0], postgres[1], stage)
        after = list(_walk(data))
        logs: dict[Path, int] = {}
        for path in after:
            if path.name.endswith(_LOG_SUFFIXES):
                with contextlib.suppress(FileNotFoundError):
                    logs[path] = path.stat().st_size
        stores: dict[str, Any] = {}
        written = set(writer.members)
        late = {
            p for p in after if p not in databases and p.relative_to(data).as_posix() not in written and _is_sqlite(p)
        }
        for path in sorted(databases | late):
            if not path.exists():
                continue
            rel = path.relative_to(data).as_posix()
            copy = stage / "copy.db"
            source = pins.pop(path, None)
            try:
                source = source or _open_source(path)
                with contextlib.closing(sqlite3.connect(str(copy))) as target:
                    source.backup(target)
            finally:
                if source is not None:
                    source.close()
            stores[rel] = {"kind": "sqlite", "tables": table_counts(copy)}
            writer.add_file(rel, copy, "sqlite")
            copy.unlink()
        if pg is not None:
            for rel, path in pg.files:
                writer.add_file(rel, path, "postgresql")
                path.unlink()
        for path in after:
            rel = path.relative_to(data).as_posix()
            if rel in writer.members or not path.exists():
                continue
            if path in logs:
                writer.add_file(rel, path, "log", _complete_prefix(path, logs[path]))
            else:
                writer.add_file(rel, path, "file")
    finally:
        for pin in pins.values():
            pin.close()
    counts = {
        "sqlite": len(stores),
        "files": sum(1 for m in writer.members.values() if m["kind"] != "sqlite"),
        "bytes": sum(m["size"] for m in writer.members.values()),
    }
    manifest = {**header, "stores": stores, "counts": counts, "members": writer.members}
    if pg is not None:
        manifest["postgresql"] = pg.info
    writer.add_bytes(MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False).encode())
    return manifest


# ---------------------------------------------------------------------------------- listing


def _info(path: Path) -> BackupInfo:
    size = path.stat().st_size
    encrypted, header, status = False, {}, "complete"
    try:
        with path.open("rb") as raw:
            encrypted = raw.read(len(MAGIC)) == MAGIC
            raw.seek(0)
            if encrypted:
                header = read_public_header(raw, str(path))
            else:
                with tarfile.open(fileobj=raw, mode="r|") as tar:
                    first = tar.next()
                    blob = tar.extractfile(first) if first is not None and first.name == HEADER else None
                    if blob is None:
                        raise BackupError(f"it does not start with {HEADER}")
                    header = json.loads(blob.read())
                raw.seek(0)
                last: tarfile.TarInfo | None = None
                with tarfile.open(fileobj=raw, mode="r:") as index:  # headers only: seeks over the data
                    for member in index:
                        last = member
                if last is None or last.name != MANIFEST or last.offset_data + last.size > size:
                    raise BackupError(f"it does not end with its {MANIFEST} (truncated?)")
    except tarfile.TarError as exc:
        status = f"damaged: not a complete tar archive ({exc}; truncated?)"
    except (HomeAgentError, OSError, ValueError) as exc:
        status = f"damaged: {exc}"
    fmt = header.get("format") if isinstance(header, dict) else None
    return BackupInfo(
        path,
        size,
        str(header.get("created", "")),
        encrypted,
        fmt if isinstance(fmt, int) else None,
        str(header.get("homeagent", "")),
        status,
    )


def list_backups(folder: Path) -> list[BackupInfo]:
    """The complete archives in ``folder``, newest first (interrupted ones never have such a name)."""
    if not folder.is_dir():
        return []
    paths = [p for p in folder.iterdir() if ARCHIVE_NAME.match(p.name) and p.is_file()]
    return sorted((_info(p) for p in paths), key=lambda i: i.path.name, reverse=True)


def _created(path: Path) -> datetime | None:
    match = ARCHIVE_NAME.match(path.name)
    if match is None:
        return None
    return datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


def prune_backups(folder: Path, *, keep_daily: int = 7, keep_weekly: int = 4) -> list[Path]:
    """Delete archives beyond the newest of each of the last ``keep_daily`` days that have one and
    of each of the ``keep_weekly`` ISO weeks before those; returns what was deleted."""
    dated = sorted(((c, p) for p in folder.glob("homeagent-*.tar*") if (c := _created(p)) is not None), reverse=True)
    daily: dict[str, Path] = {}
    for created, path in dated:
        day = created.strftime("%Y-%m-%d")
        if day not in daily and len(daily) < keep_daily:
            daily[day] = path
    first_day = min(daily) if daily else "9999-99-99"
    weekly: dict[tuple[int, int], Path] = {}
    for created, path in dated:
        week = (created.isocalendar()[0], created.isocalendar()[1])
        if created.strftime("%Y-%m-%d") < first_day and week not in weekly and len(weekly) < keep_weekly:
            weekly[week] = path
    keep = set(daily.values()) | set(weekly.values())
    removed = []
    for _, path in dated:
        if path not in keep:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
