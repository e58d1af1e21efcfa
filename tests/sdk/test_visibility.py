"""The visibility rules, in memory and inside a real SQLite query."""

from __future__ import annotations

import sqlite3

import pytest

from homeagent_sdk.types import Principal
from homeagent_sdk.visibility import (
    EVERYONE,
    HOUSEHOLD,
    PRIVATE,
    Audience,
    group_visibility,
    sql_filter,
    valid_visibility,
)

ITEMS = [
    ("mother", PRIVATE),
    ("child", PRIVATE),
    ("mother", HOUSEHOLD),
    ("child", group_visibility("qq:group:1")),
    ("", PRIVATE),
]

CASES = [
    (Audience(person="mother"), {0, 2}),
    (Audience(person="child", group="qq:group:1"), {1, 2, 3}),
    (Audience(), {2}),
    (Audience(group="qq:group:1"), {2, 3}),
    (Audience(group="qq:group:2"), {2}),
    (EVERYONE, {0, 1, 2, 3, 4}),
]


@pytest.mark.parametrize(("audience", "expected"), CASES)
def test_an_audience_sees_its_own_private_items_household_items_and_its_group(audience: Audience,
                                                                              expected: set[int]) -> None:
    assert {i for i, (person, vis) in enumerate(ITEMS) if audience.sees(person, vis)} == expected


@pytest.mark.parametrize(("audience", "expected"), CASES)
def test_the_sql_filter_keeps_the_same_rows_as_the_in_memory_rule(audience: Audience, expected: set[int]) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE items (id INTEGER, person TEXT, visibility TEXT)")
    db.executemany("INSERT INTO items VALUES (?, ?, ?)", [(i, p, v) for i, (p, v) in enumerate(ITEMS)])
    clause, params = sql_filter(audience)
    rows = db.execute(f"SELECT id FROM items WHERE 1=1 AND {clause}", params).fetchall()
    assert {r[0] for r in rows} == expected


def test_only_known_visibilities_are_valid() -> None:
    assert valid_visibility(PRIVATE) and valid_visibility(HOUSEHOLD) and valid_visibility("group:qq:group:1")
    assert not valid_visibility("group:") and not valid_visibility("public") and not valid_visibility("")


def test_a_turn_reads_as_its_person_a_guest_as_their_thread_and_a_group_turn_sees_the_group() -> None:
    from homeagent_core.memory.audience import audience_of, marks_of

    mother = Principal(person="mother", role="adult", door="webui", thread="web:mother:1")
    assert audience_of(mother, owner="dad") == Audience(person="mother")
    assert marks_of(mother, owner="dad") == ("mother", PRIVATE)
    guest = Principal(person="", role="guest", door="qq", account="42", thread="qq:private:42")
    assert audience_of(guest, owner="dad") == Audience(person="qq:private:42")
    in_group = Principal(person="child", role="child", door="qq", account="7", thread="qq:group:9")
    assert audience_of(in_group, owner="dad") == Audience(person="child", group="qq:group:9")
    assert marks_of(in_group, owner="dad") == ("child", "group:qq:group:9")
    assert audience_of(None, owner="dad") == Audience(person="dad")
    assert audience_of(Principal(person="system", role="system"), owner="dad") == EVERYONE
