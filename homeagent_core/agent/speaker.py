"""Who an input comes from, and which conversation thread it belongs to.

The person registry resolves an input's door and claim into a :class:`Principal`; a plugin may
only name threads of its own door, so it cannot make a turn read someone else's conversation.
Every event a turn publishes carries the resulting ``{"person", "thread"}`` (:func:`who_of`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from homeagent_core.agent.approvals import TRUSTED_DOORS
from homeagent_core.agent.policy import door_of
from homeagent_sdk.threads import door_may_name, thread_of
from homeagent_sdk.types import Principal

if TYPE_CHECKING:
    from homeagent_core.agent.approvals import Rights
    from homeagent_core.agent.scheduler import InputItem
    from homeagent_core.agent.turn_host import TurnHost

__all__ = ["speaker", "who_of"]

log = logging.getLogger(__name__)


def speaker(kernel: TurnHost, item: InputItem) -> Principal | None:
    """Who ``item`` comes from, resolved by the person registry (None without one)."""
    if kernel.rights is None:
        return None
    said = kernel.rights.resolve(item.source, item.extra.get("principal"), self_input=item.self_input)
    return _own_thread_only(kernel.rights, item.source, said)


def who_of(kernel: TurnHost, item: InputItem, principal: Principal | None = None) -> dict[str, str]:
    """``{"person", "thread"}`` of ``item`` for the events about it (``principal``: already resolved).

    Without a person registry the door's own claim still picks the thread.
    """
    said = (principal or speaker(kernel, item)) if kernel.rights is not None else item.extra.get("principal")
    return {"person": said.person if said is not None else "", "thread": thread_of(said)}


def _own_thread_only(rights: Rights, source: str, principal: Principal) -> Principal:
    """``principal`` with a thread a plugin may not name dropped (its person's default is used).

    The core's doors name any thread (they check it is the person's own); a plugin only threads
    of its own door (:func:`homeagent_sdk.threads.door_may_name`), so it cannot make a turn read
    someone else's conversation by naming it.
    """
    base = door_of(source)
    if not principal.thread or (base in TRUSTED_DOORS and not rights.is_external(base)):
        return principal
    if door_may_name(principal.door, principal.thread):
        return principal
    log.warning("input from %s named the thread %r, which is not its own; its default thread is used",
                source, principal.thread)
    return dataclasses.replace(principal, thread="")
