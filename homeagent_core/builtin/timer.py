"""Built-in ``timer``: one-shot reminders the model sets for itself.

``timer_set(duration, message)`` schedules a timer (at most ``max_duration``, 24 h by default).
When it fires, ``timer: <message>`` is injected as an L3 interrupt, never stored in memory: on
the chat conversation the timer was set from (``qq:private:12345`` — a chat bridge's
conversation channel, so the reply goes back to that chat), otherwise on the input channel
``timer``. Timers are kept in ``<data>/plugin_data/timer/timers.db``
(SQLite, WAL), so they survive a restart; one whose time passed while the daemon was down
fires right after the next start. A timer's row is deleted only once the turn that handled
its interrupt has ended, so a daemon killed between firing and answering fires it again after
the next start (at least once, never lost; twice only when the daemon died during that turn).

Timers cannot crowd people out: each conversation may have ``max_pending`` pending timers and
all of them ``max_pending_total``; ``timer_list`` answers 20 at a time; and timers that come
due together enter the input queue one at a time, each after the one before was answered.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.builtin.fire_later import cancel_all, deliver, open_store, page
from homeagent_core.builtin.turn_origin import turn_asker, turn_conversation
from homeagent_core.durations import format_duration, parse_duration
from homeagent_sdk import (
    ChannelDef,
    ChannelRegistry,
    ConfigDef,
    SettingsRegistry,
    ToolError,
    ToolRegistryProtocol,
    hookimpl,
)
from homeagent_sdk._schema import StoreSchema, sql_step, table_columns

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "timer"
CHANNEL = "timer"

__all__ = ["TIMERS_SCHEMA", "TimerPlugin", "TimerStore", "make_plugin"]

log = logging.getLogger(__name__)

_MAX_MESSAGE = 2000


@dataclass(frozen=True)
class Timer:
    id: str
    fire_at: float
    message: str
    created_at: float
    channel: str = ""
    #: Who set it: the timer fires with that person's rights ("" = before people were recorded).
    person: str = ""

    def to_dict(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "message": self.message,
            "fires_at": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.fire_at)),
            "remaining": format_duration(max(0.0, round(self.fire_at - now))),
        }


def _timers_shape(conn: sqlite3.Connection) -> int:
    columns = table_columns(conn, "timers")
    return 0 if not columns else 3 if "person" in columns else 2 if "channel" in columns else 1


TIMERS_SCHEMA = StoreSchema(
    "timers.db",
    [
        sql_step(
            "CREATE TABLE IF NOT EXISTS timers (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "fire_at REAL NOT NULL, message TEXT NOT NULL, created_at REAL NOT NULL)"
        ),
        # 2: a timer set from a chat fires back into that chat
        sql_step("ALTER TABLE timers ADD COLUMN channel TEXT NOT NULL DEFAULT ''"),
        # 3: a timer fires with the rights of the person who set it
        sql_step("ALTER TABLE timers ADD COLUMN person TEXT NOT NULL DEFAULT ''"),
    ],
    legacy=_timers_shape,
)
"""The schema of ``timers.db``: one step per version (never edit a shipped one)."""


class TimerStore:
    """Pending timers in SQLite; the ids keep counting across restarts."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = open_store(path, TIMERS_SCHEMA)

    def add(self, fire_at: float, message: str, channel: str = "", person: str = "") -> Timer:
        now = time.time()
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO timers (fire_at, message, created_at, channel, person) VALUES (?, ?, ?, ?, ?)",
                (fire_at, message, now, channel, person),
            )
        return Timer(f"timer_{cur.lastrowid}", fire_at, message, now, channel, person)

    def count(self, channel: str | None = None) -> int:
        """Pending timers in all (``channel`` None) or set from one conversation."""
        with self._lock:
            if channel is None:
                row = self._db.execute("SELECT COUNT(*) FROM timers").fetchone()
            else:
                row = self._db.execute("SELECT COUNT(*) FROM timers WHERE channel = ?", (channel,)).fetchone()
        return int(row[0])

    def pending(self) -> list[Timer]:
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, fire_at, message, created_at, channel, person FROM timers ORDER BY fire_at"
            ).fetchall()
        return [Timer(f"timer_{row[0]}", *row[1:]) for row in rows]

    def remove(self, timer_id: str) -> bool:
        seq = _seq(timer_id)
        with self._lock:
            cur = self._db.execute("DELETE FROM timers WHERE seq = ?", (seq,))
        return cur.rowcount > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _seq(timer_id: str) -> int:
    text = timer_id.strip()
    number = text.removeprefix("timer_")
    if not number.isdigit():
        raise ToolError(f"invalid timer id {timer_id!r}; ids look like timer_3 (see timer_list)")
    return int(number)


class TimerPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self._store: TimerStore | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.fired: list[str] = []
        # one fired timer in the input queue at a time: a thousand due at once wait their turn
        # here, not in the queue, so people's own messages still get in
        self._firing = asyncio.Semaphore(1)

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(
            key="max_duration", type="duration", default="24h", min=1, max=366 * 86400,
            description="Longest timer the model may set.",
        ))
        registry.add(ConfigDef(
            key="max_pending", type="int", default=20, min=1, max=10_000,
            description="Most pending timers one conversation may have (the terminal, web UI and "
                        "each chat count separately); timer_set refuses more.",
        ))
        registry.add(ConfigDef(
            key="max_pending_total", type="int", default=200, min=1, max=100_000,
            description="Most pending timers in all.",
        ))

    @hookimpl
    def register_input_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChannelDef(
            name=CHANNEL, description="timers the agent set for itself firing", no_memory=True,
        ))

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.timer_set)
        registry.add(self.timer_list, parallel_safe=True)
        registry.add(self.timer_cancel)

    @hookimpl
    async def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk
        self._store = await asyncio.to_thread(TimerStore, sdk.data_dir / "timers.db")
        for timer in await asyncio.to_thread(self._store.pending):
            self._schedule(timer)

    @hookimpl
    async def shutdown(self) -> None:
        await cancel_all(self._tasks)
        if self._store is not None:
            store, self._store = self._store, None
            await asyncio.to_thread(store.close)

    # ------------------------------------------------------------------ firing

    @property
    def store(self) -> TimerStore:
        if self._store is None:
            raise ToolError("timer has not started yet")
        return self._store

    def _schedule(self, timer: Timer) -> None:
        self._tasks[timer.id] = asyncio.get_running_loop().create_task(self._wait_and_fire(timer), name=timer.id)

    async def _wait_and_fire(self, timer: Timer) -> None:
        try:
            delay = timer.fire_at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            async with self._firing:
                fired = await self._fire(timer)
            if fired:
                # after its turn ended: a crash before that fires it again
                await asyncio.to_thread(self.store.remove, timer.id)
                self.fired.append(timer.id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("timer %s could not fire; it stays pending and fires after the next start", timer.id)
        finally:
            self._tasks.pop(timer.id, None)

    async def _fire(self, timer: Timer) -> bool:
        """Inject the timer's interrupt and wait until the turn handling it ended; False if it must fire again."""
        assert self._sdk is not None
        return await deliver(
            self._sdk, log, f"timer {timer.id}", f"timer: {timer.message}", door=CHANNEL, channel=timer.channel,
            person=timer.person,
        )

    # ------------------------------------------------------------------ tools

    async def timer_set(self, duration: str, message: str) -> str:
        """Set a one-shot timer; when it fires you receive "timer: <message>" as an interrupt.

        Args:
            duration: how long from now, e.g. 90s, 5m, 1h30m (a bare number means seconds); at most 24h.
            message: what to remind yourself of.
        """
        if str(duration).strip().startswith("-"):
            raise ToolError(f"duration {duration!r} is negative; give a time from now such as 30s or 5m")
        try:
            seconds = parse_duration(str(duration))
        except ValueError as exc:
            raise ToolError(f"duration: {exc}") from None
        if seconds <= 0:
            raise ToolError("duration must be longer than zero, e.g. 30s or 5m")
        assert self._sdk is not None
        limit = float(self._sdk.settings.get("max_duration") or 86400)
        if seconds > limit:
            raise ToolError(
                f"duration {format_duration(seconds)} is longer than the maximum of {format_duration(limit)} "
                "(plugin.timer.max_duration)"
            )
        text = " ".join(message.split())
        if not text:
            raise ToolError("message is empty; say what the timer is for")
        if len(text) > _MAX_MESSAGE:
            raise ToolError(f"message is {len(text)} characters; keep it under {_MAX_MESSAGE}")
        conversation = turn_conversation(self._sdk)
        per_conversation = int(self._sdk.settings.get("max_pending") or 20)
        total = int(self._sdk.settings.get("max_pending_total") or 200)
        if await asyncio.to_thread(self.store.count, conversation) >= per_conversation:
            raise ToolError(f"this conversation already has {per_conversation} pending timers "
                            "(plugin.timer.max_pending); cancel one with timer_cancel first")
        if await asyncio.to_thread(self.store.count) >= total:
            raise ToolError(f"{total} timers are pending (plugin.timer.max_pending_total); "
                            "cancel one with timer_cancel first")
        # it fires with the rights of the person who set it ("(guest)" for a guest, never the owner)
        asker = turn_asker(self._sdk)
        timer = await asyncio.to_thread(self.store.add, time.time() + seconds, text, conversation, asker)
        self._schedule(timer)
        when = timer.to_dict(time.time())["fires_at"]
        return f"{timer.id} set: fires in {format_duration(round(seconds, 3))} ({when})"

    async def timer_list(self, offset: int = 0) -> dict[str, Any]:
        """The pending timers, soonest first, 20 at a time: id, message, when it fires, time remaining.

        Args:
            offset: how many to skip (the next_offset of the previous call), default 0.
        """
        if offset < 0:
            raise ToolError(f"offset {offset} is negative; start at 0")
        now = time.time()
        pending = await asyncio.to_thread(self.store.pending)
        shown, next_offset = page(pending, offset)
        return {"timers": [t.to_dict(now) for t in shown], "total": len(pending), "next_offset": next_offset}

    async def timer_cancel(self, timer_id: str) -> str:
        """Cancel a pending timer.

        Args:
            timer_id: the id timer_set returned, e.g. timer_3.
        """
        _seq(timer_id)
        task = self._tasks.pop(timer_id.strip(), None)
        if task is not None:
            task.cancel()
        if not await asyncio.to_thread(self.store.remove, timer_id):
            raise ToolError(f"no pending timer {timer_id!r}; timer_list shows the pending ones")
        return f"{timer_id.strip()} cancelled"


def make_plugin() -> TimerPlugin:
    return TimerPlugin()
