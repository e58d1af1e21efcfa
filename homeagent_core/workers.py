"""Named, bounded worker pools for blocking work: one pool per use, so no use starves another.

Each use of threads has its own :class:`WorkerPool`: sync stage handlers (one pool per
:class:`~homeagent_core.agent.stages.StageRunner`), sync tools (``tools``) and blocking store
calls (``memory``). A pool runs at most ``workers`` calls at once; the rest queue.

A call whose caller gave up while it runs (a stage or tool timeout, a cancelled turn) cannot be
stopped: Python cannot kill a thread. Its thread is *abandoned*: counted, logged with the
function and its owner, and replaced by a fresh thread so the pool keeps its full width for
everyone else. When an abandoned call returns at last, its thread is logged again and retires
(or rejoins the pool when there is room). Two limits keep this bounded:

* ``owner_limit``: an owner (a plugin) with that many abandoned calls still running is not
  given another thread until one returns; the call fails at once with a :class:`PoolRefused`
  (a :class:`~homeagent_sdk.errors.PluginError`) that says so. One plugin that hangs on every
  call therefore holds at most ``owner_limit`` threads, whatever the number of turns.
* ``max_abandoned``: past that many abandoned threads in all, no replacement is started; the
  pool then runs with fewer live threads until abandoned ones return.

Worker threads are daemon threads, so a hung call never blocks the process from exiting; a
user that must not be cut off at exit (store writes) waits for its pool with :meth:`WorkerPool.drain`
before it closes.
:func:`stats` reports every pool (``homeagent doctor`` shows it from the running daemon).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from homeagent_sdk.errors import PluginError

__all__ = ["PoolRefused", "WorkerPool", "pool", "run_blocking", "stats"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Width of the shared pools, by use (``documents``: queries of several callers at once, more
#: would only queue on the cores and the store lock).
POOL_WIDTHS = {"tools": 16, "memory": 4, "documents": 4}

_IDLE_SECONDS = 30.0


class PoolRefused(PluginError):
    """A plugin's call was not run: too many of its earlier calls still hang in the pool."""


class _Job:
    """One call: where its outcome goes and where it stands."""

    __slots__ = ("abandoned", "args", "context", "fn", "future", "loop", "owner", "started", "thread")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        owner: str,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
    ) -> None:
        self.fn = fn
        self.args = args
        self.owner = owner
        self.loop = loop
        self.future = future
        self.context = contextvars.copy_context()
        self.started: float | None = None
        self.thread: str = ""
        self.abandoned = False

    def describe(self) -> str:
        return _describe(self.fn)


def _describe(fn: Callable[..., Any]) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{name}" if module else str(name)


