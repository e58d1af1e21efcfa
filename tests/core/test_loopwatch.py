"""LoopWatch: a callback that blocks the event loop is logged with the stack it was blocking in."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from homeagent_core import loopwatch
from homeagent_core.loopwatch import LoopWatch


def _deliberately_blocking_callback() -> None:
    time.sleep(0.2)  # what a store call made on the loop does


async def test_a_blocking_callback_is_logged_with_its_stack(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="homeagent_core.loopwatch")
    loop = asyncio.get_running_loop()
    watch = LoopWatch(loop, threshold=0.05)
    watch.start()
    try:
        await asyncio.sleep(0.05)  # a few beats first
        loop.call_soon(_deliberately_blocking_callback)
        async with asyncio.timeout(10):
            while watch.stats()["stalls"] == 0:
                await asyncio.sleep(0.01)
    finally:
        watch.stop()
    stats = watch.stats()
    assert stats["threshold_ms"] == 50.0 and stats["worst_ms"] >= 150
    stack = stats["latest"][-1]["stack"]
    assert "_deliberately_blocking_callback" in stack and "time.sleep(0.2)" in stack
    (record,) = [r for r in caplog.records if "event loop blocked" in r.getMessage()]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "blocked for at least " in message and "threshold 50 ms" in message
    assert "_deliberately_blocking_callback" in message


async def test_stop_ends_the_watchdog_thread_and_the_beat() -> None:
    watch = LoopWatch(asyncio.get_running_loop(), threshold=0.05)
    watch.start()
    thread = watch._thread
    assert thread is not None and thread.is_alive()
    watch.stop()
    assert not thread.is_alive() and watch._handle is None


def test_the_environment_turns_it_on_with_a_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOMEAGENT_LOOP_WATCH_MS", raising=False)
    monkeypatch.delenv("HOMEAGENT_DEBUG", raising=False)
    assert loopwatch._threshold_from_env() is None
    monkeypatch.setenv("HOMEAGENT_DEBUG", "1")
    assert loopwatch._threshold_from_env() == 0.05
    monkeypatch.setenv("HOMEAGENT_LOOP_WATCH_MS", "120")
    assert loopwatch._threshold_from_env() == 0.12
    monkeypatch.setenv("HOMEAGENT_LOOP_WATCH_MS", "0")
    assert loopwatch._threshold_from_env() is None
    monkeypatch.setenv("HOMEAGENT_LOOP_WATCH_MS", "fast")
    with pytest.raises(ValueError, match="HOMEAGENT_LOOP_WATCH_MS must be milliseconds such as 50"):
        loopwatch._threshold_from_env()


async def test_from_env_starts_the_active_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOMEAGENT_LOOP_WATCH_MS", raising=False)
    monkeypatch.setenv("HOMEAGENT_DEBUG", "1")
    watch = loopwatch.from_env()
    try:
        assert watch is not None and loopwatch.active() is watch
    finally:
        assert watch is not None
        watch.stop()
    assert loopwatch.active() is None
