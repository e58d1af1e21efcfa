"""The settings tier's interface: :class:`SharedSettings`, where a household's shared settings
live when several daemons serve it.

Implemented by :class:`~homeagent_core.memory.stores.postgresql.settings.PgSharedSettings` (a tenant of a
PostgreSQL database). On the embedded SQLite store there is no shared tier: every setting stays
in the daemon's own ``config.db`` (:class:`~homeagent_core.config.ConfigStore`), and
``open_shared_settings`` returns ``None``.
"""

from __future__ import annotations

from homeagent_core.config import SharedSettings

__all__ = ["SharedSettings"]
