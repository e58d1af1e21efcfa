"""Watches: "洗衣机好了告诉我", "门开着超过10分钟就提醒全家".

A watch is an entity, a condition on its state (``off``, ``on``, ``open``, ``< 5``, ``> 30``,
``!= locked``), how long the condition must hold (0 = at once), who is told, and whether it
stays after firing (``repeat``: fires again each time the condition starts to hold anew).
Watches live in ``<plugin data>/watches.db`` (SQLite, WAL, every call in a worker thread), so
they survive restarts; after a (re)connect each watch looks at the entity's current state and
``last_changed``, so "open for 10 minutes" counts the minutes before the restart too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from homeagent_sdk._schema import StoreSchema, open_schema, sql_step, version_one_if

__all__ = ["Condition", "Watch", "WatchEngine", "WatchStore", "parse_condition"]

log = logging.getLogger("homeagent.plugin.homeassistant")

_CONDITION = re.compile(r"^\s*(==|=|!=|<=|>=|<|>)?\s*(.+?)\s*$")
#: Words people use for states, mapped to Home Assistant's state values.
STATE_WORDS: dict[str, str] = {
    "开": "on", "开着": "on", "打开": "on", "亮": "on", "亮着": "on", "有人": "on", "湿": "on", "漏水": "on",
    "关": "off", "关着": "off", "关闭": "off", "灭": "off", "没人": "off", "干": "off", "好了": "off", "停": "off",
    "锁": "locked", "锁着": "locked", "锁上": "locked", "没锁": "unlocked", "开锁": "unlocked",
    "门开着": "open", "开门": "open", "关门": "closed",
}


@dataclass(frozen=True)
class Condition:
    """``op value``: equality on the state text, or a number comparison."""

    op: str
    value: str

    def holds(self, state: str) -> bool:
        if self.op in ("==", "!="):
            same = state.casefold() == self.value.casefold()
            return same if self.op == "==" else not same
        try:
            number, limit = float(state), float(self.value)
        except ValueError:
            return False
        return {"<": number < limit, "<=": number <= limit, ">": number > limit, ">=": number >= limit}[self.op]

    def __str__(self) -> str:
        return f"{'' if self.op == '==' else self.op + ' '}{self.value}"


def parse_condition(text: str) -> Condition:
    """``off`` / ``== on`` / ``!= locked`` / ``< 5`` / ``关着``.

    Raises:
        ValueError: empty, or a number comparison without a number.
    """
    found = _CONDITION.match(str(text or ""))
    if not found or not found.group(2):
        raise ValueError("state is empty; say which state to watch for, e.g. off, on, open, < 5")
    op = {"=": "==", None: "=="}.get(found.group(1), found.group(1))
    value = STATE_WORDS.get(found.group(2), found.group(2))
    if op in ("<", "<=", ">", ">="):
        try:
            float(value)
        except ValueError:
            raise ValueError(f"{op} needs a number, got {value!r} (e.g. < 5 for 'power below 5 W')") from None
    return Condition(op, value)


@dataclass(frozen=True)
class Watch:
    """One stored watch."""

    id: str
    entity_id: str
    condition: Condition
    duration: float
    notify: tuple[str, ...]
    message: str
    repeat: bool
    created_by: str = ""
    created_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "entity_id": self.entity_id, "state": str(self.condition), "for_seconds": self.duration,
            "notify": list(self.notify), "message": self.message, "repeat": self.repeat,
        }


WATCHES_SCHEMA = StoreSchema(
    "watches.db",
    [sql_step(
        "CREATE TABLE IF NOT EXISTS watches (seq INTEGER PRIMARY KEY AUTOINCREMENT, entity_id TEXT NOT NULL, "
        "op TEXT NOT NULL, value TEXT NOT NULL, duration REAL NOT NULL DEFAULT 0, notify TEXT NOT NULL DEFAULT '', "
        "message TEXT NOT NULL DEFAULT '', repeat INTEGER NOT NULL DEFAULT 0, created_by TEXT NOT NULL DEFAULT '', "
        "created_at REAL NOT NULL)"
    )],
    legacy=version_one_if("watches"),
)
"""The schema of the plugin's ``watches.db``: one step per version (never edit a shipped one)."""


