"""Store calls made from async code run in the ``memory`` worker pool, never on the event loop.

Each test wraps one blocking store method so it records the thread it ran in, then calls the
async path a turn or a plugin uses.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.knowledge.base import DiskKnowledge, KnowledgeBase
from homeagent_core.memory.knowledge.tools import knowledge_tools
from homeagent_core.memory.media import MediaStore
from homeagent_core.memory.textlog import TextLog
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import Triple
from homeagent_sdk.visibility import EVERYONE


def recording(threads: list[str], fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return fn(*args, **kwargs)

    return wrapper


def off_loop(threads: list[str]) -> bool:
    return bool(threads) and all(t.startswith("memory-") for t in threads)


async def test_graph_writes_and_introspection_run_in_the_memory_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = GraphStore(tmp_path / "graph.db")
    threads: list[str] = []
    monkeypatch.setattr(store, "commit", recording(threads, store.commit))
    monkeypatch.setattr(store, "introspect", recording(threads, store.introspect))
    try:
        result = await store.acommit([Triple("小王", "住在", "杭州")])
        assert result.to_dict()["added"] == 1
        assert (await store.aintrospect())["entities"] == 2
    finally:
        store.close()
    assert len(threads) == 2 and off_loop(threads), threads


async def test_the_conversation_log_appends_in_the_memory_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = TextLog(tmp_path / "text")
    threads: list[str] = []
    monkeypatch.setattr(log, "append", recording(threads, log.append))
    try:
        await log.aappend("user", "你好")
        assert [r["content"] for r in log.tail(5)] == ["你好"]
    finally:
        log.close()
    assert off_loop(threads), threads


async def test_a_media_search_builds_and_scans_its_matrix_in_the_memory_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MediaStore(tmp_path / "media", embedder=FakeEmbedder(32, image=True))
    try:
        record = await store.put(b"a voice note about the weather", "text/plain", name="note.txt")
        assert record is not None
        threads: list[str] = []
        monkeypatch.setattr(store, "_current_matrix", recording(threads, store._current_matrix))
        await store.search("weather", 3)
    finally:
        store.close()
    assert off_loop(threads), threads


class FollowedDisk(DiskKnowledge):
    """Knowledge files whose change notices are delivered by the test (as PostgreSQL's are)."""

    notify: Callable[[], None] | None = None

    def follow(self, on_change: Callable[[], None]) -> None:
        self.notify = on_change


async def test_another_daemons_knowledge_changes_are_read_in_the_memory_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = FollowedDisk(tmp_path / "knowledge")
    kb = KnowledgeBase(tmp_path / "knowledge", storage=storage)
    await kb.create("home/wifi", "客厅路由器的密码是 12345678")
    other = KnowledgeBase(tmp_path / "knowledge")  # another daemon on the same tree
    await other.create("home/heating", "暖气在十一月十五日开始供应")
    threads: list[str] = []
    monkeypatch.setattr(storage, "load", recording(threads, storage.load))
    assert storage.notify is not None
    storage.notify()
    hits = await kb.search("暖气 供应", 1, audience=EVERYONE)
    assert [h.entry.name for h in hits] == ["home/heating"]
    assert off_loop(threads), threads
    assert len(kb) == 2 and threads == threads[:1]  # reloaded once, nothing left to read


async def test_the_knowledge_delete_tool_removes_files_in_the_memory_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = KnowledgeBase(tmp_path / "knowledge")
    await kb.create("home/wifi", "客厅路由器的密码是 12345678")
    threads: list[str] = []
    monkeypatch.setattr(kb.storage, "remove", recording(threads, kb.storage.remove))
    monkeypatch.setattr(kb, "_save_index", recording(threads, kb._save_index))
    tools = {t.name: t for t in knowledge_tools(kb)}
    assert tools["knowledge_delete"].handler is not None
    assert await tools["knowledge_delete"].handler(name="wifi") == {"deleted": "home/wifi"}
    assert len(threads) == 2 and off_loop(threads), threads
    assert len(kb) == 0 and not (tmp_path / "knowledge" / "home" / "wifi").exists()


async def test_an_entry_created_while_a_reload_is_read_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reload read before the create is dropped, not installed over it; the next call reads again."""
    storage = FollowedDisk(tmp_path / "knowledge")
    kb = KnowledgeBase(tmp_path / "knowledge", storage=storage)
    other = KnowledgeBase(tmp_path / "knowledge")
    await other.create("home/heating", "暖气在十一月十五日开始供应")
    reading, release = threading.Event(), threading.Event()
    real_load = storage.load

    def slow_load() -> Any:
        rows = list(real_load())  # what the disk holds before the create below
        reading.set()
        release.wait(10)
        return rows

    monkeypatch.setattr(storage, "load", slow_load)
    assert storage.notify is not None
    storage.notify()
    reload = asyncio.ensure_future(kb.refresh())
    async with asyncio.timeout(10):
        while not reading.is_set():
            await asyncio.sleep(0.005)
    await kb.create("home/wifi", "客厅路由器的密码是 12345678")
    release.set()
    await reload
    monkeypatch.setattr(storage, "load", real_load)
    assert [e.name for e in kb.list()] == ["home/heating", "home/wifi"]
