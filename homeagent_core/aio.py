"""The one async policy: hooks, tools and channels may be sync or ``async def``.

* :func:`await_me_maybe` is how the host consumes a hook result (call if callable, await if
  awaitable) — modelled on datasette's helper.
* :func:`call_maybe_async` runs a user callable: ``async def`` ones are awaited on the loop,
  plain ones run in a worker thread so a blocking plugin cannot stall the loop.
  :func:`call_in_pool` does the same with a named, bounded pool of its own
  (:mod:`homeagent_core.workers`), for uses that must not starve one another.
* :func:`run_sync` is the body of every ``*_sync`` twin: it refuses to run inside a running
  event loop, with a message telling the caller to ``await`` instead.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from homeagent_core.workers import pool
from homeagent_sdk.errors import SyncInAsyncError

__all__ = [
    "await_me_maybe",
    "call_in_pool",
    "call_maybe_async",
    "is_async_callable",
    "refuse_running_loop",
    "run_sync",
]

T = TypeVar("T")


def is_async_callable(fn: Any) -> bool:
    """True for ``async def`` functions, also behind ``functools.partial`` or ``__call__``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - objects with an async __call__
    return call is not None and not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


async def await_me_maybe(value: Any) -> Any:
    """Resolve a hook result: call it if it is callable, await it if it is awaitable."""
    if callable(value):
        value = value()
    if inspect.isawaitable(value):
        value = await value
    return value


async def call_maybe_async(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``: await it when async, otherwise run it in a worker thread."""
    if is_async_callable(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(functools.partial(fn, *args, **kwargs))
    if inspect.isawaitable(result):
        result = await result
    return result


async def call_in_pool(use: str, owner: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``: await it when async, otherwise run it in the shared pool ``use`` for ``owner``.

    Raises:
        PoolRefused: ``owner`` has too many hung calls in that pool (see
            :class:`~homeagent_core.workers.WorkerPool`).
    """
    if is_async_callable(fn):
        return await fn(*args, **kwargs)
    result = await pool(use).run(functools.partial(fn, *args, **kwargs), owner=owner)
    if inspect.isawaitable(result):
        result = await result
    return result


def refuse_running_loop(coro: Awaitable[Any], what: str) -> None:
    """Raise :class:`SyncInAsyncError` (closing ``coro``) when this thread runs an event loop.

    ``what`` is the async twin to suggest, e.g. ``"agent.ask"``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    if inspect.iscoroutine(coro):
        coro.close()
    name = what.rsplit(".", 1)[-1]
    raise SyncInAsyncError(
        f"{name}_sync() cannot run inside a running event loop (Jupyter, async code): use `await {what}(...)` instead"
    )


def run_sync(coro: Coroutine[Any, Any, T] | Awaitable[T], what: str) -> T:
    """Run ``coro`` to completion from synchronous code.

    Raises:
        SyncInAsyncError: an event loop is already running in this thread (a notebook, an
            ``async def``); the message says to ``await`` the async twin instead.
    """
    refuse_running_loop(coro, what)

    async def _main() -> T:
        return await coro

    return asyncio.run(_main())
