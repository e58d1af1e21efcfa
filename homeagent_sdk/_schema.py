"""Schema versions of the SQLite stores, and the migrations between them.

Every SQLite file HomeAgent writes records its schema version in ``PRAGMA user_version`` (one
place for every store; 0 means "not recorded"). A store declares a :class:`StoreSchema`: its
name, its ordered steps (``steps[i]`` moves the file from version *i* to *i + 1*; the first
step creates the tables of an empty file) and, for files written before versions were
recorded, how to tell their version from their shape. Opening a file goes through
:func:`open_schema`:

* an empty file is created at the current version;
* an older file is first copied with SQLite's online backup API to
  ``<data>/backups/pre-migration/<store>-v<old>-<time>.db`` (``<data>`` is the data directory
  the file lies in: the nearest folder above it that holds ``config.db``; else the file's own
  folder), then migrated in ONE transaction: every step and the new version commit together,
  or, when a step fails, nothing does and the file stays as it was (:class:`DataFormatError`
  names the step, the reason and the copy);
* a newer file is refused untouched with a message saying which version it is and which this
  HomeAgent reads (:class:`DataFormatError`).

A store kept as files in a folder (the conversation log) records its format in a small
``FORMAT`` file in that folder (``{"store": ..., "format": N}``): :func:`open_folder_format`.

It lives in the SDK because the SDK's own pairing store uses it and the SDK may not import the
host; the host's stores and the data-format report (:mod:`homeagent_core.ops.formats`) use
this one module too. Never edit a shipped step: add one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from homeagent_sdk._atomic import atomic_write, fsync_dir
from homeagent_sdk.errors import DataFormatError

__all__ = [
    "FORMAT_FILE",
    "StoreSchema",
    "data_root",
    "open_folder_format",
    "open_schema",
    "pre_migration_folder",
    "read_folder_format",
    "read_version",
    "script_step",
    "sql_step",
    "table_columns",
    "tables",
    "version_one_if",
]

#: One migration step: runs inside the migration's transaction on the store's connection.
Step = Callable[[sqlite3.Connection], None]


def _no_shape(conn: sqlite3.Connection) -> int:
    return 0


@dataclass(frozen=True)
class StoreSchema:
    """What a store declares: its name, its steps, and how to date an unversioned file.

    ``legacy`` is asked only when a file has tables but no recorded version (written before
    versions were recorded): it returns the version the file's shape matches (0 when it cannot
    tell; then every step runs, so steps must tolerate what a pre-versioning file may hold, e.g.
    ``CREATE TABLE IF NOT EXISTS``).
    """

    name: str
    steps: Sequence[Step]
    legacy: Callable[[sqlite3.Connection], int] = field(default=_no_shape)

    @property
    def version(self) -> int:
        """The version this HomeAgent writes and the newest it reads."""
        return len(self.steps)


def sql_step(*statements: str) -> Step:
    """A step that runs ``statements`` in order."""

    def run(conn: sqlite3.Connection) -> None:
        for statement in statements:
            conn.execute(statement)

    return run


def script_step(script: str) -> Step:
    """A step that runs a script of ``;``-separated statements (no triggers) in order."""
    return sql_step(*(part.strip() for part in script.split(";") if part.strip()))


def version_one_if(table: str) -> Callable[[sqlite3.Connection], int]:
    """``legacy`` for a store whose shape never changed before versions were recorded: 1 if ``table`` exists."""

    def shape(conn: sqlite3.Connection) -> int:
        return 1 if table in tables(conn) else 0

    return shape


def tables(conn: sqlite3.Connection) -> set[str]:
    """The names of the tables in ``conn``'s main database."""
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def table_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """The column names of ``table`` (empty when there is no such table)."""
    return {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}


def read_version(conn: sqlite3.Connection, schema: StoreSchema) -> int:
    """The file's schema version: the recorded one, else the one its shape matches (0 if empty)."""
    recorded = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if recorded or not tables(conn):
        return recorded
    return schema.legacy(conn)


def data_root(path: Path) -> Path:
    """The data directory ``path`` lies in: the nearest folder above it holding ``config.db``."""
    path = path.resolve()
    for folder in list(path.parents)[:4]:
        if (folder / "config.db").is_file():
            return folder
    return path.parent


def pre_migration_folder(path: Path) -> Path:
    """Where copies taken before migrating ``path`` go: ``<data>/backups/pre-migration``."""
    return data_root(path) / "backups" / "pre-migration"


def _copy_name(path: Path, version: int) -> str:
    root = data_root(path)
    try:
        rel = path.resolve().relative_to(root)
    except ValueError:
        rel = Path(path.name)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(rel.with_suffix("").parts)) or "store"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stem}-v{version}-{stamp}.db"


