"""Choose the memory store backends from the ``core.memory.store`` setting.

``""`` or ``sqlite`` keeps the embedded SQLite files under ``<data>/memory``; a
``postgresql://`` URL opens the PostgreSQL stores of ``core.memory.tenant`` on that server. An
unreachable server is an error (never a silent fallback to an empty SQLite store).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from homeagent_core.memory.audience import LIBRARY_OWNER
from homeagent_sdk.errors import UsageError

if TYPE_CHECKING:
    from homeagent_core.memory.graph.store import GraphStore
    from homeagent_core.memory.stores.documents import BaseDocumentStore
    from homeagent_core.memory.stores.knowledge import KnowledgeStorage
    from homeagent_core.memory.stores.log import ConversationLog
    from homeagent_core.memory.stores.media import MediaIndex
    from homeagent_core.memory.stores.postgresql.database import PgDatabase
    from homeagent_core.memory.stores.settings import SharedSettings
    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = [
    "open_conversation_log",
    "open_database",
    "open_document_store",
    "open_graph_store",
    "open_knowledge_storage",
    "open_media_index",
    "open_shared_settings",
    "postgres_url",
]


def open_document_store(
    store: str, memory_dir: Path, embedder: EmbeddingProvider | None, *, tenant: str = "default",
    owner: str = LIBRARY_OWNER,
) -> BaseDocumentStore:
    """The document store named by ``store``: ``<memory_dir>/documents.db`` or the tenant's documents on PostgreSQL.

    ``owner``: the household owner's name (documents without a person are theirs).

    Raises:
        UsageError: ``store`` is neither.
        MemoryStoreError: the database cannot be opened.
    """
    url = postgres_url(store)
    if url is None:
        from homeagent_core.memory.documents.store import DocumentStore

        return DocumentStore(memory_dir / "documents.db", embedder=embedder, owner=owner)
    from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore

    return PgDocumentStore(url, embedder, tenant=tenant or "default", owner=owner)


def open_graph_store(
    store: str, memory_dir: Path, embedder: EmbeddingProvider | None, *, tenant: str = "default"
) -> GraphStore:
    """The graph store named by ``store``: ``<memory_dir>/graph.db`` or the tenant's graph on PostgreSQL.

    Raises:
        UsageError: ``store`` is neither ``sqlite`` nor a PostgreSQL URL.
        MemoryStoreError: the database cannot be opened.
    """
    from homeagent_core.memory.graph.store import GraphStore

    url = postgres_url(store)
    if url is None:
        return GraphStore(memory_dir / "graph.db", embedder=embedder)
    from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL

    return GraphStore("", embedder=embedder, sql=PgGraphSQL(url, tenant=tenant or "default"))


def open_database(store: str) -> PgDatabase | None:
    """One connection pool (and change listener) for the stores of a daemon that take ``db``, or
    ``None`` on SQLite. The caller closes it after those stores.

    Raises:
        UsageError: ``store`` is neither ``sqlite`` nor a PostgreSQL URL.
        MemoryStoreError: the database cannot be reached.
    """
    url = postgres_url(store)
    if url is None:
        return None
    from homeagent_core.memory.stores.postgresql.database import PgDatabase

    return PgDatabase(url)


def open_conversation_log(
    store: str, memory_dir: Path, *, tenant: str = "default", db: PgDatabase | None = None
) -> ConversationLog:
    """The conversation log named by ``store``: JSONL files in ``<memory_dir>/text`` or the tenant's log on
    PostgreSQL (through ``db`` when given, else its own pool).

    Raises:
        UsageError: ``store`` is neither ``sqlite`` nor a PostgreSQL URL.
        MemoryStoreError: the log cannot be opened.
    """
    url = postgres_url(store)
    if url is None:
        from homeagent_core.memory.textlog import TextLog

        return TextLog(memory_dir / "text")
    from homeagent_core.memory.stores.postgresql.textlog import PgTextLog

    return PgTextLog(db or url, tenant=tenant or "default")


def open_media_index(store: str, *, tenant: str = "default", db: PgDatabase | None = None) -> MediaIndex | None:
    """Where the media rows live: ``None`` for the media store's own ``media.db``, or the tenant's rows
    (and bytes) on PostgreSQL.

    Raises:
        UsageError: ``store`` is neither ``sqlite`` nor a PostgreSQL URL.
        MemoryStoreError: the database cannot be opened.
    """
    url = postgres_url(store)
    if url is None:
        return None
    from homeagent_core.memory.stores.postgresql.media import PgMediaIndex

    return PgMediaIndex(db or url, tenant=tenant or "default")


def open_shared_settings(store: str, *, tenant: str = "default") -> SharedSettings | None:
    """The tenant's shared settings on PostgreSQL, or ``None`` (SQLite: every setting stays in config.db).

    Raises:
        UsageError: ``store`` is neither ``sqlite`` nor a PostgreSQL URL.
        MemoryStoreError: the database cannot be opened.
    """
    url = postgres_url(store)
    if url is None:
        return None
    from homeagent_core.memory.stores.postgresql.settings import PgSharedSettings

    return PgSharedSettings(url, tenant=tenant or "default")


def open_knowledge_storage(
    store: str, *, tenant: str = "default", db: PgDatabase | None = None
) -> KnowledgeStorage | None:
    """The tenant's knowledge entries on PostgreSQL, or ``None`` (the files under ``<data>/knowledge``).

    Raises:
        UsageError: ``store`` is neither ``sqlite`` nor a PostgreSQL URL.
        MemoryStoreError: the database cannot be opened.
    """
    url = postgres_url(store)
    if url is None:
        return None
    from homeagent_core.memory.stores.postgresql.knowledge import PgKnowledge

    return PgKnowledge(db or url, tenant=tenant or "default")


def postgres_url(store: str) -> str | None:
    """The PostgreSQL URL ``core.memory.store`` names, or ``None`` for the embedded SQLite stores.

    Raises:
        UsageError: ``store`` is neither ``sqlite`` (or empty) nor a ``postgresql://`` URL.
    """
    choice = store.strip()
    if choice in ("", "sqlite"):
        return None
    if choice.startswith(("postgresql://", "postgres://")):
        return choice
    from homeagent_core.memory.stores.postgresql.database import redact_url

    raise UsageError(
        f"core.memory.store is {redact_url(choice)!r}; use 'sqlite' or a postgresql://user:password@host/db URL"
    )
