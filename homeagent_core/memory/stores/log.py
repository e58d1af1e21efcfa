"""The conversation log tier's interface: :class:`ConversationLog`.

What memory, the web UI history and the tools use of the durable record of every turn.
Implemented by :class:`~homeagent_core.memory.textlog.TextLog` (JSONL files) and
:class:`~homeagent_core.memory.stores.postgresql.textlog.PgTextLog` (a tenant of a PostgreSQL database); the
records both write are made by the same functions of :mod:`~homeagent_core.memory.textlog`.
"""

from __future__ import annotations

from homeagent_core.memory.textlog import ConversationLog, Listener

__all__ = ["ConversationLog", "Listener"]
