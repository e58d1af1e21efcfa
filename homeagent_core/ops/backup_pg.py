"""The PostgreSQL part of a backup: one tenant's memory rows, copied at one point in time.

When ``core.memory.store`` is a ``postgresql://`` URL, the documents, conversation log, media
index, shared settings, knowledge and the tenant's graph schema live on that server. A backup
copies the tenant's rows of every HomeAgent table in **one** ``REPEATABLE READ READ ONLY``
transaction (one snapshot: no half-written record, every table at the same instant) with
binary ``COPY … TO STDOUT``, one archive member per table, plus the column lists, row counts
and schema versions in the manifest (``manifest["postgresql"]``).

A restore loads them into the database the restored settings name (or ``--store URL``): it
opens the stores there first (creating or upgrading their schema), refuses a tenant that
already has rows unless ``force`` (which then deletes them in the same transaction), copies
every table back with ``COPY … FROM STDIN`` in one transaction, moves identity sequences past
the restored ids and checks each table's count. An archive whose schema is newer than this
HomeAgent's is refused before anything is written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.ops.errors import BackupError

if TYPE_CHECKING:
    import psycopg

__all__ = ["PG_PREFIX", "PgDump", "dump_tenant", "restore_tenant"]

#: Archive members of the PostgreSQL part: ``postgresql/<schema>.<table>.copy``.
PG_PREFIX = "postgresql/"
_CHUNK = 1 << 20
#: Tables that opening a store fills by itself (tokenizer fingerprint, pruning marks): the
#: archive's rows replace them; they never count as memory already there.
_STORE_META = frozenset({"graph_meta"})


@dataclass
class PgDump:
    """What :func:`dump_tenant` wrote: one file per table, and the manifest entry."""

    files: list[tuple[str, Path]]
    info: dict[str, Any]


def _connect(url: str) -> psycopg.Connection[Any]:
    import psycopg

    from homeagent_core.memory.stores.postgresql.database import redact_url

    try:
        return psycopg.connect(url, connect_timeout=30)
    except psycopg.Error as exc:
        raise BackupError(f"the PostgreSQL database {redact_url(url)} cannot be reached: "
                          f"{str(exc).strip().replace(url, redact_url(url))}") from None


def _tables(conn: psycopg.Connection[Any], graph_schema: str) -> list[tuple[str, str, list[str], bool]]:
    """``(schema, table, columns, per_tenant)`` of every HomeAgent table holding the tenant's rows.

    The shared ``public.ha_*`` tables hold every tenant (``per_tenant``: filter by ``tenant``);
    the graph schema belongs to the tenant alone. Schema-version tables are not data.
    """
    rows = conn.execute(
        "SELECT table_schema, table_name, array_agg(column_name::text ORDER BY ordinal_position)"
        " FROM information_schema.columns"
        " WHERE (table_schema = 'public' AND table_name LIKE 'ha\\_%%') OR table_schema = %s"
        " GROUP BY table_schema, table_name ORDER BY table_schema, table_name",
        (graph_schema,),
    ).fetchall()
    out = []
    for schema, table, columns in rows:
        if table == "schema_version":
            continue
        per_tenant = schema == "public"
        if per_tenant and "tenant" not in columns:
            continue
        out.append((str(schema), str(table), [str(c) for c in columns], per_tenant))
    return out


def _quoted(schema: str, table: str) -> str:
    return f'"{schema}"."{table}"'


def _columns(columns: list[str]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def _versions(conn: psycopg.Connection[Any], graph_schema: str) -> dict[str, int]:
    versions = {}
    for name, sql in (("database", "SELECT max(version) FROM public.homeagent_schema"),
                      ("graph", f'SELECT max(version) FROM "{graph_schema}".schema_version')):
        try:
            with conn.transaction():
                row = conn.execute(sql).fetchone()
        except Exception:  # the table does not exist yet: nothing of that store was ever written
            continue
        if row is not None and row[0] is not None:
            versions[name] = int(row[0])
    return versions


def dump_tenant(url: str, tenant: str, stage: Path) -> PgDump:
    """Copy ``tenant``'s rows of every table to files in ``stage``, all from one snapshot.

    Raises:
        BackupError: the server cannot be reached or a table cannot be read.
    """
    import psycopg

    from homeagent_core.memory.stores.postgresql.graph import graph_schema_name

    graph_schema = graph_schema_name(tenant)
    conn = _connect(url)
    try:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        files: list[tuple[str, Path]] = []
        tables: dict[str, Any] = {}
        with conn.transaction():
            versions = _versions(conn, graph_schema)
            for schema, table, columns, per_tenant in _tables(conn, graph_schema):
                where = " WHERE tenant = %s" if per_tenant else ""
                params = (tenant,) if per_tenant else ()
                count = conn.execute(f"SELECT count(*) FROM {_quoted(schema, table)}{where}", params).fetchone()
                kind = "graph" if schema == graph_schema else "shared"
                rel = f"{PG_PREFIX}{kind}.{table}.copy"
                path = stage / f"pg-{kind}-{table}.copy"
                select = f"SELECT {_columns(columns)} FROM {_quoted(schema, table)}{where}"
                query = f"COPY ({select}) TO STDOUT (FORMAT binary)"
                with path.open("wb") as out, conn.cursor().copy(query, params) as copy:
                    for block in copy:
                        out.write(block)
                files.append((rel, path))
                tables[rel] = {"schema": kind, "table": table, "columns": columns,
                               "rows": int(count[0]) if count else 0}
    except psycopg.Error as exc:
        raise BackupError(f"the PostgreSQL memory of tenant {tenant!r} could not be read: {exc}".strip()) from None
    finally:
        conn.close()
    info = {"tenant": tenant, "versions": versions, "tables": tables}
    return PgDump(files, info)


def _current_versions() -> dict[str, int]:
    from homeagent_core.memory.graph.schema import SCHEMA_VERSION as GRAPH_VERSION
    from homeagent_core.memory.stores.postgresql.database import SCHEMA_VERSION as DB_VERSION

    return {"database": DB_VERSION, "graph": GRAPH_VERSION}


def check_versions(info: dict[str, Any], archive: Path) -> None:
    """Refuse an archive whose PostgreSQL schema is newer than this HomeAgent reads."""
    current = _current_versions()
    for name, version in dict(info.get("versions") or {}).items():
        if int(version) > current.get(name, 0):
            raise BackupError(
                f"{archive} holds PostgreSQL {name} memory at schema version {version}; this HomeAgent "
                f"reads up to {current.get(name, 0)}: upgrade HomeAgent to restore it"
            )


def _prepare(url: str, tenant: str) -> None:
    """Open the stores on ``url`` once: creates (or upgrades) the shared and the graph schema."""
    from homeagent_core.memory.stores.postgresql.database import PgDatabase
    from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL
    from homeagent_sdk.errors import MemoryStoreError

    try:
        db = PgDatabase(url)
        try:
            PgGraphSQL(db, tenant=tenant).close()
        finally:
            db.close()
    except MemoryStoreError as exc:
        raise BackupError(str(exc)) from None


def _identity_columns(conn: psycopg.Connection[Any], schema: str, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = %s AND is_identity = 'YES'",
        (schema, table),
    ).fetchall()
    return [str(r[0]) for r in rows]


def _load_order(conn: psycopg.Connection[Any], tables: dict[str, Any], graph_schema: str) -> list[tuple[str, Any]]:
    """The archive's tables, each after the tables its foreign keys point to."""
    from graphlib import TopologicalSorter

    rows = conn.execute(
        "SELECT a.relname, b.relname FROM pg_constraint c JOIN pg_class a ON a.oid = c.conrelid"
        " JOIN pg_class b ON b.oid = c.confrelid JOIN pg_namespace n ON n.oid = a.relnamespace"
        " WHERE c.contype = 'f' AND n.nspname = %s",
        (graph_schema,),
    ).fetchall()
    by_table = {(e["schema"], str(e["table"])): rel for rel, e in tables.items()}
    order: TopologicalSorter[str] = TopologicalSorter({rel: set() for rel in tables})
    for child, parent in rows:
        if ("graph", child) in by_table and ("graph", parent) in by_table and child != parent:
            order.add(by_table[("graph", child)], by_table[("graph", parent)])
    return [(rel, tables[rel]) for rel in order.static_order()]


