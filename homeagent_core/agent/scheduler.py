"""Input scheduling: which input runs next, and when an interrupt preempts a running turn.

Two classes of input. *Queued* inputs carry no level and run first-in first-out. *Interrupts*
carry a level L1-L4 (default L1; out-of-process plugins are clamped to L3 by the IO facade,
L4 is for the kernel and built-ins) and are picked before queued inputs, highest level first.

While a turn runs, an interrupt whose level is strictly higher than the turn's level (a queued
turn has level 0) preempts it: the turn's in-flight model call is cancelled and the interrupt
text is injected before its next model call. Preemption has a cooldown (2 s by default); an
interrupt that may not preempt waits in the ready queue and becomes its own turn.

Starvation: an older waiting input that is passed over by newer ones gains one level for
every ``promote_after`` (3) times it was passed over, at most two levels
(``level + min(passed_over // promote_after, 2)``, capped at L4), so a steady stream of
interrupts cannot starve queued inputs forever, while one burst does not reorder itself.

Stop: cancels the running turn's model call and short-circuits every input that was already
queued at that moment (a snapshot budget; repeated stops take the latest snapshot, so budgets
do not add up); inputs arriving later are unaffected.

De-duplication: only true duplicates are collapsed, the same door (source) re-sending one
message id (``InjectOptions.message_id``; a chat app delivering a message twice, a client
retrying a request). Such a re-send is not run again while the first is pending or within
``dedup_window`` seconds after it finished; its caller gets the earlier reply, marked
``skipped``. An input without a message id is never a duplicate: a person who sends "继续"
twice asks twice, and three changes of one resource are three inputs. The last
``DEDUP_REMEMBERED`` message ids are remembered.

The ready queue holds at most ``capacity`` (256) inputs; beyond that :meth:`submit` raises
:class:`~homeagent_sdk.errors.InputQueueFull` (backpressure is logged once when it starts and
once when it ends, never with a traceback). With ``door_share`` set (the kernel keeps a quarter
of the queue back), one plugin door (a source injecting through a plugin's ``sdk.io``, such as a
chat bridge; marked ``shared_door``) may hold at most that many waiting inputs: a busy group chat
fills its own share and is refused with the same error while the owner's own doors (web UI,
terminal, HTTP API) still find room. Its ``retry_after`` hint is the recent mean turn
duration (an exponential average), clamped to 1-60 s: about when a place frees up.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from homeagent_core.stream import END_OF_STREAM
from homeagent_sdk.errors import InputQueueFull
from homeagent_sdk.types import MediaAttachment

__all__ = ["END_OF_STREAM", "InputItem", "InputQueueFull", "RunningTurn", "Scheduler"]

log = logging.getLogger(__name__)

MAX_LEVEL = 4
#: Message ids remembered for de-duplication (the oldest are forgotten first).
DEDUP_REMEMBERED = 256
#: Retry hint before any turn finished, and its bounds (seconds).
DEFAULT_RETRY_AFTER, MIN_RETRY_AFTER, MAX_RETRY_AFTER = 5.0, 1.0, 60.0


@dataclass(eq=False)
class InputItem:
    """One input waiting for (or running) a turn.

    ``level`` 0 = queued input, 1-4 = interrupt. ``reply`` (when set) is resolved with the
    turn's :class:`~homeagent_core.agent.reply.Reply`; ``sink`` (when set) receives streamed
    content deltas. ``result`` holds the turn's reply (or the exception it ended with) once
    it finished. ``message_id`` is the door's id of the message ("" when it has none); a
    re-send of the same id by the same source is a duplicate. ``shared_door`` marks an input
    from a plugin's door, which may fill only the scheduler's ``door_share`` of the queue.
    """

    text: str
    channel: str
    source: str = ""
    level: int = 0
    attachments: list[MediaAttachment] = field(default_factory=list)
    no_memory: bool = False
    context_policy: str = ""
    recall_policy: str = ""
    cleaner: Callable[[str], str] | None = None
    self_input: bool = False
    message_id: str = ""
    shared_door: bool = False
    timestamp: float = field(default_factory=time.time)
    seq: int = 0
    passed_over: int = 0
    stopped: bool = False
    skipped: bool = False
    started_at: float | None = None
    reply: asyncio.Future[Any] | None = None
    sink: asyncio.Queue[Any] | None = None
    result: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def interrupt(self) -> bool:
        return self.level > 0

    def settle(self, outcome: Any) -> None:
        """The input is done: record ``outcome``, hand it to whoever waits, end its stream.

        ``outcome`` is the reply, or the exception the input ended with (the waiter gets it
        raised). A reply already settled is left as it is; the stream, if any, always ends.
        """
        self.result = outcome
        if self.reply is not None and not self.reply.done():
            if isinstance(outcome, BaseException):
                self.reply.set_exception(outcome)
            else:
                self.reply.set_result(outcome)
        if self.sink is not None:
            self.sink.put_nowait(END_OF_STREAM)

    def effective_level(self, promote_after: int = 3) -> int:
        """The level used for picking: base level plus starvation promotion."""
        return min(MAX_LEVEL, self.level + min(self.passed_over // max(1, promote_after), 2))


class RunningTurn(Protocol):
    """What the scheduler needs of the turn in progress."""

    level: int

    def accepts_interrupts(self, item: InputItem | None = None) -> bool:
        """Whether ``item`` (or any interrupt, when None) may be injected into the turn now."""
        ...

    def interrupt(self, item: InputItem) -> None: ...

    def stop(self) -> None: ...


class Scheduler:
    """Ready queue + self-input queue + preemption decisions.

    :param capacity: most inputs waiting at once (interrupt injections into a running turn
        and self-inputs do not count).
    :param cooldown: seconds after a preemption during which no other preemption happens.
    :param dedup_window: seconds after an input finished during which a re-send of its
        message id by the same source is still treated as a duplicate.
    :param promote_after: passes over an input that earn it one level of promotion.
    :param door_share: most inputs one plugin door (``shared_door`` inputs of one source) may
        have waiting (None: up to ``capacity``).
    :param clock: monotonic clock (injectable for tests).
    """

    def __init__(
        self,
        *,
        capacity: int = 256,
        cooldown: float = 2.0,
        dedup_window: float = 10.0,
        promote_after: int = 3,
        door_share: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        self.door_share = door_share
        self.promote_after = promote_after
        self.cooldown = cooldown
        self.dedup_window = dedup_window
        self._clock = clock
        self._ready: list[InputItem] = []
        self._self: collections.deque[InputItem] = collections.deque()
        self._wakeup = asyncio.Event()
        self._seq = itertools.count(1)
        self._last_seq = 0
        self._stop_mark = 0
        self._last_preempt = float("-inf")
        self._recent: collections.OrderedDict[tuple[str, str], tuple[InputItem, float | None]] = (
            collections.OrderedDict()
        )
        self._backpressure = False
        self._turn_seconds: float | None = None
        self.rejected = 0
        self.running: RunningTurn | None = None

    # ------------------------------------------------------------------ state

    def __len__(self) -> int:
        return len(self._ready)

    @property
    def pending_self(self) -> int:
        return len(self._self)

    def waiting(self) -> list[InputItem]:
        """The ready queue, oldest first (a copy)."""
        return list(self._ready)

    # ------------------------------------------------------------------ submit

    def submit(self, item: InputItem, *, restored: bool = False) -> InputItem:
        """Accept an input; returns it (marked ``skipped`` when it was a duplicate).

        ``restored=True`` is for inputs accepted before a restart and reloaded from disk: they
        are queued even beyond ``capacity`` (they were acknowledged; new inputs are refused
        until the queue has drained below it).

        Raises:
            InputQueueFull: the ready queue already holds ``capacity`` inputs.
        """
        if self._dedup(item):
            return item
        running = self.running
        if item.level > 0 and running is not None and running.accepts_interrupts(item):
            now = self._clock()
            if item.level > running.level and now - self._last_preempt >= self.cooldown:
                self._last_preempt = now
                item.seq = self._next_seq()
                self._remember(item)
                running.interrupt(item)
                return item
        if len(self._ready) >= self.capacity and not restored:
            self.rejected += 1
            if not self._backpressure:
                self._backpressure = True
                log.warning("input queue full (%d waiting): rejecting new inputs until it drains", self.capacity)
            retry = self.retry_after()
            raise InputQueueFull(
                f"{InputQueueFull.PREFIX} ({self.capacity} inputs waiting); the input from {item.source!r} "
                f"on channel {item.channel!r} was not accepted, retry in about {math.ceil(retry)} s",
                retry_after=retry,
            )
        share = self.door_share
        if share is not None and item.shared_door and not restored and len(self._ready) >= share:
            mine = sum(1 for waiting in self._ready if waiting.shared_door and waiting.source == item.source)
            if mine >= share:
                self.rejected += 1
                retry = self.retry_after()
                raise InputQueueFull(
                    f"{InputQueueFull.PREFIX} for {item.source!r}: it has {mine} inputs waiting, the most one "
                    f"door may have (the rest of the queue is kept for the other doors); the input on channel "
                    f"{item.channel!r} was not accepted, retry in about {math.ceil(retry)} s",
                    retry_after=retry,
                )
        item.seq = self._next_seq()
        self._remember(item)
        self._ready.append(item)
        self._wakeup.set()
        return item

    def submit_self(self, item: InputItem) -> InputItem:
        """Queue an internal self-input (consolidation); runs when no user input waits."""
        item.self_input = True
        item.seq = self._next_seq()
        self._self.append(item)
        self._wakeup.set()
        return item

    def _next_seq(self) -> int:
        self._last_seq = next(self._seq)
        return self._last_seq

    def _remember(self, item: InputItem) -> None:
        if not item.message_id:
            return
        self._recent[(item.source, item.message_id)] = (item, None)
        self._recent.move_to_end((item.source, item.message_id))
        while len(self._recent) > DEDUP_REMEMBERED:
            self._recent.popitem(last=False)

    def retry_after(self) -> float:
        """Seconds after which a rejected input may find room: about one turn's duration."""
        if self._turn_seconds is None:
            return DEFAULT_RETRY_AFTER
        return min(MAX_RETRY_AFTER, max(MIN_RETRY_AFTER, self._turn_seconds))

    def finished(self, item: InputItem) -> None:
        """Note that ``item``'s turn ended (starts its de-duplication window)."""
        if item.started_at is not None:
            took = max(0.0, self._clock() - item.started_at)
            item.started_at = None
            self._turn_seconds = took if self._turn_seconds is None else 0.8 * self._turn_seconds + 0.2 * took
        key = (item.source, item.message_id)
        last = self._recent.get(key) if item.message_id else None
        if last is not None and last[0] is item:
            self._recent[key] = (item, self._clock())

    def _dedup(self, item: InputItem) -> bool:
        if not item.message_id:
            return False
        last = self._recent.get((item.source, item.message_id))
        if last is None:
            return False
        previous, finished_at = last
        if previous.channel != item.channel or previous.stopped:
            return False
        if isinstance(previous.result, BaseException) or (
            finished_at is not None and (previous.result is None or self._clock() - finished_at > self.dedup_window)
        ):
            return False
        item.skipped = True
        item.seq = previous.seq
        log.info("message %s from %s on %s was sent again; answered once", item.message_id, item.source, item.channel)
        if item.reply is not None:
            _chain_reply(previous, item)
        if item.sink is not None:
            item.sink.put_nowait(END_OF_STREAM)
        return True

    # ------------------------------------------------------------------ pick

    async def next(self) -> InputItem:
        """Wait for and remove the next input to run."""
        while True:
            item = self.pop()
            if item is not None:
                return item
            self._wakeup.clear()
            await self._wakeup.wait()

    def pop(self) -> InputItem | None:
        """Remove and return the next input, or None when nothing waits."""
        ready = self._ready
        if ready:
            best_index = 0
            best = ready[0]
            promote = self.promote_after
            best_level = best.effective_level(promote)
            for index in range(1, len(ready)):
                candidate = ready[index]
                level = candidate.effective_level(promote)
                if level > best_level:
                    best_index, best, best_level = index, candidate, level
            for index in range(best_index):
                ready[index].passed_over += 1
            del ready[best_index]
            best.started_at = self._clock()
            if best.seq <= self._stop_mark:
                best.stopped = True
            if self._backpressure and len(ready) < self.capacity:
                self._backpressure = False
                log.warning("input queue has room again (%d rejected while full)", self.rejected)
            return best
        if self._self:
            return self._self.popleft()
        return None

    # ------------------------------------------------------------------ stop

    def stop(self) -> int:
        """Stop the running turn and short-circuit everything queued now; returns how many."""
        if self.running is not None:
            self.running.stop()
        self._stop_mark = max(self._stop_mark, self._last_seq)
        return sum(1 for item in self._ready if item.seq <= self._stop_mark)

    def remove(self, item: InputItem) -> bool:
        """Take ``item`` out of the ready queue (answered elsewhere); False when it is not waiting."""
        try:
            self._ready.remove(item)
        except ValueError:
            return False
        return True

    def drain(self) -> list[InputItem]:
        """Remove and return everything waiting (used at shutdown)."""
        items = [*self._ready, *self._self]
        self._ready.clear()
        self._self.clear()
        return items


def _chain_reply(previous: InputItem, item: InputItem) -> None:
    assert item.reply is not None
    target = item.reply

    def copy(source: asyncio.Future[Any]) -> None:
        if target.done():
            return
        if source.cancelled():
            target.cancel()
        elif source.exception() is not None:
            target.set_exception(source.exception())  # type: ignore[arg-type]
        else:
            value = source.result()
            mark = getattr(value, "as_skipped", None)
            target.set_result(mark() if callable(mark) else value)

    if previous.result is not None:
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if isinstance(previous.result, BaseException):
            done.set_exception(previous.result)
            done.exception()  # retrieved here; the duplicate's caller gets it through ``target``
        else:
            done.set_result(previous.result)
        copy(done)
        return
    if previous.reply is None:
        previous.reply = asyncio.get_running_loop().create_future()
    previous.reply.add_done_callback(copy)
