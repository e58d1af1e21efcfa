"""The knowledge tier's interface: :class:`KnowledgeStorage`, where a
:class:`~homeagent_core.memory.knowledge.base.KnowledgeBase` keeps its entries and their cached index.

Implemented by :class:`~homeagent_core.memory.knowledge.base.DiskKnowledge` (``content.md`` files under
``<data>/knowledge``) and :class:`~homeagent_core.memory.stores.postgresql.knowledge.PgKnowledge` (a tenant of
a PostgreSQL database). Names, search and fusion are written once, in the knowledge base.
"""

from __future__ import annotations

from homeagent_core.memory.knowledge.base import KnowledgeStorage

__all__ = ["KnowledgeStorage"]
