from __future__ import annotations

import time

import pytest

from homeagent_core.memory.textlog import TextLog
from homeagent_sdk.errors import UsageError


def test_appended_records_read_back_in_order(tmp_path, open_log):
    log = open_log(tmp_path / "text")
    log.append("user", "我叫小王", channel="webui", timestamp=100.0)
    log.append("assistant", "你好，小王", channel="webui", timestamp=101.0)
    events = list(log.iter_events())
    assert [(e.role, e.content, e.channel) for e in events] == [
        ("user", "我叫小王", "webui"),
        ("assistant", "你好，小王", "webui"),
    ]
    assert [e.content for e in log.iter_events(since=100.5)] == ["你好，小王"]
    log.close()


def test_files_rotate_by_size(tmp_path):
    log = TextLog(tmp_path, max_bytes=200)
    now = time.time()
    for i in range(10):
        log.append("user", f"message number {i} " + "x" * 40, timestamp=now)
    assert len(log.files()) > 1
    assert [e.content.split()[2] for e in log.iter_events()] == [str(i) for i in range(10)]
    log.close()


def test_files_rotate_when_the_day_changes(tmp_path):
    log = TextLog(tmp_path)
    log.append("user", "yesterday", timestamp=time.time() - 86400)
    log.append("user", "today")
    assert len(log.files()) == 2
    log.close()


def test_edit_replaces_text_and_purge_deletes_records(tmp_path, open_log):
    log = open_log(tmp_path)
    keep = log.append("user", "I live in Hangzhou")
    log.append("user", "my phone is 12345")
    assert log.edit("Hangzhou", "Suzhou") == 1
    assert log.purge(contains="12345") == 1
    records = list(log.iter_records())
    assert [(r["id"], r["content"]) for r in records] == [(keep, "I live in Suzhou")]
    log.append("user", "still appendable after a rewrite")
    assert log.purge(ids=[keep]) == 1
    assert [r["content"] for r in log.iter_records()] == ["still appendable after a rewrite"]
    log.close()


def test_a_partial_last_line_is_dropped_on_reopen(tmp_path):
    log = TextLog(tmp_path)
    log.append("user", "complete")
    log.close()
    (path,) = log.files()
    with open(path, "ab") as fh:
        fh.write(b'{"id": "x", "role": "user", "content": "cut sh')
    reopened = TextLog(tmp_path)
    reopened.append("user", "next")
    assert [e.content for e in reopened.iter_events()] == ["complete", "next"]
    reopened.close()


def test_bad_arguments_are_rejected_with_the_reason(tmp_path, open_log):
    log = open_log(tmp_path)
    with pytest.raises(UsageError, match="role"):
        log.append("", "x")
    with pytest.raises(UsageError, match="contains"):
        log.purge()
    with pytest.raises(UsageError, match="non-empty"):
        log.edit("", "y")
    log.close()


def test_a_file_log_refuses_a_zero_size_limit(tmp_path):
    with pytest.raises(UsageError, match="max_bytes"):
        TextLog(tmp_path, max_bytes=0)


def test_tail_reads_the_newest_accepted_records_oldest_first(tmp_path, open_log):
    log = open_log(tmp_path / "text")
    for i in range(30):
        log.append("user" if i % 2 else "assistant", f"m{i}", channel="a" if i % 3 else "b", timestamp=1000.0 + i)
    assert [r["content"] for r in log.tail(3)] == ["m27", "m28", "m29"]
    assert [r["content"] for r in log.tail(2, accept=lambda r: r.get("channel") == "b")] == ["m24", "m27"]
    assert log.tail(0) == []
    assert [e.content for e in log.iter_events(since=1027.0, until=1028.0)] == ["m27", "m28"]
    log.close()


def test_listeners_get_each_durable_record_and_none_after_a_rewrite(tmp_path, open_log):
    log = open_log(tmp_path / "text")
    seen: list[object] = []
    remove = log.add_listener(lambda r: seen.append(r and r["content"]))
    log.append("user", "hello there")
    log.edit("there", "world")
    log.append("user", "after")
    remove()
    log.append("user", "unheard")
    assert seen == ["hello there", None, "after"]
    log.close()


def test_imported_records_keep_their_ids_times_and_order(tmp_path, open_log):
    log = open_log(tmp_path / "text")
    log.append("user", "already here", timestamp=50.0)
    records = [{"id": f"r{i}", "role": "user", "content": f"c{i}", "timestamp": 100.0 + i, "channel": "x"}
               for i in range(5)]
    log.import_records(records)
    assert list(log.iter_records())[1:] == records
    log.close()
    again = open_log(tmp_path / "text")
    assert [r["id"] for r in again.tail(2)] == ["r3", "r4"]
    again.close()
