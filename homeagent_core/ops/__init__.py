"""Operations on a whole data directory: backup and restore (:mod:`homeagent_core.ops.backup`)."""

from __future__ import annotations

__all__: list[str] = []
