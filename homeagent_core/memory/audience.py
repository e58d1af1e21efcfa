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

import re

from homeagent_sdk.current import CURRENT_PRINCIPAL
from homeagent_sdk.threads import thread_of
from homeagent_sdk.types import Principal
from homeagent_sdk.visibility import EVERYONE, PRIVATE, Audience, group_visibility

__all__ = [
    "LIBRARY_OWNER",
    "audience_of",
    "current_audience",
    "current_marks",
    "is_group_thread",
    "marks_of",
    "owner_or_default",
    "person_key",
    "says_household",
]

LIBRARY_OWNER = "owner"
"""The owner's name where there is no person registry (library use, tests, ``homeagent memory``
on a data directory the daemon never opened): what ``marks_of(None)`` writes ``audience_of(None)``
reads, and what items stored before there were people belong to."""


def owner_or_default(name: str) -> str:
    """The owner's name items are stored under: ``name``, or :data:`LIBRARY_OWNER` when there is none."""
    return name or LIBRARY_OWNER


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


def current_audience(owner: str) -> Audience:
    """What the turn running in this task may read (a tool's view; the owner's outside a turn)."""
    return audience_of(CURRENT_PRINCIPAL.get(), owner=owner)


def current_marks(owner: str) -> tuple[str, str]:
    """``(person, visibility)`` of an item the turn running in this task stores."""
    return marks_of(CURRENT_PRINCIPAL.get(), owner=owner)


_HOUSEHOLD_ZH = re.compile(
    r"(告诉|告知|通知|转告)(一下)?(全家|大家|家里人|全家人|家人们|所有人)"
    r"|(让|叫)(全家|大家|家里人|全家人|所有人)(都)?(知道|晓得)"
    r"|(跟|和|给)(全家|大家|家里人|全家人|所有人)(都)?(说|讲)"
    r"|(全家|大家)(都)?(可以|能)(看|知道)"
)
_HOUSEHOLD_EN = re.compile(
    r"\b(tell|inform|let)\s+(everyone|everybody|the\s+(whole\s+)?(family|household))\b"
    r"|\bremember\s+(this|that|it)\s+for\s+(everyone|everybody|the\s+(whole\s+)?(family|household))\b"
    r"|\bshare\s+(this|that|it)\s+with\s+(everyone|everybody|the\s+(whole\s+)?(family|household))\b"
    r"|\b(everyone|everybody)\s+(should|may|can)\s+know\b",
    re.IGNORECASE,
)
_NEGATION_ZH = re.compile(r"(不要|不用|不许|不能|不想|不必|别|勿|先别|千万别)[^，。！？,.!?]{0,3}$")
_NEGATION_EN = re.compile(r"\b(don'?t|do\s+not|never|not|no\s+need\s+to|shouldn'?t|mustn'?t)\s+(\w+\s+)?$",
                          re.IGNORECASE)


def says_household(text: str) -> bool:
    """Whether ``text`` asks that what it says be known to the whole household
    ("告诉全家", "让大家都知道", "remember this for everyone", "tell everyone") — and not
    "不要告诉全家" / "don't tell everyone"."""
    for pattern, negation in ((_HOUSEHOLD_ZH, _NEGATION_ZH), (_HOUSEHOLD_EN, _NEGATION_EN)):
        for match in pattern.finditer(text):
            if not negation.search(text[max(0, match.start() - 24) : match.start()]):
                return True
    return False
