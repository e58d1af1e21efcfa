from __future__ import annotations

import time

import pytest

from homeagent_core.memory.textlog import TextLog
from homeagent_sdk.errors import UsageError


def test_appended_records_read_back_in_order(tmp_path):
    log = TextLog(tmp_path / "text")
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


def test_edit_replaces_text_and_purge_deletes_records(tmp_path):
    log = TextLog(tmp_path)
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


def test_bad_arguments_are_rejected_with_the_reason(tmp_path):
    log = TextLog(tmp_path)
    with pytest.raises(UsageError, match="role"):
        log.append("", "x")
    with pytest.raises(UsageError, match="contains"):
        log.purge()
    with pytest.raises(UsageError, match="non-empty"):
        log.edit("", "y")
    with pytest.raises(UsageError, match="max_bytes"):
        TextLog(tmp_path, max_bytes=0)
    log.close()
