"""Who reads and writes the graph: a principal's audience, the marks of what it says, and "我".

The rules are :mod:`homeagent_core.memory.audience`'s, with what the graph adds:

* library use (no principal and no owner name known, ``owner`` "") reads everything — there is
  one user — and writes rows with person "" that become the owner's once the owner is known
  (:meth:`~homeagent_core.memory.graph.store.GraphStore.claim_for_owner`);
* "我" / "I" in what someone says is the speaker: their registry name (:func:`speaker_name`),
  the owner's name for the owner, and :data:`DEFAULT_SUBJECT` ("用户") only in library use,
  as before there were people. A guest is named by their account, so "我叫…" said by a guest
  names the guest's own entity, never a household member (their items are stored under their
  thread, as :func:`~homeagent_core.memory.audience.person_key` says).
"""

from __future__ import annotations

from homeagent_core.memory.audience import audience_of, marks_of, person_key
from homeagent_core.memory.distill import DEFAULT_SUBJECT
from homeagent_sdk.types import Principal
from homeagent_sdk.visibility import EVERYONE, Audience

__all__ = ["DEFAULT_SUBJECT", "graph_marks", "graph_reader", "speaker_name"]

def graph_reader(principal: Principal | None, owner: str) -> Audience:
    """What a turn of ``principal`` may read of the graph (everything in library use)."""
    if principal is None and not owner:
        return EVERYONE
    return audience_of(principal, owner=owner)


def graph_marks(principal: Principal | None, owner: str) -> tuple[str, str]:
    """``(person, visibility)`` of what ``principal`` says ("" person in library use: the owner's, claimed later)."""
    return marks_of(principal, owner=owner)


def speaker_name(principal: Principal | None, owner: str) -> str:
    """The entity "我" names in what ``principal`` says (see the module text).

    A guest is named by their own account (``guest:<door>:<account>``), not by the thread they
    speak in: in a group chat every unlinked member speaks in the group's thread.
    """
    if principal is not None and not principal.person and principal.role != "system" and principal.account:
        return f"guest:{principal.door}:{principal.account}"
    name = person_key(principal, owner=owner)
    return name or DEFAULT_SUBJECT
