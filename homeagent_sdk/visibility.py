"""Who may see a stored memory item: its person and its visibility.

Every item a store keeps (log record, context entry, document, graph relation, media block,
knowledge entry, resident scratch, distilled note) records the ``person`` it came from and a
``visibility``:

* ``private`` — only that person (the default for a direct message or a person's own web thread);
* ``household`` — everyone in the home (the owner marks it, or the person says "告诉全家");
* ``group:<thread>`` — the members of the group chat it was said in.

A turn reads memory as an :class:`Audience` (its principal's person and, in a group chat, the
group's thread). Stores filter *inside* their queries with :func:`sql_filter` (so a filtered
top 10 is ten visible items) and in-memory caches with :func:`Audience.sees`.

Items written before there were people belong to the owner and are ``private``; the owner may
mark them ``household``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EVERYONE",
    "GROUP_PREFIX",
    "HOUSEHOLD",
    "PRIVATE",
    "Audience",
    "group_visibility",
    "sql_filter",
    "valid_visibility",
]

PRIVATE = "private"
HOUSEHOLD = "household"
GROUP_PREFIX = "group:"


def group_visibility(thread: str) -> str:
    """The visibility of an item said in the group chat ``thread``."""
    return f"{GROUP_PREFIX}{thread}"


def valid_visibility(value: str) -> bool:
    """Whether ``value`` is a visibility a store accepts."""
    return value in (PRIVATE, HOUSEHOLD) or (value.startswith(GROUP_PREFIX) and len(value) > len(GROUP_PREFIX))


@dataclass(frozen=True, slots=True)
class Audience:
    """What one reader may see.

    ``person`` "" is a guest: they see household items and their group's only. ``group`` is
    the group chat's thread the turn runs in ("" outside a group). ``everything`` is the
    unfiltered view of maintenance work that keeps each item's person and visibility
    (heartbeats, backups, the owner's memory browser) — never a turn's.
    """

    person: str = ""
    group: str = ""
    everything: bool = False

    def sees(self, person: str, visibility: str) -> bool:
        """Whether an item of ``person`` with ``visibility`` is visible to this audience."""
        if self.everything or visibility == HOUSEHOLD:
            return True
        if visibility == PRIVATE:
            return bool(self.person) and person == self.person
        return bool(self.group) and visibility == group_visibility(self.group)


#: The unfiltered view (maintenance; see :attr:`Audience.everything`).
EVERYONE = Audience(everything=True)


def sql_filter(audience: Audience, *, person_col: str = "person", visibility_col: str = "visibility",
               placeholder: str = "?") -> tuple[str, list[str]]:
    """A SQL condition and its parameters that keep the rows ``audience`` may see.

    ``placeholder`` is ``?`` for SQLite, ``%s`` for PostgreSQL. The condition is always
    parenthesised, so it can be AND-ed into any WHERE clause.
    """
    if audience.everything:
        return "(1=1)", []
    parts = [f"{visibility_col} = {placeholder}"]
    params = [HOUSEHOLD]
    if audience.person:
        parts.append(f"({visibility_col} = {placeholder} AND {person_col} = {placeholder})")
        params += [PRIVATE, audience.person]
    if audience.group:
        parts.append(f"{visibility_col} = {placeholder}")
        params.append(group_visibility(audience.group))
    return "(" + " OR ".join(parts) + ")", params
