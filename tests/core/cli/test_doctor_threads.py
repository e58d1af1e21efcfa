"""``homeagent doctor`` reports the daemon's hung worker threads and event-loop stalls."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import pytest

from homeagent_core import workers
from homeagent_core.cli.doctor import _check_threads
from homeagent_core.loopwatch import LoopWatch
from homeagent_core.workers import WorkerPool


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def _weather_lookup_that_hangs(release: threading.Event) -> None:
    release.wait(30)


def _blocks_the_loop() -> None:
    time.sleep(0.15)


async def test_hung_threads_and_loop_stalls_are_named_with_what_to_do(release: threading.Event) -> None:
    pool = WorkerPool("doctor-tools", 2, owner_limit=1)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await pool.run(_weather_lookup_that_hangs, release, owner="weather")
    loop = asyncio.get_running_loop()
    watch = LoopWatch(loop, threshold=0.05)
    watch.start()
    try:
        loop.call_soon(_blocks_the_loop)
        async with asyncio.timeout(10):
            while not watch.stats()["stalls"]:
                await asyncio.sleep(0.01)
    finally:
        watch.stop()
    # what the daemon's /doctor answers, through JSON as over the socket
    facts = json.loads(json.dumps({"pid": 1, "workers": workers.stats(), "loop_watch": watch.stats()}))
    findings = _check_threads(None, facts)
    (hung,) = [f for f in findings if "worker pool doctor-tools" in f.message]
    assert hung.status == "warn" and hung.area == "threads"
    assert "has 1 hung thread(s) its callers gave up on (1 since start, 0 calls refused)" in hung.message
    assert "_weather_lookup_that_hangs of plugin weather for " in hung.message
    assert "disable that plugin" in hung.fix
    (stall,) = [f for f in findings if f.area == "loop"]
    assert stall.status == "warn"
    assert "the event loop was blocked 1 time(s) (loop watch threshold 50 ms" in stall.message
    assert "_blocks_the_loop" in stall.message and "time.sleep(0.15)" in stall.message
    assert "move that call off the event loop" in stall.fix
    pool.shutdown()


def test_a_quiet_daemon_is_ok_and_a_missing_watch_says_how_to_turn_it_on() -> None:
    widths = (("tools", 16), ("stage-sync", 8), ("stage-sync", 8))  # two stage runners
    pools = [{"name": n, "workers": w, "abandoned": 0} for n, w in widths]
    findings = _check_threads(None, {"workers": pools, "loop_watch": None})
    assert [(f.area, f.status) for f in findings] == [("threads", "ok"), ("loop", "ok")]
    assert findings[0].message == "running daemon: no hung worker threads (stage-sync 8, tools 16)"
    assert "HOMEAGENT_DEBUG=1" in findings[1].fix
    assert _check_threads(None, None) == []
