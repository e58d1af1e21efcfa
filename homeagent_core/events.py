"""The event bus: the kernel publishes what happens, plugins and the web UI subscribe.

Publishing never blocks and never fails because of a subscriber: each subscriber has its own
bounded queue drained by its own task, so a slow subscriber only delays (and, when its queue
is full, drops) its own deliveries, and an exception in one is logged and forgotten.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from homeagent_sdk.types import Event

__all__ = ["EventBus", "Subscription"]

log = logging.getLogger(__name__)

Callback = Callable[[Event], Awaitable[None] | None]


@dataclass(eq=False)
class Subscription:
    """One subscriber: a callback, the names it wants (empty = all) and its queue."""

    callback: Callback
    names: frozenset[str]
    maxsize: int = 1000
    queue: asyncio.Queue[Event] | None = None
    task: asyncio.Task[None] | None = None
    dropped: int = 0
    label: str = ""
    _closed: bool = field(default=False, repr=False)

    def wants(self, name: str) -> bool:
        return not self.names or name in self.names


class EventBus:
    """Publish/subscribe with one delivery task per subscriber."""

    def __init__(self) -> None:
        self._subs: list[Subscription] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def subscribe(
        self, callback: Callback, *names: str, maxsize: int = 1000, label: str = ""
    ) -> Callable[[], None]:
        """Deliver events named ``names`` (all when empty) to ``callback``.

        ``callback`` may be sync or ``async``. Returns a function that unsubscribes.
        """
        sub = Subscription(callback, frozenset(names), maxsize=maxsize, label=label)
        self._subs.append(sub)
        return lambda: self._remove(sub)

    def _remove(self, sub: Subscription) -> None:
        sub._closed = True
        if sub in self._subs:
            self._subs.remove(sub)
        if sub.task is not None and not sub.task.done():
            sub.task.cancel()

    def publish(self, name: str, data: dict[str, object] | None = None, *, source: str = "") -> Event:
        """Publish an event; returns it. Safe to call from any thread."""
        event = Event(name=name, data=dict(data or {}), timestamp=time.time(), source=source)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._dispatch, event)
            else:
                self._dispatch_sync(event)
            return event
        self._loop = loop
        self._dispatch(event)
        return event

    def _dispatch(self, event: Event) -> None:
        for sub in list(self._subs):
            if not sub.wants(event.name):
                continue
            if sub.queue is None:
                sub.queue = asyncio.Queue(maxsize=sub.maxsize)
                sub.task = asyncio.get_running_loop().create_task(
                    self._drain(sub), name=f"event-subscriber-{sub.label or id(sub)}"
                )
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                sub.dropped += 1
                if sub.dropped == 1 or sub.dropped % 1000 == 0:
                    log.warning(
                        "event subscriber %s is too slow: %d events dropped",
                        sub.label or sub.callback,
                        sub.dropped,
                    )

    def _dispatch_sync(self, event: Event) -> None:
        """Without a running loop (scripts, tests): call sync subscribers directly."""
        for sub in list(self._subs):
            if sub.wants(event.name):
                try:
                    result = sub.callback(event)
                    if inspect.isawaitable(result):
                        asyncio.run(_await(result))
                except Exception:
                    log.exception("event subscriber %s failed on %s", sub.label, event.name)

    async def _drain(self, sub: Subscription) -> None:
        assert sub.queue is not None
        while not sub._closed:
            event = await sub.queue.get()
            try:
                result = sub.callback(event)
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("event subscriber %s failed on %s", sub.label or sub.callback, event.name)
            finally:
                sub.queue.task_done()

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait until every subscriber has handled what was published so far."""
        async with asyncio.timeout(timeout):
            for sub in list(self._subs):
                if sub.queue is not None:
                    await sub.queue.join()

    async def aclose(self) -> None:
        """Stop every delivery task."""
        for sub in list(self._subs):
            self._remove(sub)
            if sub.task is not None:
                try:
                    await sub.task
                except (asyncio.CancelledError, Exception):
                    log.debug("subscriber task ended", exc_info=True)
        self._subs.clear()

    def __len__(self) -> int:
        return len(self._subs)


async def _await(awaitable: Awaitable[None]) -> None:
    await awaitable
