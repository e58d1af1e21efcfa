"""Memory-store fixtures: the document store tests run against each backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.memory.documents.store import DocumentStore


@pytest.fixture(params=["sqlite", "postgresql"])
def open_documents(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``open_documents(path, embedder=None, **options)``: a document store on the test's backend.

    SQLite opens the file at ``path``; PostgreSQL opens the session server's store of a tenant
    named after ``path``, so opening the same path again reopens the same documents.
    """
    opened: list[Any] = []
    if request.param == "sqlite":

        def open_sqlite(path: Path, embedder: Any = None, **kw: Any) -> DocumentStore:
            return DocumentStore(path, embedder, **kw)

        yield open_sqlite
        return
    from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore

    url = request.getfixturevalue("pg_url")
    tenant = request.getfixturevalue("pg_tenant")

    def open_pg(path: Path, embedder: Any = None, **kw: Any) -> PgDocumentStore:
        store = PgDocumentStore(url, embedder, tenant=f"{tenant}:{path.parent.name}/{path.name}", **kw)
        opened.append(store)
        return store

    yield open_pg
    for store in opened:
        store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def open_graph(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``open_graph(path, **options)``: a graph store on the test's backend.

    SQLite opens the file at ``path``; PostgreSQL opens the session server's graph of a tenant
    named after ``path``, so opening the same path again reopens the same graph.
    """
    from homeagent_core.memory.graph.store import GraphStore

    if request.param == "sqlite":
        yield GraphStore
        return
    from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL

    url = request.getfixturevalue("pg_url")
    tenant = request.getfixturevalue("pg_tenant")
    opened: list[GraphStore] = []

    def open_pg(path: Path, **kw: Any) -> GraphStore:
        store = GraphStore(path, sql=PgGraphSQL(url, tenant=f"{tenant}:{path.parent.name}/{path.name}"), **kw)
        opened.append(store)
        return store

    yield open_pg
    for store in opened:
        store.close()


@pytest.fixture(params=["files", "postgresql"])
def open_log(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``open_log(path)``: a conversation log on the test's backend.

    Files open the folder ``path``; PostgreSQL opens the session server's log of a tenant named
    after ``path``, so opening the same path again reopens the same log.
    """
    from homeagent_core.memory.textlog import TextLog

    opened: list[Any] = []
    if request.param == "files":

        def open_files(path: Path, **kw: Any) -> TextLog:
            return TextLog(path, **kw)

        yield open_files
        return
    from homeagent_core.memory.stores.postgresql.textlog import PgTextLog

    url = request.getfixturevalue("pg_url")
    tenant = request.getfixturevalue("pg_tenant")

    def open_pg(path: Path, **kw: Any) -> PgTextLog:
        log = PgTextLog(url, tenant=f"{tenant}:{path.parent.name}/{path.name}", **kw)
        opened.append(log)
        return log

    yield open_pg
    for log in opened:
        log.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def open_media(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``open_media(root, **options)``: a media store whose rows live on the test's backend.

    The bytes are kept under ``root`` either way; on PostgreSQL the rows (and a copy of the bytes)
    are the session server's rows of a tenant named after ``root``, so reopening ``root`` reopens them.
    """
    from homeagent_core.memory.media import MediaStore

    opened: list[MediaStore] = []
    if request.param == "sqlite":

        def open_sqlite(root: Path, **kw: Any) -> MediaStore:
            store = MediaStore(root, **kw)
            opened.append(store)
            return store

        yield open_sqlite
    else:
        from homeagent_core.memory.stores.postgresql.media import PgMediaIndex

        url = request.getfixturevalue("pg_url")
        tenant = request.getfixturevalue("pg_tenant")

        def open_pg(root: Path, **kw: Any) -> MediaStore:
            store = MediaStore(root, index=PgMediaIndex(url, tenant=f"{tenant}:{root.name}"), **kw)
            opened.append(store)
            return store

        yield open_pg
    for store in opened:
        store.close()