@contextlib.contextmanager
def _member_reader(path: Path) -> Iterator[Any]:
    with path.open("rb") as f:
        yield f


def restore_tenant(url: str, tenant: str, info: dict[str, Any], folder: Path, *, force: bool) -> dict[str, int]:
    """Load the tables of a :func:`dump_tenant` (files under ``folder``, named by member) into ``url``.

    One transaction: either every table is restored and its count checked, or nothing changed.
    Returns the rows restored per member.

    Raises:
        BackupError: the server cannot be reached, the tenant already has memory there (without
            ``force``), a table is missing or a count differs.
    """
    import psycopg

    from homeagent_core.memory.stores.postgresql.database import redact_url
    from homeagent_core.memory.stores.postgresql.graph import graph_schema_name

    _prepare(url, tenant)
    graph_schema = graph_schema_name(tenant)
    conn = _connect(url)
    restored: dict[str, int] = {}
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (graph_schema,))
            present = {(s, t): (cols, per) for s, t, cols, per in _tables(conn, graph_schema)}
            held = []
            for (schema, table), (_, per_tenant) in present.items():
                where = " WHERE tenant = %s" if per_tenant else ""
                row = conn.execute(f"SELECT count(*) FROM {_quoted(schema, table)}{where}",
                                   (tenant,) if per_tenant else ()).fetchone()
                if row and int(row[0]) and table not in _STORE_META:
                    held.append((schema, table, per_tenant))
            if held and not force:
                raise BackupError(
                    f"the PostgreSQL database {redact_url(url)} already holds memory of tenant {tenant!r} "
                    f"({', '.join(t for _, t, _ in held)}); restore with --force to replace it, or choose "
                    "another database with --store or another core.memory.tenant"
                )
            graph_tables = [_quoted(s, t) for (s, t), (_, per) in present.items() if not per]
            if graph_tables:  # data (with force) and what opening the store wrote (its metadata)
                conn.execute(f"TRUNCATE {', '.join(graph_tables)} CASCADE")
            for schema, table, per_tenant in held:
                if per_tenant:
                    conn.execute(f"DELETE FROM {_quoted(schema, table)} WHERE tenant = %s", (tenant,))
            for rel, entry in _load_order(conn, dict(info.get("tables") or {}), graph_schema):
                schema = graph_schema if entry["schema"] == "graph" else "public"
                table = str(entry["table"])
                if (schema, table) not in present:
                    raise BackupError(f"the archive's table {table} does not exist in {redact_url(url)}; "
                                      "restore with the HomeAgent version that wrote the archive")
                columns = [str(c) for c in entry["columns"]]
                query = f"COPY {_quoted(schema, table)} ({_columns(columns)}) FROM STDIN (FORMAT binary)"
                with _member_reader(folder / rel) as src, conn.cursor().copy(query) as copy:
                    while block := src.read(_CHUNK):
                        copy.write(block)
                for column in _identity_columns(conn, schema, table):
                    conn.execute(
                        f"SELECT setval(pg_get_serial_sequence(%s, %s), COALESCE(max(\"{column}\"), 0) + 1, false)"
                        f" FROM {_quoted(schema, table)}",
                        (f"{schema}.{table}", column),
                    )
                per_tenant = present[(schema, table)][1]
                where = " WHERE tenant = %s" if per_tenant else ""
                row = conn.execute(f"SELECT count(*) FROM {_quoted(schema, table)}{where}",
                                   (tenant,) if per_tenant else ()).fetchone()
                count = int(row[0]) if row else 0
                if count != int(entry["rows"]):
                    raise BackupError(f"{table}: restored {count} rows, the archive holds {entry['rows']}")
                restored[rel] = count
    except psycopg.Error as exc:
        raise BackupError(f"restoring the PostgreSQL memory into {redact_url(url)} failed, nothing was "
                          f"changed there: {str(exc).strip()}") from None
    finally:
        conn.close()
    return restored
