"""Who the running turn speaks for and which chat conversation it is in, as a built-in sees them.

Built-ins that act later for a turn (timers, reminders, MCP notifications) record where it came
from so what they deliver goes back to that chat and carries that person's rights. Both read the
privileged services a built-in is handed; outside a turn (or without those services) they say so
with an empty answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK
    from homeagent_sdk.types import Principal

__all__ = ["GUEST", "turn_asker", "turn_conversation", "turn_principal"]

#: Who a turn's person is recorded as when the door does not know them: never the owner.
GUEST = "(guest)"


def turn_principal(sdk: ScopedSDK | None) -> Principal | None:
    """The principal of the running turn; None outside a turn or without a person registry."""
    services = sdk.services if sdk is not None else None
    rights = services.rights if services is not None else None
    principal: Principal | None = rights.current() if rights is not None else None
    return principal


def turn_asker(sdk: ScopedSDK | None) -> str:
    """The person whose turn is running: ``"(guest)"`` for someone unknown, "" outside a turn.

    What is set for a guest must not come back with the owner's rights, and a name nobody has
    resolves to a guest.
    """
    principal = turn_principal(sdk)
    if principal is None:
        return ""
    return principal.person or GUEST


def turn_conversation(sdk: ScopedSDK | None) -> str:
    """The chat conversation (``<channel>:<conversation>``) of the running turn, or ""."""
    services = sdk.services if sdk is not None else None
    kernel = services.kernel if services is not None else None
    turn = kernel.turn if kernel is not None else None
    channel = turn.item.channel if turn is not None else ""
    return channel if ":" in channel else ""