def _deliver(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    elif isinstance(value, StopIteration):  # a future cannot carry StopIteration
        error = RuntimeError(f"the call raised StopIteration: {value}")
        error.__cause__ = value
        future.set_exception(error)
    else:
        future.set_exception(value)


class WorkerPool:
    """At most ``workers`` blocking calls at once, each awaited from the event loop.

    :param name: shown in thread names, logs and :func:`stats`.
    :param workers: live threads (calls running at once).
    :param owner_limit: abandoned calls an owner may have running before its next call is
        refused (``None``: never refused).
    :param max_abandoned: abandoned threads that are replaced; past this the pool shrinks
        until they return (default: ``workers``).
    """

    def __init__(
        self,
        name: str,
        workers: int,
        *,
        owner_limit: int | None = None,
        max_abandoned: int | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"worker pool {name!r} needs at least one worker, got {workers}")
        self.name = name
        self.workers = workers
        self.owner_limit = owner_limit
        self.max_abandoned = workers if max_abandoned is None else max_abandoned
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._queue: deque[_Job] = deque()
        self._threads = 0  # live worker threads; abandoned ones are not counted
        self._idle = 0
        self._running: set[_Job] = set()
        self._abandoned: set[_Job] = set()
        self._abandoned_total = 0
        self._refused_total = 0
        self._closed = False
        self._serial = itertools.count(1)
        _POOLS.add(self)

    # ------------------------------------------------------------------ calling

    async def run(self, fn: Callable[..., T], /, *args: Any, owner: str = "") -> T:
        """Run ``fn(*args)`` in a worker thread (with the caller's context variables).

        When the awaiting task is cancelled before the call started, the call never runs;
        when it is already running, its thread is abandoned (see the module docstring).

        Raises:
            PoolRefused: ``owner`` has ``owner_limit`` abandoned calls still running.
            RuntimeError: the pool was shut down.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        job = _Job(fn, args, owner, loop, future)
        self._submit(job)
        try:
            return await future
        except asyncio.CancelledError:
            self._give_up(job)
            raise

    def _submit(self, job: _Job) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"worker pool {self.name!r} is shut down")
            if self.owner_limit is not None and job.owner:
                stuck = [j for j in self._abandoned if j.owner == job.owner]
                if len(stuck) >= self.owner_limit:
                    self._refused_total += 1
                    oldest = min(stuck, key=lambda j: j.started or 0.0)
                    age = time.monotonic() - (oldest.started or time.monotonic())
                    raise PoolRefused(
                        f"plugin {job.owner}: not called, {len(stuck)} of its earlier calls are still running "
                        f"in worker pool {self.name!r} after their callers gave up (the oldest, "
                        f"{oldest.describe()}, for {age:.0f} s); it gets no new thread until one returns. "
                        "Fix the blocking code, make it async, or disable the plugin",
                        plugin_name=job.owner,
                    )
            self._queue.append(job)
            if self._idle > len(self._queue) - 1:
                self._ready.notify()
            elif self._has_room():
                self._start_thread()

    def _has_room(self) -> bool:
        """Whether another live worker may start (the lock is held)."""
        unreplaced = max(0, len(self._abandoned) - self.max_abandoned)
        return self._threads + unreplaced < self.workers

    def _start_thread(self) -> None:
        """Start one live worker (the lock is held)."""
        self._threads += 1
        thread = threading.Thread(target=self._work, name=f"{self.name}-{next(self._serial)}", daemon=True)
        thread.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    if self._closed:
                        self._threads -= 1
                        return
                    self._idle += 1
                    woke = self._ready.wait(_IDLE_SECONDS)
                    self._idle -= 1
                    if not woke and not self._queue:
                        self._threads -= 1
                        return
                job = self._queue.popleft()
                job.started = time.monotonic()
                job.thread = threading.current_thread().name
                self._running.add(job)
            try:
                value, ok = job.context.run(job.fn, *job.args), True
            except BaseException as exc:  # delivered to the caller, whatever it is
                value, ok = exc, False
            with self._lock:
                self._running.discard(job)
                abandoned = job.abandoned
                if abandoned:
                    self._abandoned.discard(job)
            if not abandoned:
                # A closed loop raises RuntimeError: nobody waits for the outcome any more.
                with contextlib.suppress(RuntimeError):
                    job.loop.call_soon_threadsafe(_deliver, job.future, ok, value)
                continue
            assert job.started is not None
            log.warning(
                "worker pool %s: abandoned call %s%s returned after %.1f s (%s)",
                self.name,
                job.describe(),
                f" of {job.owner}" if job.owner else "",
                time.monotonic() - job.started,
                "raised " + type(value).__name__ if not ok else "its result is discarded",
            )
            with self._lock:
                if self._closed or not self._has_room():
                    return  # a replacement took this thread's place
                self._threads += 1

    def _give_up(self, job: _Job) -> None:
        """The caller stopped waiting: drop a queued call, abandon a running one."""
        with self._lock:
            if job.started is None:
                with contextlib.suppress(ValueError):
                    self._queue.remove(job)
                return
            if job not in self._running:
                return  # finished meanwhile
            job.abandoned = True
            self._running.discard(job)
            self._abandoned.add(job)
            self._abandoned_total += 1
            self._threads -= 1
            replaced = len(self._abandoned) <= self.max_abandoned
            if not self._closed and self._queue and self._idle < len(self._queue) and self._has_room():
                self._start_thread()
            count = sum(1 for j in self._abandoned if j.owner == job.owner)
        assert job.started is not None
        log.warning(
            "worker pool %s: abandoned thread %s running %s%s after %.1f s (its caller gave up; Python cannot "
            "stop a thread); %d abandoned in this pool%s%s",
            self.name,
            job.thread,
            job.describe(),
            f" of {job.owner}" if job.owner else "",
            time.monotonic() - job.started,
            len(self._abandoned),
            f", {count} of them {job.owner}'s" if job.owner else "",
            "" if replaced else f"; over {self.max_abandoned}, so it was not replaced",
        )

    async def drain(self, timeout: float) -> bool:
        """Wait until no call is queued, running or abandoned (at most ``timeout`` seconds).

        Returns whether the pool went quiet; callers that gave up are waited for too, since
        their calls still run.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if not (self._queue or self._running or self._abandoned):
                    return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)

    # ------------------------------------------------------------------ reporting

    def stats(self) -> dict[str, Any]:
        """``{name, workers, running, queued, abandoned, abandoned_total, refused_total, stuck}``.

        ``stuck`` lists the abandoned calls still running: function, owner, thread, seconds.
        """
        now = time.monotonic()
        with self._lock:
            stuck = [
                {
                    "call": j.describe(),
                    "owner": j.owner,
                    "thread": j.thread,
                    "seconds": round(now - (j.started or now), 1),
                }
                for j in sorted(self._abandoned, key=lambda j: j.started or 0.0)
            ]
            return {
                "name": self.name,
                "workers": self.workers,
                "running": len(self._running),
                "queued": len(self._queue),
                "abandoned": len(self._abandoned),
                "abandoned_total": self._abandoned_total,
                "refused_total": self._refused_total,
                "stuck": stuck,
            }

    def shutdown(self) -> None:
        """Refuse new calls, drop queued ones and let idle threads exit (running ones finish)."""
        with self._lock:
            self._closed = True
            dropped = list(self._queue)
            self._queue.clear()
            self._ready.notify_all()
        for job in dropped:
            with contextlib.suppress(RuntimeError):
                job.loop.call_soon_threadsafe(job.future.cancel)


_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()
_SHARED: dict[str, WorkerPool] = {}
_SHARED_LOCK = threading.Lock()


def pool(name: str) -> WorkerPool:
    """The process-wide pool for one use (``tools``, ``memory``), created on first use."""
    found = _SHARED.get(name)
    if found is not None:
        return found
    with _SHARED_LOCK:
        found = _SHARED.get(name)
        if found is None:
            if name not in POOL_WIDTHS:
                raise KeyError(f"no worker pool named {name!r}; the shared pools are {', '.join(POOL_WIDTHS)}")
            owner_limit = 2 if name == "tools" else None
            found = _SHARED[name] = WorkerPool(name, POOL_WIDTHS[name], owner_limit=owner_limit)
        return found


async def run_blocking(use: str, fn: Callable[..., T], /, *args: Any) -> T:
    """Run ``fn(*args)`` in the shared pool of ``use`` (e.g. ``"memory"`` for store calls)."""
    return await pool(use).run(fn, *args)


def stats() -> list[dict[str, Any]]:
    """:meth:`WorkerPool.stats` of every pool in this process, by name."""
    return sorted((p.stats() for p in list(_POOLS)), key=lambda s: str(s["name"]))
