"""The social layer: people, their traits and their relations, over the graph store.

A person is a graph entity of type ``person``. Relations between people are ordinary graph
relations (so recall finds them); traits (``age``, ``birthday``, ``likes``) are key/value pairs
in the ``person_traits`` table of the same database, one value per trait, because values such
as ``25`` are not valid entity names. Plugins get this layer read-only.

People of the person registry are persons here too: what someone says about themselves ("我叫…")
is distilled with their registry name as the subject, an entity of type ``person``. A relation
between people records who said it and its visibility like any other relation, and the reads
take the reader's audience: the mother's private relations do not show in the child's
``person_query``. A kinship word ("妈妈") said by one person is not linked to another person's
entity unless someone stated that relation — nothing is invented.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import unicodedata
from collections import deque
from typing import TYPE_CHECKING, Any

from homeagent_core.memory.graph.store import Changes, check_name
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.types import Triple
from homeagent_sdk.visibility import EVERYONE, PRIVATE, Audience

if TYPE_CHECKING:
    from homeagent_core.memory.graph.store import GraphStore

__all__ = ["ACCOUNT_TRAIT", "PERSON_TYPE", "SocialGraph"]

PERSON_TYPE = "person"
#: Trait prefix of chat-app accounts: ``account:qq`` = ``12345``.
ACCOUNT_TRAIT = "account:"
TRAIT_MAX, VALUE_MAX = 50, 500


def _clean(text: str, what: str, limit: int) -> str:
    text = text.strip() if isinstance(text, str) else ""
    if not text:
        raise MemoryStoreError(f"{what} is empty")
    if len(text) > limit:
        raise MemoryStoreError(f"{what} is longer than {limit} characters ({len(text)})")
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise MemoryStoreError(f"{what} contains control characters")
    return text


def _person_name(name: str) -> str:
    name = name.strip() if isinstance(name, str) else ""
    reason = check_name(name)
    if reason is not None:
        raise MemoryStoreError(f"invalid person name: {reason}")
    return name


class SocialGraph:
    """People, traits and relations stored in a :class:`GraphStore`."""

    def __init__(self, graph: GraphStore) -> None:
        self.graph = graph

    # -------------------------------------------------------------- writes

    def set_trait(self, person: str, trait: str, value: str) -> None:
        """Set (or replace) one trait of ``person``, creating the person if needed."""
        name = _person_name(person)
        trait = _clean(trait, "trait name", TRAIT_MAX)
        value = _clean(value, "trait value", VALUE_MAX)

        def run(conn: sqlite3.Connection, ch: Changes) -> None:
            eid = self._ensure_person(conn, name)
            ch.entities.add(eid)
            conn.execute(
                "INSERT INTO person_traits (entity_id, trait, value, updated_at) VALUES"
                " (?, ?, ?, ?) ON CONFLICT (entity_id, trait) DO UPDATE SET"
                " value = excluded.value, updated_at = excluded.updated_at",
                (eid, trait, value, self.graph._clock()),
            )

        self.graph.write(run)

    def _ensure_person(self, conn: sqlite3.Connection, name: str) -> int:
        now = self.graph._clock()
        row = conn.execute(
            "INSERT INTO entities (name, type, mention_count, created_at, updated_at)"
            " VALUES (?, ?, 1, ?, ?) ON CONFLICT (name) DO UPDATE SET"
            " type = ?, updated_at = excluded.updated_at RETURNING id",
            (name, PERSON_TYPE, now, now, PERSON_TYPE),
        ).fetchone()
        return int(row[0])

    def link_account(self, person: str, platform: str, account: str) -> None:
        """Record that ``person`` is ``account`` on ``platform`` (trait ``account:<platform>``).

        One account per platform and person; an account linked to someone else moves to
        ``person``, so the same human on two apps becomes one person.
        """
        name = _person_name(person)
        trait = _clean(f"{ACCOUNT_TRAIT}{platform}", "platform", TRAIT_MAX)
        value = _clean(account, "account", VALUE_MAX)

        def run(conn: sqlite3.Connection, ch: Changes) -> None:
            conn.execute("DELETE FROM person_traits WHERE trait = ? AND value = ?", (trait, value))
            eid = self._ensure_person(conn, name)
            ch.entities.add(eid)
            conn.execute(
                "INSERT INTO person_traits (entity_id, trait, value, updated_at) VALUES"
                " (?, ?, ?, ?) ON CONFLICT (entity_id, trait) DO UPDATE SET"
                " value = excluded.value, updated_at = excluded.updated_at",
                (eid, trait, value, self.graph._clock()),
            )

        self.graph.write(run)

    def person_for_account(self, platform: str, account: str) -> str | None:
        """The person linked to ``account`` on ``platform``, or None."""
        row = self.graph.read(
            lambda conn: conn.execute(
                "SELECT e.name FROM person_traits t JOIN entities e ON e.id = t.entity_id"
                " WHERE t.trait = ? AND t.value = ? ORDER BY t.updated_at DESC LIMIT 1",
                (f"{ACCOUNT_TRAIT}{platform}", str(account)),
            ).fetchone()
        )
        return str(row[0]) if row else None

    def relate(
        self, person: str, relation: str, other: str, session: str = "", *, by: str = "", visibility: str = PRIVATE
    ) -> None:
        """Record ``person --relation--> other`` between two people, said by ``by`` with ``visibility``."""
        a, b = _person_name(person), _person_name(other)
        relation = _clean(relation, "relation", 50)
        if a == b:
            raise MemoryStoreError("a person cannot be related to themself; name two people")
        result = self.graph.commit(
            [Triple(a, relation, b, subject_type=PERSON_TYPE, object_type=PERSON_TYPE)],
            session,
            person=by,
            visibility=visibility,
        )
        if result.skipped:
            raise MemoryStoreError(result.skipped[0])

    # --------------------------------------------------------------- reads

    def get_person(self, name: str, audience: Audience = EVERYONE) -> dict[str, Any] | None:
        """``{name, type, mention_count, traits, relations[{person, relation, direction}]}``.

        Only relations ``audience`` may see are listed; a person no visible relation touches is
        unknown to it (None).
        """
        row = self.graph.cache.entity(name.strip())
        if row is None or not self.graph.cache.visible_entity(row.id, audience):
            return None
        traits = self.traits(row.name)
        relations: list[dict[str, str]] = []
        cache = self.graph.cache
        with cache.lock:
            for _u, v, key in cache.out_edges(row.id, audience):
                relations.append(
                    {"person": cache.entities[v].name, "relation": cache.relations[key].type, "direction": "out"}
                )
            for u, _v, key in cache.in_edges(row.id, audience):
                relations.append(
                    {"person": cache.entities[u].name, "relation": cache.relations[key].type, "direction": "in"}
                )
        return {
            "name": row.name,
            "type": row.type,
            "mention_count": row.mention_count,
            "traits": traits,
            "relations": relations,
        }

    def traits(self, name: str) -> dict[str, str]:
        return dict(
            self.graph.read(
                lambda conn: conn.execute(
                    "SELECT t.trait, t.value FROM person_traits t JOIN entities e"
                    " ON e.id = t.entity_id WHERE e.name = ? ORDER BY t.trait",
                    (name.strip(),),
                ).fetchall()
            )
        )

    def get_trait(self, name: str, trait: str) -> str | None:
        return self.traits(name).get(trait.strip())

    def list_persons(self, audience: Audience = EVERYONE) -> list[str]:
        cache = self.graph.cache
        with cache.lock:
            return sorted(
                e.name
                for e in cache.entities.values()
                if e.type == PERSON_TYPE and (audience.everything or cache.visible_entity(e.id, audience))
            )

    def network(self, name: str, depth: int = 2, audience: Audience = EVERYONE) -> dict[str, Any]:
        """People reachable from ``name`` within ``depth`` hops over relations between people.

        Returns ``{center, people[{name, distance}], relations[{source, relation, target}]}``.

        Raises:
            MemoryStoreError: ``name`` is not a known person.
        """
        cache = self.graph.cache
        with cache.lock:
            start = cache.entity(name.strip())
            if start is None or start.type != PERSON_TYPE or not cache.visible_entity(start.id, audience):
                known = ", ".join(self.list_persons(audience)[:20])
                raise MemoryStoreError(f"unknown person {name!r}; known people: {known}")
            dist = {start.id: 0}
            queue = deque([start.id])
            rels: dict[int, tuple[int, int]] = {}
            while queue:
                node = queue.popleft()
                if dist[node] >= depth:
                    continue
                edges = cache.out_edges(node, audience) + cache.in_edges(node, audience)
                for u, v, key in edges:
                    other = v if u == node else u
                    if cache.entities[other].type != PERSON_TYPE:
                        continue
                    rels[key] = (u, v)
                    if other not in dist:
                        dist[other] = dist[node] + 1
                        queue.append(other)
            return {
                "center": start.name,
                "people": [
                    {"name": cache.entities[p].name, "distance": d}
                    for p, d in sorted(dist.items(), key=lambda kv: (kv[1], kv[0]))
                    if p != start.id
                ],
                "relations": [
                    {
                        "source": cache.entities[u].name,
                        "relation": cache.relations[k].type,
                        "target": cache.entities[v].name,
                    }
                    for k, (u, v) in sorted(rels.items())
                ],
            }

    # --------------------------------------------------------- async twins

    async def aset_trait(self, person: str, trait: str, value: str) -> None:
        await asyncio.to_thread(self.set_trait, person, trait, value)

    async def arelate(
        self, person: str, relation: str, other: str, session: str = "", *, by: str = "", visibility: str = PRIVATE
    ) -> None:
        await asyncio.to_thread(
            functools.partial(self.relate, person, relation, other, session, by=by, visibility=visibility)
        )

    async def aget_person(self, name: str, audience: Audience = EVERYONE) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.get_person, name, audience)
