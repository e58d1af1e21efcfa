"""Runs one stage's handlers concurrently on one :class:`StageContext`.

Every plugin's impl of a stage runs at the same time on the same context, as in the original
kernel. Each ``async def`` impl runs in its own asyncio task, so inside a handler
``asyncio.current_task()`` is that handler's task: its own ``asyncio.timeout(...)``, a
``cancel()`` of itself or a stray ``CancelledError`` ends only that handler, never the turn.
On Python 3.12 and later the tasks start eagerly (``eager_start=True``, unless the loop has a
task factory of its own): a handler's first step runs at once, in its own task, and a handler
that never suspends is finished without a loop pass. On 3.11 tasks always start on the next
pass, and one pass runs every handler's first step. Plain impls run in the runner's
own bounded :class:`~homeagent_core.workers.WorkerPool` so a blocking one cannot stall the loop
(and if one returns an awaitable, it is awaited on the loop). Each handler is bounded by the
stage timeout: one that raises, is cancelled or hangs is recorded in ``ctx.errors`` (and
logged) and the others finish normally. A sync handler that hangs keeps its thread (Python
cannot stop it): the pool replaces that thread, and a plugin with two such threads still
running is refused (recorded in ``ctx.errors``) until one returns, so however many turns it
hangs, the other plugins' handlers always get a thread.

The handler list of each stage is cached and refreshed whenever that stage's hook
implementations change (a plugin registered, unregistered or blocked), so the hot path does not
rebuild it on every turn.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import sys
import time
import types
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from homeagent_core.aio import is_async_callable
from homeagent_core.workers import PoolRefused, WorkerPool
from homeagent_sdk.types import StageContext, ToolCall, ToolResult

if TYPE_CHECKING:
    from homeagent_core.events import EventBus
    from homeagent_core.hookhost import HookHandler, HookHost

__all__ = ["OWN_TOOLS", "StageRunner"]

log = logging.getLogger(__name__)

#: Scope value that limits a tool-stage handler to its own plugin's tools.
OWN_TOOLS = "own_tools"

_TOOL_STAGES = frozenset({"before_toolcall", "after_toolcall"})
_CTX_ONLY = ("ctx",)


class StageRunner:
    """Calls the handlers of a stage through the plugin host (:class:`~homeagent_core.hookhost.HookHost`).

    :param host: the plugin host (the only thing that knows the hook impls).
    :param timeout: seconds each handler may run before it is cancelled and recorded.
    :param bus: when given, a ``stage`` event is published after each stage that had handlers.
    :param sync_workers: threads for plain (sync) handlers running at once.
    :param hung_per_plugin: hung sync handlers a plugin may have running before its sync
        handlers are refused until one returns.
    """

    def __init__(
        self,
        host: HookHost,
        *,
        timeout: float = 30.0,
        bus: EventBus | None = None,
        sync_workers: int = 8,
        hung_per_plugin: int = 2,
    ) -> None:
        self.host = host
        self.timeout = timeout
        self.bus = bus
        self._pool = WorkerPool("stage-sync", sync_workers, owner_limit=hung_per_plugin)
        self._async: dict[Callable[..., Any], bool] = {}
        self._cache: dict[str, tuple[list[Any], list[HookHandler]]] = {}

    def handlers(self, stage: str) -> list[HookHandler]:
        """The handlers of ``stage`` (cached until the stage's hook implementations change)."""
        caller = getattr(self.host.pm.hook, stage, None)
        if caller is None:  # not a hook at all: the host says which stages there are
            return self.host.stage_handlers(stage)
        impls = caller.get_hookimpls()  # a copy of pluggy's list: registering changes it
        cached = self._cache.get(stage)
        if cached is None or cached[0] != impls:
            cached = self._cache[stage] = (impls, self.host.stage_handlers(stage))
        return cached[1]

    def close(self) -> None:
        """Release the worker threads (a hung sync handler is abandoned, not joined)."""
        self._pool.shutdown()

    def _is_async(self, fn: Callable[..., Any]) -> bool:
        known = self._async.get(fn)
        if known is None:
            known = self._async[fn] = is_async_callable(fn)
        return known

    async def _run_sync(self, handler: HookHandler, kwargs: dict[str, Any]) -> Any:
        call = functools.partial(handler.function, *[kwargs[name] for name in handler.argnames])
        result = await self._pool.run(call, owner=handler.plugin_name)
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
        to ``ctx.errors``; this method itself raises only ``CancelledError`` (when the turn
        itself is cancelled, never because of a handler).
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
        loop = asyncio.get_running_loop()
        start, eager = _starter(loop)
        known = self._async
        names: list[str] = []
        tasks: list[asyncio.Task[Any] | None] = []
        for handler in handlers:
            if tool_stage and handler.scope == OWN_TOOLS and (call is None or call.plugin != handler.plugin_name):
                continue
            names.append(handler.plugin_name)
            fn = handler.function
            is_async = known.get(fn)
            if is_async is None:
                is_async = self._is_async(fn)
            if not is_async:
                tasks.append(start(self._run_sync(handler, kwargs)))
                continue
            try:
                made = fn(ctx) if handler.argnames == _CTX_ONLY else handler(**kwargs)
            except Exception as exc:  # e.g. an async __call__ that raised before returning
                self._record(stage, ctx, handler.plugin_name, exc)
                tasks.append(None)
                continue
            coro = made if type(made) is types.CoroutineType or inspect.iscoroutine(made) else _resolved(made)
            tasks.append(start(coro))
        if not names:
            return []
        outcomes = await self._settle(stage, ctx, names, tasks, eager=eager)
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

    async def _settle(
        self,
        stage: str,
        ctx: StageContext,
        names: list[str],
        tasks: list[asyncio.Task[Any] | None],
        *,
        eager: bool = False,
    ) -> list[Any]:
        """Wait for the handler tasks (bounded by the stage timeout); their values or ``_FAILED``.

        One waiter future and one timer for the whole stage: every handler started at the same
        moment, so the shared deadline is each handler's own timeout.
        """
        live = [t for t in tasks if t is not None]
        late: set[asyncio.Task[Any]] = set()
        # One loop pass runs every new task's first step (eager tasks ran it already); handlers
        # that never suspend are done after it, so the common case needs no waiter future and
        # no done callbacks.
        if not eager:
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                for task in live:
                    task.cancel()
                raise
        pending = [t for t in live if not t.done()]
        if pending:
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()
            left = len(pending)

            def one_done(_task: asyncio.Task[Any]) -> None:
                nonlocal left
                left -= 1
                if left == 0 and not waiter.done():
                    waiter.set_result(None)

            for task in pending:
                task.add_done_callback(one_done)
            timer = loop.call_later(self.timeout, _wake, waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                for task in live:
                    task.cancel()
                raise
            finally:
                timer.cancel()
                for task in pending:
                    task.remove_done_callback(one_done)
            late = {t for t in live if not t.done()}
            if late:
                for task in late:
                    task.cancel()
                # Let the cancelled handlers run their cleanup (bounded: one may ignore the cancel).
                await asyncio.wait(late, timeout=1.0)
                for task in late:
                    if not task.done():  # ignored the cancel: abandoned, its outcome discarded
                        task.add_done_callback(_discard)
        out: list[Any] = []
        for plugin, outcome in zip(names, tasks, strict=True):
            if outcome is None:
                out.append(_FAILED)
            elif late and outcome in late:
                self._record_timeout(stage, ctx, plugin)
                out.append(_FAILED)
            else:
                try:
                    out.append(outcome.result())
                except asyncio.CancelledError:  # cancelled from inside (its own doing), not by the turn
                    self._record(stage, ctx, plugin, asyncio.CancelledError("the handler's task was cancelled"))
                    out.append(_FAILED)
                except BaseException as error:  # what the handler raised, re-raised by result()
                    self._record(stage, ctx, plugin, error)
                    out.append(_FAILED)
        return out

    def _record(self, stage: str, ctx: StageContext, plugin: str, exc: BaseException) -> None:
        ctx.errors.append(f"{stage}: plugin {plugin}: {type(exc).__name__}: {exc}")
        if isinstance(exc, PoolRefused):  # the pool said why; no traceback on every turn
            log.warning("stage %s: %s", stage, exc)
            return
        log.error("stage %s: handler of plugin %s raised", stage, plugin, exc_info=exc)

    def _record_timeout(self, stage: str, ctx: StageContext, plugin: str) -> None:
        message = f"{stage}: plugin {plugin}: did not finish within {self.timeout:g} s and was cancelled"
        ctx.errors.append(message)
        log.error(message)


class _Failed:
    """Marker for a handler that raised or timed out."""


_FAILED = _Failed()


def _starter(
    loop: asyncio.AbstractEventLoop,
) -> tuple[Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]], bool]:
    """How a handler's task is made (eagerly where asyncio can, else ``loop.create_task``), and
    whether it starts eagerly."""
    if sys.version_info >= (3, 12) and loop.get_task_factory() is None:
        return functools.partial(asyncio.Task, loop=loop, eager_start=True), True
    return loop.create_task, False


def _discard(task: asyncio.Task[Any]) -> None:
    """Retrieve an abandoned handler's outcome so asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _wake(waiter: asyncio.Future[None]) -> None:
    """The stage deadline: stop waiting for the handlers that are still running."""
    if not waiter.done():
        waiter.set_result(None)


async def _resolved(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
