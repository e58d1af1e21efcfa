"""Conversation threads: which conversation an input belongs to.

Each person has their own conversations, and a turn's prompt is built from its own thread
only. A door names the thread in :attr:`homeagent_sdk.types.Principal.thread`:

* the web UI: the conversation the person picked (``web:<person>:<id>`` once they start a new one);
* a chat app: ``<platform>:private:<account>`` for a direct message, ``<platform>:group:<id>`` for a group;
* the OpenAI-compatible ``/v1``: ``v1:<person>:<user>`` (``user`` is the request's ``user`` field);
* the terminal and the library API: none, i.e. the owner's default thread.

An input that names no thread is in its person's default thread (:func:`thread_of`): ``main``
for the owner, heartbeats and library use without a person registry, ``person:<name>`` for
anyone else, ``guest:<door>:<account>`` for a guest. Conversation-log records written before
there were threads belong to ``main``.
"""

from __future__ import annotations

from homeagent_sdk.types import Principal

__all__ = ["MAIN_THREAD", "RESERVED_PREFIXES", "door_may_name", "thread_of"]

#: The owner's default thread: the single conversation of library use and of a one-person home.
MAIN_THREAD = "main"
#: Thread names only the core's own doors (web UI, /v1) and the defaults use.
RESERVED_PREFIXES = ("web:", "v1:", "person:", "guest:")


def door_may_name(door: str, thread: str) -> bool:
    """Whether a plugin's door may name ``thread``: only threads of its own door (``<door>:…``,
    as the chat bridges' ``qq:private:<account>``), never ``main`` or a reserved name."""
    return bool(door) and thread.startswith(f"{door}:") and not thread.startswith(RESERVED_PREFIXES)


def thread_of(principal: Principal | None) -> str:
    """The thread an input of ``principal`` belongs to (see the module docstring)."""
    if principal is None:
        return MAIN_THREAD
    if principal.thread:
        return principal.thread
    if principal.role in ("owner", "system"):
        return MAIN_THREAD
    if principal.person:
        return f"person:{principal.person}"
    return f"guest:{principal.door}:{principal.account}"
