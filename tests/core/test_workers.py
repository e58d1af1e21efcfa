"""WorkerPool: bounded, named pools whose hung calls are counted, replaced and reported."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Iterator

import pytest

from homeagent_core import workers
from homeagent_core.workers import PoolRefused, WorkerPool

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="")


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


async def wait_for_stats(pool: WorkerPool, key: str, value: int) -> None:
    async with asyncio.timeout(10):
        while pool.stats()[key] != value:
            await asyncio.sleep(0.01)


async def test_a_call_runs_in_a_named_thread_with_the_callers_context_and_raises_through() -> None:
    pool = WorkerPool("unit", 2)
    VAR.set("caller")

    def where() -> tuple[str, str]:
        return threading.current_thread().name, VAR.get()

    def boom() -> None:
        raise ValueError("bad value")

    name, seen = await pool.run(where)
    assert name.startswith("unit-") and seen == "caller"
    with pytest.raises(ValueError, match="bad value"):
        await pool.run(boom)
    pool.shutdown()


async def test_an_abandoned_thread_is_replaced_counted_and_reported_until_it_returns(
    release: threading.Event,
) -> None:
    pool = WorkerPool("unit-abandon", 1)
    started = threading.Event()

    def hang() -> None:
        started.set()
        release.wait(30)

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await pool.run(hang, owner="slow")
    assert started.is_set()
    stats = pool.stats()
    assert stats["abandoned"] == 1 and stats["abandoned_total"] == 1
    assert stats["stuck"][0]["owner"] == "slow" and stats["stuck"][0]["call"].endswith("hang")
    # The single-width pool still runs the next call: the hung thread was replaced.
    assert await pool.run(lambda: 42) == 42
    release.set()
    await wait_for_stats(pool, "abandoned", 0)
    assert pool.stats()["abandoned_total"] == 1
    pool.shutdown()


async def test_an_owner_with_too_many_hung_calls_is_refused_while_others_run(release: threading.Event) -> None:
    pool = WorkerPool("unit-owner", 4, owner_limit=1)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await pool.run(release.wait, 30, owner="bad")
    with pytest.raises(PoolRefused, match="plugin bad: not called, 1 of its earlier calls are still running"):
        await pool.run(release.wait, 30, owner="bad")
    assert await pool.run(lambda: "fine", owner="good") == "fine"
    assert pool.stats()["refused_total"] == 1
    assert any(s["name"] == "unit-owner" for s in workers.stats())
    pool.shutdown()


async def test_past_max_abandoned_the_pool_shrinks_instead_of_growing(release: threading.Event) -> None:
    pool = WorkerPool("unit-max", 1, max_abandoned=0)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await pool.run(release.wait, 30)
    queued = asyncio.ensure_future(pool.run(lambda: "ran"))
    await wait_for_stats(pool, "queued", 1)
    assert not queued.done()
    release.set()  # the hung call returns, its thread rejoins and runs the queued one
    assert await asyncio.wait_for(queued, 10) == "ran"
    pool.shutdown()


async def test_a_call_cancelled_before_it_started_never_runs(release: threading.Event) -> None:
    pool = WorkerPool("unit-queue", 1)
    ran: list[str] = []
    first = asyncio.ensure_future(pool.run(release.wait, 30))
    await wait_for_stats(pool, "running", 1)
    second = asyncio.ensure_future(pool.run(ran.append, "second"))
    await wait_for_stats(pool, "queued", 1)
    second.cancel()
    await asyncio.gather(second, return_exceptions=True)
    assert pool.stats()["queued"] == 0 and pool.stats()["abandoned"] == 0
    release.set()
    await first
    await pool.run(ran.append, "third")
    assert ran == ["third"]
    pool.shutdown()


async def test_drain_waits_for_a_call_its_caller_gave_up_on(release: threading.Event) -> None:
    pool = WorkerPool("unit-drain", 2)
    done = threading.Event()

    def write() -> None:
        release.wait(30)
        done.set()

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await pool.run(write)
    assert not await pool.drain(0.05)  # still running: not quiet yet
    release.set()
    assert await pool.drain(10) and done.is_set()
    pool.shutdown()
