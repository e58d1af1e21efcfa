"""The principal of the turn running in this task.

The kernel sets it around a turn (and an approved call); sub-agents, residents and tools started
from the turn inherit it, so they run with their creator's rights and read memory as their
creator. Memory and plugins read it here, without importing the kernel.
"""

from __future__ import annotations

import contextvars

from homeagent_sdk.types import Principal

__all__ = ["CURRENT_PRINCIPAL"]

CURRENT_PRINCIPAL: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "homeagent_principal", default=None
)
