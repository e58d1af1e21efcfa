"""The event loop: takes inputs from the scheduler and runs one turn at a time.

Inputs arrive through :class:`KernelIO` (what ``sdk.io`` is for plugins: ``inject_text``,
``inject_media``, ``inject_interrupt``, ``inject_input_sync``) and through the internal
self-input queue (consolidation jobs, pseudo output channel ``_consolidation_``), which runs
only when no user input waits. An exception inside a turn is logged with its traceback, given
to whoever waits for that reply, and the loop goes on. :meth:`EventLoop.aclose` cancels the
turn in flight and fails every waiting input with a clear error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from homeagent_core.agent.scheduler import InputItem, Scheduler
from homeagent_sdk.errors import AgentClosed
from homeagent_sdk.types import InjectOptions, MediaAttachment, Priority

__all__ = ["AgentClosed", "EventLoop", "InputHost", "KernelIO"]

log = logging.getLogger(__name__)


class EventLoop:
    """Runs ``run_item`` for each input the scheduler hands out, one at a time."""

    def __init__(self, scheduler: Scheduler, run_item: Callable[[InputItem], Coroutine[Any, Any, None]]) -> None:
        self.scheduler = scheduler
        self._run_item = run_item
        self._task: asyncio.Task[None] | None = None
        self._current: asyncio.Task[None] | None = None
        self.closing = False
        self.turns = 0
        self.failures = 0

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self.running:
            return
        self.closing = False
        self._task = asyncio.get_running_loop().create_task(self._main(), name="homeagent-event-loop")

    async def _main(self) -> None:
        while not self.closing:
            item = await self.scheduler.next()
            self._current = asyncio.get_running_loop().create_task(self._run_item(item))
            try:
                await asyncio.wait((self._current,))
            except asyncio.CancelledError:
                self._current.cancel()
                item.settle(AgentClosed("the agent shut down while this input was being answered"))
                raise
            turn = self._current
            self._current = None
            self.turns += 1
            if turn.cancelled():
                item.settle(AgentClosed("the turn was cancelled"))
                continue
            exc = turn.exception()
            if exc is not None:
                self.failures += 1
                log.error("turn for input from %s on %s failed", item.source, item.channel, exc_info=exc)
                item.settle(exc)

    async def aclose(self, timeout: float = 5.0) -> None:
        """Stop: cancel the turn in flight, fail waiting inputs, end the loop task."""
        self.closing = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.wait((task,))
                    current = self._current
                    if current is not None and not current.done():
                        await asyncio.wait((current,))  # let the cancelled turn clean up
            except TimeoutError:
                log.error("event loop did not stop within %g s", timeout)
        for item in self.scheduler.drain():
            item.settle(AgentClosed("the agent shut down before this input was answered"))


class InputHost(Protocol):
    """Where inputs go: what :class:`KernelIO` (and a resident reporting back) needs of the kernel."""

    def make_item(
        self,
        text: str,
        channel: str,
        *,
        source: str,
        level: int = 0,
        options: InjectOptions | None = None,
        attachments: list[MediaAttachment] | None = None,
        reply: bool = False,
        sink: asyncio.Queue[Any] | None = None,
    ) -> InputItem:
        """An input with its channel's memory policy applied."""
        ...

    def submit(self, item: InputItem) -> InputItem:
        """Hand an input to the scheduler (raises ``InputQueueFull`` on backpressure)."""
        ...


class KernelIO:
    """The ``IOAPI`` given to one source (a plugin, the library API, the kernel itself).

    :param kernel: the kernel that receives the inputs (anything with ``make_item`` and ``submit``).
    :param source: who injects (recorded with every input; message ids are de-duplicated per source).
    :param max_level: highest interrupt level this source may use (3 for out-of-process
        plugins, 4 for the kernel and built-ins); higher requests are clamped.
    :param shared_door: a plugin's door (its ``sdk.io``): its inputs may fill only the
        scheduler's ``door_share`` of the queue, so the owner's own doors keep room.
    """

    def __init__(self, kernel: InputHost, source: str, *, max_level: int = 4, shared_door: bool = False) -> None:
        self._kernel = kernel
        self.source = source
        self.max_level = max_level
        self.shared_door = shared_door

    def _level(self, options: InjectOptions | None, *, interrupt: bool) -> int:
        priority = options.priority if options is not None else None
        if priority is None:
            return Priority.L1.rank if interrupt else 0
        rank = Priority(priority).rank
        if rank > self.max_level:
            log.info("interrupt level L%d from %s clamped to L%d", rank, self.source, self.max_level)
        return min(rank, self.max_level)

    def _item(
        self,
        text: str,
        channel: str,
        options: InjectOptions | None,
        *,
        interrupt: bool = False,
        attachments: list[MediaAttachment] | None = None,
        reply: bool = False,
    ) -> InputItem:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not channel or not isinstance(channel, str):
            raise ValueError("channel must name the input channel, e.g. 'webui' or 'cli'")
        item = self._kernel.make_item(
            text,
            channel,
            source=self.source,
            level=self._level(options, interrupt=interrupt),
            options=options,
            attachments=attachments,
            reply=reply,
        )
        item.shared_door = self.shared_door
        return item

    async def inject_text(self, text: str, channel: str, options: InjectOptions | None = None) -> None:
        """Queue a text input (an interrupt when ``options.priority`` is set).

        Raises:
            InputQueueFull: the ready queue is full.
        """
        self._kernel.submit(self._item(text, channel, options))

    async def inject_media(
        self,
        text: str,
        attachments: list[MediaAttachment],
        channel: str,
        options: InjectOptions | None = None,
    ) -> None:
        """Queue an input with media attachments.

        Raises:
            InputQueueFull: the ready queue is full.
        """
        self._kernel.submit(self._item(text, channel, options, attachments=list(attachments)))

    async def inject_interrupt(self, text: str, channel: str, options: InjectOptions | None = None) -> None:
        """Inject an interrupt (level from ``options.priority``, default L1).

        Raises:
            InputQueueFull: it could not preempt and the ready queue is full.
        """
        self._kernel.submit(self._item(text, channel, options, interrupt=True))

    async def inject_input_sync(
        self, text: str, channel: str, options: InjectOptions | None = None, *, timeout: float | None = 300
    ) -> str:
        """Inject an input and wait for its reply (a :class:`~homeagent_core.agent.reply.Reply`).

        ``timeout`` None waits as long as it takes.

        Raises:
            InputQueueFull: the ready queue is full.
            TimeoutError: no reply within ``timeout`` seconds (the input still runs).
            AgentClosed: the agent shut down first.
        """
        item = self._kernel.submit(self._item(text, channel, options, reply=True))
        assert item.reply is not None
        try:
            async with asyncio.timeout(timeout):
                result: Any = await asyncio.shield(item.reply)
        except TimeoutError:
            raise TimeoutError(
                f"no reply within {timeout} s to the input from {self.source!r} on {channel!r}; "
                "it is still queued or running"
            ) from None
        return result  # type: ignore[no-any-return]
