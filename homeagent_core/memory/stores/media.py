"""The media tier's interface: :class:`MediaIndex`, where a
:class:`~homeagent_core.memory.media.MediaStore` keeps its metadata rows (and, on a shared
database, the bytes).

Implemented by :class:`~homeagent_core.memory.media.SqliteMediaIndex` (``media.db`` beside the
blob files) and :class:`~homeagent_core.memory.stores.postgresql.media.PgMediaIndex` (a tenant of a PostgreSQL
database, bytes included so other daemons can serve them). Hashing, embedding, search and the
blob files are written once, in the media store.
"""

from __future__ import annotations

from homeagent_core.memory.media import FullRow, MediaIndex, Row

__all__ = ["FullRow", "MediaIndex", "Row"]