class WatchStore:
    """Watches in SQLite (WAL). Thread-safe, blocking: call it from a worker thread."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        open_schema(self._db, path, WATCHES_SCHEMA)

    def add(self, entity_id: str, condition: Condition, duration: float, notify: tuple[str, ...], message: str,
            repeat: bool, created_by: str = "") -> Watch:
        now = time.time()
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO watches (entity_id, op, value, duration, notify, message, repeat, created_by, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (entity_id, condition.op, condition.value, duration, "\n".join(notify), message, int(repeat),
                 created_by, now),
            )
        return Watch(f"watch_{cur.lastrowid}", entity_id, condition, duration, notify, message, repeat, created_by, now)

    def all(self) -> list[Watch]:
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, entity_id, op, value, duration, notify, message, repeat, created_by, created_at "
                "FROM watches ORDER BY seq"
            ).fetchall()
        return [
            Watch(f"watch_{seq}", entity, Condition(op, value), float(duration),
                  tuple(n for n in notify.split("\n") if n), message, bool(repeat), by, float(at))
            for seq, entity, op, value, duration, notify, message, repeat, by, at in rows
        ]

    def remove(self, watch_id: str) -> bool:
        with self._lock:
            cur = self._db.execute("DELETE FROM watches WHERE seq = ?", (seq_of(watch_id),))
        return cur.rowcount > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()


def seq_of(watch_id: str) -> int:
    number = str(watch_id).strip().removeprefix("watch_")
    if not number.isdigit():
        raise ValueError(f"invalid watch id {watch_id!r}; ids look like watch_3 (see home_watch_list)")
    return int(number)


Fire = Callable[[Watch, str, float], Awaitable[None]]


class WatchEngine:
    """Evaluates the watches on state changes and fires them (``fire(watch, state, held_seconds)``)."""

    def __init__(self, store: WatchStore, fire: Fire) -> None:
        self.store = store
        self._fire = fire
        self.watches: dict[str, Watch] = {}
        self._holding: dict[str, bool] = {}  # watch id -> condition held at the last look
        self._fired: set[str] = set()  # watches that fired while their condition still holds
        self._timers: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def load(self) -> None:
        for watch in await asyncio.to_thread(self.store.all):
            self.watches[watch.id] = watch

    def add(self, watch: Watch, state: str | None, last_changed: str) -> None:
        """Start evaluating a new watch against the entity's current state."""
        self.watches[watch.id] = watch
        if state is not None:
            self.seen(watch.entity_id, state, last_changed, only=watch.id, initial=True)

    async def remove(self, watch_id: str) -> bool:
        removed = await asyncio.to_thread(self.store.remove, watch_id)
        self.watches.pop(watch_id, None)
        self._holding.pop(watch_id, None)
        self._fired.discard(watch_id)
        self._cancel_timer(watch_id)
        return removed

    def seen(self, entity_id: str, state: str, last_changed: str, *, only: str = "", initial: bool = False) -> None:
        """An entity's state: from a ``state_changed`` event, or (``initial``) from a (re)load.

        A watch fires when its condition starts to hold (at once, or once it held for its
        duration). On a (re)load a condition that already holds starts only the duration timers
        (counting from ``last_changed``): a change that happened while nobody looked is not
        reported as if it were new.
        """
        for watch in list(self.watches.values()):
            if watch.entity_id != entity_id or (only and watch.id != only):
                continue
            holds = watch.condition.holds(state)
            was = self._holding.get(watch.id, False)
            self._holding[watch.id] = holds
            if not holds:
                self._cancel_timer(watch.id)
                self._fired.discard(watch.id)
            elif watch.id in self._fired:
                continue  # told already; a reconnect does not tell again
            elif watch.duration <= 0:
                if not was and not initial:
                    self._spawn(self._fire_once(watch, state, 0.0))
            elif watch.id not in self._timers and (not was or initial):
                held = max(0.0, time.time() - _epoch(last_changed)) if last_changed else 0.0
                self._timers[watch.id] = asyncio.get_running_loop().create_task(
                    self._after(watch, state, max(0.0, watch.duration - held)), name=watch.id
                )

    async def _after(self, watch: Watch, state: str, delay: float) -> None:
        await asyncio.sleep(delay)
        self._timers.pop(watch.id, None)
        if self._holding.get(watch.id) and watch.id in self.watches:
            await self._fire_once(watch, state, watch.duration)

    async def _fire_once(self, watch: Watch, state: str, held: float) -> None:
        self._fired.add(watch.id)
        try:
            await self._fire(watch, state, held)
        except Exception:
            log.exception("homeassistant: %s could not notify", watch.id)
            return
        if not watch.repeat:
            await self.remove(watch.id)

    def _cancel_timer(self, watch_id: str) -> None:
        task = self._timers.pop(watch_id, None)
        if task is not None:
            task.cancel()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        tasks = [*self._timers.values(), *self._tasks]
        self._timers.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _epoch(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return time.time()
