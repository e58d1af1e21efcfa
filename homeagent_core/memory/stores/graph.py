"""The graph tier's interface: :class:`GraphSQL`, the database behind a
:class:`~homeagent_core.memory.graph.store.GraphStore`.

Implemented by :class:`~homeagent_core.memory.graph.sql.SQLiteGraphSQL` (one SQLite file) and
:class:`~homeagent_core.memory.stores.postgresql.graph.PgGraphSQL` (a tenant of a PostgreSQL database). Both
hand transactions a connection the write operations of :mod:`~homeagent_core.memory.graph.writes`
run against; everything above them (the mirror, recall, analytics) is written once, in
:class:`~homeagent_core.memory.graph.store.GraphStore`.
"""

from __future__ import annotations

from homeagent_core.memory.graph.sql import GraphSQL

__all__ = ["GraphSQL"]
