"""The knowledge tier's interface: :class:`KnowledgeStorage`, where a
:class:`~homeagent_core.knowledge.KnowledgeBase` keeps its entries and their cached index.

Implemented by :class:`~homeagent_core.knowledge.DiskKnowledge` (``content.md`` files under
``<data>/knowledge``) and :class:`~homeagent_core.stores.pg_knowledge.PgKnowledge` (a tenant of
a PostgreSQL database). Names, search and fusion are written once, in the knowledge base.
"""

from __future__ import annotations

from homeagent_core.knowledge import KnowledgeStorage

__all__ = ["KnowledgeStorage"]
