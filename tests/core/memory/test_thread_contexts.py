"""One working window per conversation thread: files, the open-window bound, the index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from homeagent_core.memory.context import ContextEvent, RelevanceContext, ThreadContexts, thread_file
from homeagent_core.memory.textlog import TextLog, record_thread
from homeagent_sdk.errors import UsageError


def threads_in(tmp_path: Path, keep: int = 32) -> ThreadContexts:
    main = RelevanceContext(tmp_path / "context.json", debounce=60)
    return ThreadContexts(main, tmp_path / "threads", keep=keep)


async def test_each_thread_has_its_own_window_and_file(tmp_path):
    threads = threads_in(tmp_path)
    await threads.get("main").append(ContextEvent(input="the owner's words"))
    await threads.get("qq:private:1001").append(ContextEvent(input="mum's words"))
    await threads.get("qq:group:7").append(ContextEvent(input="the group's words"))
    assert [e.input for e in threads.get("qq:private:1001").events] == ["mum's words"]
    assert [e.input for e in threads.get("").events] == ["the owner's words"]  # "" is the main thread
    assert threads.get("main") is threads.main
    await threads.aclose()
    assert (tmp_path / "threads" / "qq%3Aprivate%3A1001.json").exists()
    assert json.loads((tmp_path / "context.json").read_text())["events"][0]["input"] == "the owner's words"

    again = threads_in(tmp_path)
    assert [e.input for e in again.get("qq:group:7").events] == ["the group's words"]
    assert [e.input for e in again.get("main").events] == ["the owner's words"]


def test_thread_file_names_never_collide_and_stay_inside_the_folder():
    names = {thread_file(t) for t in ("a:b", "a%3Ab", "a_b", "a.b", "家:1", "..")}
    assert len(names) == 6
    assert all("/" not in n and ":" not in n for n in names)


async def test_at_most_keep_windows_stay_open_and_a_closed_one_is_saved(tmp_path):
    threads = threads_in(tmp_path, keep=2)
    for n in range(3):
        await threads.get(f"web:kid:{n}").append(ContextEvent(input=f"message {n}"))
    assert threads.opened() == ["web:kid:1", "web:kid:2"]
    # The window closed to make room was written, so opening it again reads its events back.
    assert [e.input for e in threads.get("web:kid:0").events] == ["message 0"]
    await threads.aclose()


def test_a_bad_thread_id_is_refused_with_what_is_allowed(tmp_path):
    threads = threads_in(tmp_path)
    for bad in ("a/b", "x\n", "t" * 201):
        with pytest.raises(UsageError, match="thread id must be 1-200 characters"):
            threads.get(bad)


def test_the_index_lists_a_persons_threads_and_survives_damage(tmp_path):
    threads = threads_in(tmp_path)
    threads.note("web:mum:1", "mum", "shopping", when=1.0)
    threads.note("web:kid:1", "kid", "homework", when=2.0)
    threads.note("web:mum:2", "mum", "", when=3.0)
    threads.note("web:mum:1", "kid", "taken over?", when=4.0)  # a known thread keeps its person and title
    assert [(t["id"], t["title"]) for t in threads.threads("mum")] == [("web:mum:1", "shopping"), ("web:mum:2", "")]
    assert threads_in(tmp_path).info("web:kid:1") == threads.info("web:kid:1")
    (tmp_path / "threads" / "index.json").write_text("{not json", encoding="utf-8")
    assert threads_in(tmp_path).threads("mum") == []


def test_log_records_name_person_and_thread_and_old_ones_are_the_main_thread(tmp_path):
    log = TextLog(tmp_path / "text")
    log.append("user", "before threads")
    log.append("user", "hi", person="kid", thread="web:kid:1")
    old, new = list(log.iter_records())
    log.close()
    assert (new["person"], new["thread"]) == ("kid", "web:kid:1")
    assert "thread" not in old and record_thread(old) == "main" and record_thread(new) == "web:kid:1"
