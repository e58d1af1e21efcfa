"""The knowledge tier's interface, run against every backend (files under a folder, PostgreSQL tenant).

Each test drives a :class:`~homeagent_core.memory.stores.knowledge.KnowledgeStorage` directly: the
entries and cached index a knowledge base keeps, wherever they live.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from homeagent_core.memory.knowledge.base import DiskKnowledge
from homeagent_core.memory.stores.knowledge import KnowledgeStorage

Opener = Callable[[], KnowledgeStorage]


@pytest.fixture(params=["files", "postgresql"])
def open_knowledge(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the same entries again on each call; every storage opened is closed afterwards."""
    opened: list[KnowledgeStorage] = []
    if request.param == "files":

        def make() -> KnowledgeStorage:
            return DiskKnowledge(tmp_path / "knowledge")

    else:
        from homeagent_core.memory.stores.postgresql.knowledge import PgKnowledge

        url, tenant = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_tenant")

        def make() -> KnowledgeStorage:
            return PgKnowledge(url, tenant=tenant)

    def opener() -> KnowledgeStorage:
        storage = make()
        opened.append(storage)
        return storage

    yield opener
    for storage in opened:
        storage.close()


def test_each_backend_declares_the_knowledge_interface(open_knowledge: Opener) -> None:
    storage = open_knowledge()
    assert KnowledgeStorage in type(storage).__mro__, f"{type(storage).__name__} does not declare KnowledgeStorage"


def test_entries_are_written_listed_by_name_and_removed(open_knowledge: Opener) -> None:
    storage = open_knowledge()
    assert storage.load() == []
    first = storage.write("home/wifi", "the password is on the router")
    storage.write("cooking/cake", "three eggs")
    storage.write("home/wifi", "ask the owner")
    entries = storage.load()
    assert [(n, c) for n, c, _ in entries] == [("cooking/cake", "three eggs"), ("home/wifi", "ask the owner")]
    assert dict((n, u) for n, _, u in entries)["home/wifi"] >= first
    storage.remove("cooking/cake")
    assert [n for n, _, _ in open_knowledge().load()] == ["home/wifi"]


def test_the_cached_index_is_kept_per_entry(open_knowledge: Opener) -> None:
    storage = open_knowledge()
    updated = storage.write("home/wifi", "ask the owner")
    storage.save_index({"home/wifi": {"updated_at": updated, "fingerprint": "fp1", "vector": "AAAA"}})
    index = open_knowledge().load_index()
    assert index["home/wifi"]["fingerprint"] == "fp1" and index["home/wifi"]["vector"] == "AAAA"


async def test_entries_keep_their_person_and_visibility_and_readers_see_only_theirs(open_knowledge: Opener, tmp_path):
    from homeagent_core.memory.knowledge.base import KnowledgeBase
    from homeagent_sdk.visibility import HOUSEHOLD, PRIVATE, Audience

    kb = KnowledgeBase(tmp_path / "kb-root", storage=open_knowledge(), owner="mum")
    await kb.create("health/checkup", "hospital check-up next wednesday", person="mum")
    await kb.create("home/wifi", "the wifi password is tulip42", person="mum", visibility=HOUSEHOLD)
    assert open_knowledge().load_marks() == {"health/checkup": ("mum", PRIVATE), "home/wifi": ("mum", HOUSEHOLD)}
    again = KnowledgeBase(tmp_path / "kb-root", storage=open_knowledge(), owner="mum")
    kid = Audience(person="kid")
    assert [h.entry.name for h in await again.search("hospital wifi password", 5, audience=kid)] == ["home/wifi"]
    again.set_visibility("health/checkup", HOUSEHOLD)
    third = KnowledgeBase(tmp_path / "kb-root", storage=open_knowledge(), owner="mum")
    assert {e.name for e in third.list(audience=kid)} == {"health/checkup", "home/wifi"}
    third.delete("health/checkup")
    assert "health/checkup" not in open_knowledge().load_marks()
