"""Whose memory a turn reads and writes: its principal's audience and the marks of new items.

The rules (see :mod:`homeagent_sdk.visibility`):

* a person's turn reads their own ``private`` items, ``household`` items and, in a group chat,
  the group's items; what they say is ``private`` to them, or the group's in a group chat;
* a guest (an unlinked sender) is known by their thread (``guest:<door>:<account>``), so they
  see what they said themselves and nothing private of anyone else;
* no principal (library use, a home without a person registry) is the owner;
* ``system`` (heartbeats) is maintenance: it reads everything and must carry each source
  item's person and visibility into what it derives; what it writes from no source item is
  the owner's and private.
"""

from __future__ import annotations

from homeagent_sdk.threads import thread_of
from homeagent_sdk.types import Principal
from homeagent_sdk.visibility import EVERYONE, PRIVATE, Audience, group_visibility

__all__ = ["audience_of", "is_group_thread", "marks_of", "person_key"]


def is_group_thread(thread: str) -> bool:
    """Whether ``thread`` is a group chat's (``<platform>:group:<id>``)."""
    return ":group:" in thread


def person_key(principal: Principal | None, *, owner: str) -> str:
    """The name items of ``principal`` are stored under (a guest's thread for a guest)."""
    if principal is None or principal.role == "system":
        return owner
    if principal.person:
        return principal.person
    return thread_of(principal)


def audience_of(principal: Principal | None, *, owner: str) -> Audience:
    """What a turn of ``principal`` may read."""
    if principal is not None and principal.role == "system":
        return EVERYONE
    thread = thread_of(principal)
    return Audience(person=person_key(principal, owner=owner), group=thread if is_group_thread(thread) else "")


def marks_of(principal: Principal | None, *, owner: str) -> tuple[str, str]:
    """``(person, visibility)`` of an item ``principal`` says (before any "告诉全家")."""
    thread = thread_of(principal)
    visibility = group_visibility(thread) if principal is not None and is_group_thread(thread) else PRIVATE
    return person_key(principal, owner=owner), visibility
