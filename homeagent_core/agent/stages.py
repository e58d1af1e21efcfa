"""Runs one stage's handlers concurrently on one :class:`StageContext`.

Every plugin's impl of a stage runs at the same time on the same context, as in the original
kernel. ``async def`` impls are started eagerly (run up to their first real suspension right
away, like Python 3.12's eager tasks), so trivial handlers finish without a task; the ones
that suspend continue as tasks and are awaited together. Plain impls run in a small dedicated
thread pool so a blocking one cannot stall the loop (and if one returns an awaitable, it is
awaited on the loop). Each handler is bounded by the stage timeout: one that raises or hangs
is recorded in ``ctx.errors`` (and logged) and the others finish normally.

The handler list of each stage is cached and refreshed whenever the set of registered plugins
changes, so the hot path does not rebuild it on every turn.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from homeagent_core.aio import is_async_callable
from homeagent_sdk.types import StageContext, ToolCall, ToolResult

if TYPE_CHECKING:
    from homeagent_core.events import EventBus
    from homeagent_core.plugins.manager import HookHandler, PluginHost

__all__ = ["OWN_TOOLS", "StageRunner"]

log = logging.getLogger(__name__)

#: Scope value that limits a tool-stage handler to its own plugin's tools.
OWN_TOOLS = "own_tools"

_TOOL_STAGES = frozenset({"before_toolcall", "after_toolcall"})


class StageRunner:
    """Calls the handlers of a stage through the :class:`PluginHost`.

    :param host: the plugin host (the only thing that knows the hook impls).
    :param timeout: seconds each handler may run before it is cancelled and recorded.
    :param bus: when given, a ``stage`` event is published after each stage that had handlers.
    :param sync_workers: threads for plain (sync) handlers.
    """

    def __init__(
        self,
        host: PluginHost,
        *,
        timeout: float = 30.0,
        bus: EventBus | None = None,
        sync_workers: int = 8,
    ) -> None:
        self.host = host
        self.timeout = timeout
        self.bus = bus
        self._executor = ThreadPoolExecutor(max_workers=sync_workers, thread_name_prefix="stage-sync")
        self._async: dict[Callable[..., Any], bool] = {}
        self._plugins: set[object] = set()
        self._cache: dict[str, list[HookHandler]] = {}

    def handlers(self, stage: str) -> list[HookHandler]:
        """The handlers of ``stage`` (cached until a plugin is registered or unregistered)."""
        plugins = self.host.pm.get_plugins()
        if plugins != self._plugins:
            self._plugins = plugins
            self._cache.clear()
        cached = self._cache.get(stage)
        if cached is None:
            cached = self._cache[stage] = self.host.stage_handlers(stage)
        return cached

    def close(self) -> None:
        """Release the worker threads (a hung sync handler is abandoned, not joined)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _is_async(self, fn: Callable[..., Any]) -> bool:
        known = self._async.get(fn)
        if known is None:
            known = self._async[fn] = is_async_callable(fn)
        return known

    async def _run_sync(self, handler: HookHandler, kwargs: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._executor, functools.partial(handler, **kwargs))
        if inspect.isawaitable(result):
            result = await result
        return result

    async def run(
        self,
        stage: str,
        ctx: StageContext,
        *,
        call: ToolCall | None = None,
        result: ToolResult | None = None,
    ) -> list[str]:
        """Run every handler of ``stage``; returns the strings they returned, in handler order.

        For ``before_toolcall`` those strings are rejections. Errors and timeouts are appended
        to ``ctx.errors``; this method itself raises only ``CancelledError``.
        """
        handlers = self.handlers(stage)
        if not handlers:
            return []
        ctx.phase = stage
        kwargs: dict[str, Any] = {"ctx": ctx}
        tool_stage = stage in _TOOL_STAGES
        if tool_stage:
            kwargs["call"] = call
            if stage == "after_toolcall":
                kwargs["result"] = result
        started = time.perf_counter()
        names: list[str] = []
        outcomes: list[Any] = []
        waits: list[tuple[int, Coroutine[Any, Any, Any]]] = []
        for handler in handlers:
            if tool_stage and handler.scope == OWN_TOOLS and (call is None or call.plugin != handler.plugin_name):
                continue
            index = len(names)
            names.append(handler.plugin_name)
            if not self._is_async(handler.function):
                outcomes.append(_FAILED)
                waits.append((index, self._run_sync(handler, kwargs)))
                continue
            try:
                coro = handler(**kwargs)
                if not inspect.iscoroutine(coro):
                    outcomes.append(_FAILED)
                    waits.append((index, _resolved(coro)))
                    continue
                first = coro.send(None)  # eager start: trivial handlers end right here
            except StopIteration as done:
                outcomes.append(done.value)
                continue
            except Exception as exc:
                self._record(stage, ctx, handler.plugin_name, exc)
                outcomes.append(_FAILED)
                continue
            outcomes.append(_FAILED)
            waits.append((index, _drive(coro, first)))
        if not names:
            return []
        if waits:
            finished = await self._gather(stage, ctx, [names[i] for i, _ in waits], [c for _, c in waits])
            for (index, _), value in zip(waits, finished, strict=True):
                outcomes[index] = value
        returned: list[str] = []
        for plugin, value in zip(names, outcomes, strict=True):
            if value is None or value is _FAILED:
                continue
            if isinstance(value, str):
                if stage == "before_toolcall":
                    returned.append(value)
                continue
            message = (
                f"{stage}: plugin {plugin}: returned {type(value).__name__}; "
                "stage hooks return None (before_toolcall may return a rejection string)"
            )
            ctx.errors.append(message)
            log.warning(message)
        trace = getattr(self.host, "trace", None)
        if trace is not None:
            shown = ", ".join(
                f"{plugin}={'failed' if value is _FAILED else repr(value)}"
                for plugin, value in zip(names, outcomes, strict=True)
            )
            trace(f"[trace] {stage}({', '.join(kwargs)}) -> {shown}")
        if self.bus is not None and len(self.bus):
            self.bus.publish(
                "stage",
                {"stage": stage, "handlers": len(names), "ms": round((time.perf_counter() - started) * 1000, 3)},
            )
        return returned

    async def _gather(
        self, stage: str, ctx: StageContext, names: list[str], coros: list[Coroutine[Any, Any, Any]]
    ) -> list[Any]:
        if len(coros) == 1:
            try:
                async with asyncio.timeout(self.timeout):
                    return [await coros[0]]
            except TimeoutError:
                self._record_timeout(stage, ctx, names[0])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._record(stage, ctx, names[0], exc)
            return [_FAILED]
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(c) for c in coros]
        try:
            _, pending = await asyncio.wait(tasks, timeout=self.timeout)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        if pending:
            for task in pending:
                task.cancel()
            # Let the cancelled handlers run their cleanup (bounded: one may ignore the cancel).
            await asyncio.wait(pending, timeout=1.0)
        out: list[Any] = []
        for plugin, task in zip(names, tasks, strict=True):
            if task in pending:
                self._record_timeout(stage, ctx, plugin)
                out.append(_FAILED)
                continue
            error = task.exception()
            if error is not None:
                self._record(stage, ctx, plugin, error)
                out.append(_FAILED)
            else:
                out.append(task.result())
        return out

    def _record(self, stage: str, ctx: StageContext, plugin: str, exc: BaseException) -> None:
        ctx.errors.append(f"{stage}: plugin {plugin}: {type(exc).__name__}: {exc}")
        log.error("stage %s: handler of plugin %s raised", stage, plugin, exc_info=exc)

    def _record_timeout(self, stage: str, ctx: StageContext, plugin: str) -> None:
        message = f"{stage}: plugin {plugin}: did not finish within {self.timeout:g} s and was cancelled"
        ctx.errors.append(message)
        log.error(message)


