"""The conversation log tier's interface, run against every backend (JSONL files, PostgreSQL tenant).

Each test opens a log through ``open_log`` (tests/core/memory/conftest.py) and uses only what
:class:`~homeagent_core.memory.stores.log.ConversationLog` declares.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.memory.stores.log import ConversationLog
from homeagent_sdk.errors import UsageError

Opener = Callable[..., ConversationLog]


@pytest.fixture
def open_log(open_log: Opener) -> Iterator[Opener]:
    """The backend's ``open_log``, closing every log a test opened (idempotent on both backends)."""
    opened: list[ConversationLog] = []

    def opener(path: Path) -> ConversationLog:
        log = open_log(path)
        opened.append(log)
        return log

    yield opener
    for log in opened:
        log.close()


def test_each_backend_declares_the_log_interface(tmp_path: Path, open_log: Opener) -> None:
    log = open_log(tmp_path / "text")
    assert ConversationLog in type(log).__mro__, f"{type(log).__name__} does not declare ConversationLog"


async def test_records_come_back_in_write_order_and_by_time(tmp_path: Path, open_log: Opener) -> None:
    log = open_log(tmp_path / "text")
    heard: list[dict[str, Any] | None] = []
    remove = log.add_listener(heard.append)
    first = log.append("user", "hello there", channel="web", timestamp=100.0)
    second = await log.aappend("assistant", "hi!", reasoning="greet back", timestamp=200.0)
    log.append("user", "bye", timestamp=300.0)
    remove()
    log.append("user", "unheard", timestamp=400.0)
    assert [r["id"] for r in heard if r is not None][:2] == [first, second] and len(heard) == 3
    records = list(log.iter_records())
    assert [(r["role"], r["content"]) for r in records] == [
        ("user", "hello there"),
        ("assistant", "hi!"),
        ("user", "bye"),
        ("user", "unheard"),
    ]
    assert records[0]["channel"] == "web" and records[1]["reasoning"] == "greet back"
    assert [r["content"] for r in log.iter_records(since=150.0, until=300.0)] == ["hi!", "bye"]
    assert [e.content for e in log.iter_events(since=250.0)] == ["bye", "unheard"]
    assert [r["content"] for r in log.tail(2)] == ["bye", "unheard"]
    assert [r["content"] for r in log.tail(5, accept=lambda r: r["role"] == "assistant")] == ["hi!"]


def test_edit_and_purge_rewrite_the_stored_records(tmp_path: Path, open_log: Opener) -> None:
    log = open_log(tmp_path / "text")
    keep = log.append("user", "my pin is 1234", timestamp=1.0)
    drop = log.append("user", "delete me", timestamp=2.0)
    log.append("user", "and me too", timestamp=3.0)
    assert log.edit("1234", "****") == 1
    assert log.purge(ids=[drop]) == 1
    assert log.purge(contains="me too") == 1
    assert [(r["id"], r["content"]) for r in log.iter_records()] == [(keep, "my pin is ****")]
    with pytest.raises(UsageError, match="purge needs"):
        log.purge()
    with pytest.raises(UsageError, match="needs a role"):
        log.append("", "no role")


def test_records_outlive_the_log_and_move_between_logs(tmp_path: Path, open_log: Opener) -> None:
    log = open_log(tmp_path / "text")
    log.append("user", "remember the milk", timestamp=10.0)
    log.close()
    again = open_log(tmp_path / "text")
    records = list(again.iter_records())
    assert [r["content"] for r in records] == ["remember the milk"]
    copy = open_log(tmp_path / "copy")
    copy.import_records(records)
    assert list(copy.iter_records()) == records
