"""The graph tier's interface: :class:`GraphSQL`, the database behind a
:class:`~homeagent_core.memory.graph.GraphStore`.

Implemented by :class:`~homeagent_core.memory.graph_sql.SQLiteGraphSQL` (one SQLite file) and
:class:`~homeagent_core.stores.pg_graph.PgGraphSQL` (a tenant of a PostgreSQL database). Both
hand transactions a connection the write operations of :mod:`~homeagent_core.memory.graph_writes`
run against; everything above them (the mirror, recall, analytics) is written once, in
:class:`~homeagent_core.memory.graph.GraphStore`.
"""

from __future__ import annotations

from homeagent_core.memory.graph_sql import GraphSQL

__all__ = ["GraphSQL"]