class _Failed:
    """Marker for a handler that raised or timed out."""


_FAILED = _Failed()


async def _drive(coro: Coroutine[Any, Any, Any], suspended_on: Any) -> Any:
    """Finish a coroutine that was started by hand and suspended on ``suspended_on``.

    This is what a task does: wait for the future the coroutine yielded, then resume it
    (the coroutine reads the future's result or exception itself). Cancelling the task that
    runs this cancels the awaited future, so the coroutine sees ``CancelledError`` as usual.
    """
    fut = suspended_on
    while True:
        try:
            if fut is None:  # a bare yield (asyncio.sleep(0)): give the loop one turn
                await asyncio.sleep(0)
            else:
                # The coroutine's own ``await`` marked the future as blocking (a task resets
                # that flag before waiting); reset it so this await may wait on it again.
                fut._asyncio_future_blocking = False
                await fut
        except asyncio.CancelledError:
            if fut is None or not fut.cancelled():
                # Cancelled while the coroutine waits on something we could not cancel.
                try:
                    fut = coro.throw(asyncio.CancelledError())
                except StopIteration as done:
                    return done.value
                continue
        except BaseException:
            pass  # resumed below, the coroutine takes the future's result or exception itself
        try:
            fut = coro.send(None)
        except StopIteration as done:
            return done.value


async def _resolved(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