def _backup(path: Path, version: int) -> Path:
    """Copy ``path`` with the online backup API (through its own connection: the migrating one
    holds the write lock, which readers pass, so the copy is the file as it is before the steps)."""
    folder = pre_migration_folder(path)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = _copy_name(path, version)
    partial = folder / f".{name}.{os.getpid()}-{secrets.token_hex(4)}.partial"
    try:
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            copy = sqlite3.connect(partial)
            try:
                source.backup(copy)
            finally:
                copy.close()
        finally:
            source.close()
        n = 1
        target = folder / name
        while True:  # a link never replaces a file: each copy keeps its own name
            try:
                os.link(partial, target)
                break
            except FileExistsError:
                n += 1
                target = folder / f"{name.removesuffix('.db')}-{n}.db"
        fsync_dir(folder)
        return target
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()


class _NoCopy(Exception):
    """The copy before a migration could not be written (carries the reason as its cause)."""


def open_schema(conn: sqlite3.Connection, path: str | os.PathLike[str], schema: StoreSchema) -> int:
    """Bring the store on ``conn`` (the file ``path``) to ``schema.version``; returns the version it had.

    Raises:
        DataFormatError: the file is from a newer HomeAgent (left untouched), or a step failed
            (rolled back: the file is as it was).
    """
    where = str(path)
    old = read_version(conn, schema)
    if old > schema.version:
        raise DataFormatError(
            f"{schema.name} ({where}) is format {old}, written by a newer HomeAgent; this HomeAgent "
            f"reads up to {schema.version}: upgrade HomeAgent or restore a backup (the file was not touched)"
        )
    if old == schema.version:
        if int(conn.execute("PRAGMA user_version").fetchone()[0]) != old:
            conn.execute(f"PRAGMA user_version = {old}")  # a current file from before versions were recorded
        return old
    saved = conn.isolation_level
    conn.isolation_level = None
    try:
        conn.execute("BEGIN IMMEDIATE")  # one writer: another process opening it now waits, then finds it done
        step_no = old
        copy: Path | None = None
        try:
            old = read_version(conn, schema)
            if old < schema.version and where != ":memory:" and tables(conn):
                try:
                    copy = _backup(Path(where), old)
                except (OSError, sqlite3.Error) as exc:
                    raise _NoCopy(exc) from exc
            for step_no in range(old, schema.version):
                schema.steps[step_no](conn)
            conn.execute(f"PRAGMA user_version = {schema.version}")
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if isinstance(exc, _NoCopy):
                raise DataFormatError(
                    f"{schema.name} ({where}) is format {old} and needs migrating to {schema.version}, but the "
                    f"copy taken first could not be written ({exc.__cause__}); free space in the data directory "
                    "and start again (the file was not touched)"
                ) from exc.__cause__
            kept = f"; a copy from before is at {copy}" if copy else ""
            if isinstance(exc, Exception):
                raise DataFormatError(
                    f"migrating {schema.name} ({where}) from format {old} to {schema.version} failed at step "
                    f"{step_no} -> {step_no + 1}: {exc}. The file was left as it was{kept}; report this, "
                    "or restore a backup"
                ) from exc
            raise
        conn.execute("COMMIT")
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.isolation_level = saved
    return old


FORMAT_FILE = "FORMAT"
"""The file in a folder store that records its format."""


def read_folder_format(folder: Path) -> int | None:
    """The format recorded in ``folder/FORMAT``, or None when there is none.

    Raises:
        DataFormatError: the file exists but is not a format record.
    """
    path = folder / FORMAT_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise DataFormatError(f"{path} is not a HomeAgent format record ({exc}); move it away and start again") from exc
    version = record.get("format") if isinstance(record, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise DataFormatError(f"{path} holds no format number; move it away and start again")
    return version


def open_folder_format(folder: Path, name: str, version: int, legacy: Callable[[Path], int]) -> int:
    """Check and record the format of the folder store ``name`` in ``folder``; returns the format it had.

    A folder without a ``FORMAT`` file gets ``legacy(folder)`` (0 when it holds nothing yet). A
    folder store's readers take every older format as it is (no steps rewrite its files), so
    opening an older one only records the current format.

    Raises:
        DataFormatError: the folder is from a newer HomeAgent (left untouched).
    """
    old = read_folder_format(folder)
    if old is None:
        old = legacy(folder)
    if old > version:
        raise DataFormatError(
            f"{name} ({folder}) is format {old}, written by a newer HomeAgent; this HomeAgent reads up to "
            f"{version}: upgrade HomeAgent or restore a backup (the folder was not touched)"
        )
    if read_folder_format(folder) != version:
        try:
            atomic_write(folder / FORMAT_FILE, json.dumps({"store": name, "format": version}) + "\n")
        except OSError as exc:
            raise DataFormatError(f"cannot record the format of {name} in {folder / FORMAT_FILE}: {exc}") from exc
    return old
