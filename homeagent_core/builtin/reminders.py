"""Built-in ``reminders``: reminders and schedules set in the words people use.

``reminder_set(when, text, repeat)`` reads ``when`` (and ``repeat``) in Chinese or English —
"明天早上7点", "下周三下午三点半", "in 2 hours", "next Friday 9am", "每个工作日7点", "every other
Tuesday", ISO 8601 — with :mod:`homeagent_core.builtin.when`, in the household's time zone
(``plugin.reminders.timezone``). A repeating reminder is stored as an RFC 5545 RRULE evaluated in
local wall time, so "every day at 8" stays at 8 across daylight-saving changes. Anything it
cannot read fails with a question, never a guess; the answer names the next due time in ISO 8601
with its UTC offset.

Reminders live in ``<data>/plugin_data/reminders/reminders.db`` (SQLite, WAL; every store call
runs in a worker thread). Delivery is at least once: a reminder's row stays until the turn that
handled it ended (a repeating one is then moved to its next instant), so one that was due while
the daemon was down fires right after the next start and says when it was due. It fires as an
L3 interrupt marked as a reminder (``[提醒] <text>`` for Chinese text, ``reminder: <text>``
otherwise, plus ``(was due <time>)`` / ``（原定 <time>）`` when late) on the chat conversation it
was set from, otherwise on the input channel ``reminder``; reminders that come due together
enter the input queue one at a time. Each row also has a ``person`` column: the person who asked,
when the door says who it is (the principal of the turn that set it); the reminder fires with
that person as its principal. A person other than the owner lists, cancels and snoozes only
their own reminders (the web UI's Reminders page keeps to the same rule).

Time comes from :attr:`RemindersPlugin.clock` (the system clock; a script may give the plugin
another before it starts, e.g. to play a week through in seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from homeagent_core.builtin.fire_later import cancel_all, deliver, open_store, page
from homeagent_core.builtin.turn_origin import GUEST, turn_asker, turn_conversation, turn_principal
from homeagent_core.builtin.when import WhenError, next_occurrence, parse_when
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
from homeagent_sdk._schema import StoreSchema, sql_step, version_one_if

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "reminders"
CHANNEL = "reminder"
DB_NAME = "reminders.db"

__all__ = [
    "REMINDERS_SCHEMA", "Clock", "Reminder", "ReminderStore", "RemindersPlugin", "SystemClock", "household_zone",
    "make_plugin", "system_zone",
]

log = logging.getLogger(__name__)

_MAX_TEXT = 2000
_LATE = 60.0  # a reminder firing more than this after its time says when it was due
_NAP = 3600.0  # long waits re-read the wall clock at least this often


def system_zone() -> str:
    """The IANA name of this machine's local time zone (``TZ``, /etc/timezone, /etc/localtime), or UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    with contextlib.suppress(OSError):
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    with contextlib.suppress(OSError):
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    for name in candidates:
        if name:
            with contextlib.suppress(ZoneInfoNotFoundError, ValueError):
                ZoneInfo(name)
                return name
    return "UTC"


def household_zone(name: str) -> ZoneInfo:
    """The zone a setting names ("" = the system's); a clear error for a name that is not one."""
    name = name.strip() or system_zone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"unknown time zone {name!r} in plugin.reminders.timezone; use an IANA name such as "
            "Asia/Shanghai or Europe/Berlin (or leave it empty for the system's zone)"
        ) from None


class Clock(Protocol):
    """Where the plugin reads the time and waits: the system clock, or a script's simulated one."""

    def time(self) -> float:
        """Now, in epoch seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


class SystemClock:
    """The real clock: :func:`time.time` and :func:`asyncio.sleep`."""

    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass(frozen=True)
class Reminder:
    """One stored reminder. ``due`` is the next instant (epoch seconds); ``rrule`` "" for a one-off."""

    id: str
    text: str
    due: float
    zone: str
    rrule: str = ""
    start: str = ""  # the rule's first local wall time (ISO, naive)
    channel: str = ""  # the chat conversation it was set from ("" = the reminder channel)
    person: str = ""  # the person who asked, when the door says who it is
    created_at: float = 0.0

    def due_at(self) -> datetime:
        return datetime.fromtimestamp(self.due, ZoneInfo(self.zone))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "due": self.due_at().isoformat(),
            "repeat": self.rrule,
            "zone": self.zone,
            "channel": self.channel,
            "person": self.person,
        }


_COLUMNS = "seq, text, due, zone, rrule, start, channel, person, created_at"
REMINDERS_SCHEMA = StoreSchema(
    "reminders.db",
    [
        sql_step(
            "CREATE TABLE IF NOT EXISTS reminders (seq INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL, "
            "due REAL NOT NULL, zone TEXT NOT NULL, rrule TEXT NOT NULL DEFAULT '', start TEXT NOT NULL DEFAULT '', "
            "channel TEXT NOT NULL DEFAULT '', person TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL)"
        ),
    ],
    legacy=version_one_if("reminders"),
)
"""The schema of ``reminders.db``: one step per version (never edit a shipped one)."""


class ReminderStore:
    """Pending reminders in SQLite (WAL); ids keep counting across restarts. Thread-safe, blocking."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = open_store(path, REMINDERS_SCHEMA)

    def add(
        self, text: str, due: float, zone: str, rrule: str = "", start: str = "", channel: str = "", person: str = ""
    ) -> Reminder:
        now = time.time()
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO reminders (text, due, zone, rrule, start, channel, person, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (text, due, zone, rrule, start, channel, person, now),
            )
        return Reminder(f"reminder_{cur.lastrowid}", text, due, zone, rrule, start, channel, person, now)

    def count(self, channel: str | None = None) -> int:
        with self._lock:
            if channel is None:
                row = self._db.execute("SELECT COUNT(*) FROM reminders").fetchone()
            else:
                row = self._db.execute("SELECT COUNT(*) FROM reminders WHERE channel = ?", (channel,)).fetchone()
        return int(row[0])

    def pending(self) -> list[Reminder]:
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM reminders ORDER BY due, seq").fetchall()
        return [_row(row) for row in rows]

    def get(self, reminder_id: str) -> Reminder | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM reminders WHERE seq = ?", (seq_of(reminder_id),)).fetchone()
        return _row(row) if row else None

    def set_due(self, reminder_id: str, due: float) -> bool:
        with self._lock:
            cur = self._db.execute("UPDATE reminders SET due = ? WHERE seq = ?", (due, seq_of(reminder_id)))
        return cur.rowcount > 0

    def remove(self, reminder_id: str) -> bool:
        with self._lock:
            cur = self._db.execute("DELETE FROM reminders WHERE seq = ?", (seq_of(reminder_id),))
        return cur.rowcount > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _row(row: tuple[Any, ...]) -> Reminder:
    seq, text, due, zone, rrule, start, channel, person, created = row
    return Reminder(f"reminder_{seq}", text, due, zone, rrule, start, channel, person, created)


def seq_of(reminder_id: str) -> int:
    """The row number of ``reminder_3`` (or ``3``); a clear error for anything else."""
    number = str(reminder_id).strip().removeprefix("reminder_")
    if not number.isdigit():
        raise ToolError(f"invalid reminder id {reminder_id!r}; ids look like reminder_3 (see reminder_list)")
    return int(number)


def reminder_message(reminder: Reminder, fired_at: float) -> str:
    """The text a reminder is delivered as: marked as a reminder, and saying when it was due if late."""
    chinese = re.search(r"[\u4e00-\u9fff]", reminder.text) is not None
    text = f"[提醒] {reminder.text}" if chinese else f"reminder: {reminder.text}"
    if fired_at - reminder.due > _LATE:
        due = reminder.due_at().isoformat(timespec="minutes")
        text += f"（原定 {due}）" if chinese else f" (was due {due})"
    return text


class RemindersPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self, *, clock: Clock | None = None) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._sdk: ScopedSDK | None = None
        self._store: ReminderStore | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.fired: list[tuple[str, str]] = []  # (id, delivered text), in firing order
        self._firing = asyncio.Semaphore(1)

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(
            ConfigDef(
                key="timezone",
                type="string",
                default="",
                description="The household's time zone (an IANA name such as Asia/Shanghai) in which reminders "
                "are read and repeat; empty means the system's local zone.",
            )
        )
        registry.add(
            ConfigDef(
                key="horizon",
                type="duration",
                default="365d",
                min=60,
                max=100 * 366 * 86400,
                description="How far ahead a reminder may be set.",
            )
        )
        registry.add(
            ConfigDef(
                key="max_pending",
                type="int",
                default=100,
                min=1,
                max=100_000,
                description="Most pending reminders one conversation may have; reminder_set refuses more.",
            )
        )
        registry.add(
            ConfigDef(
                key="max_pending_total",
                type="int",
                default=1000,
                min=1,
                max=1_000_000,
                description="Most pending reminders in all.",
            )
        )

    @hookimpl
    def register_input_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChannelDef(name=CHANNEL, description="reminders coming due", no_memory=True))

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.reminder_set)
        registry.add(self.reminder_list, parallel_safe=True)
        registry.add(self.reminder_cancel)
        registry.add(self.reminder_snooze)

    @hookimpl
    async def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk
        self._store = await asyncio.to_thread(ReminderStore, sdk.data_dir / DB_NAME)
        for reminder in await asyncio.to_thread(self._store.pending):
            self._schedule(reminder)

    @hookimpl
    async def shutdown(self) -> None:
        await cancel_all(self._tasks)
        if self._store is not None:
            await asyncio.to_thread(self._store.close)
            self._store = None

    # ------------------------------------------------------------------ firing

    @property
    def started(self) -> bool:
        """Whether the store is open (between startup and shutdown)."""
        return self._store is not None

    @property
    def store(self) -> ReminderStore:
        if self._store is None:
            raise ToolError("reminders have not started yet")
        return self._store

    def _schedule(self, reminder: Reminder) -> None:
        old = self._tasks.pop(reminder.id, None)
        if old is not None:
            old.cancel()
        self._tasks[reminder.id] = asyncio.get_running_loop().create_task(
            self._wait_and_fire(reminder.id, reminder.due), name=reminder.id
        )

    async def _wait_and_fire(self, reminder_id: str, due: float) -> None:
        task = asyncio.current_task()
        try:
            while (delay := due - self.clock.time()) > 0:
                await self.clock.sleep(min(delay, _NAP))
            async with self._firing:
                reminder = await asyncio.to_thread(self.store.get, reminder_id)
                if reminder is None or reminder.due != due:
                    return  # cancelled or snoozed (from the command line) meanwhile
                text = reminder_message(reminder, self.clock.time())
                self._announce(reminder, text)
                if not await self._fire(reminder, text):
                    return
                self.fired.append((reminder.id, text))
                await self._after_fired(reminder)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("reminder %s could not fire; it stays pending and fires after the next start", reminder_id)
        finally:
            if self._tasks.get(reminder_id) is task:
                del self._tasks[reminder_id]

    def _announce(self, reminder: Reminder, text: str) -> None:
        """Publish ``reminder_due`` (the web UI pushes it to the person's phones)."""
        if self._sdk is not None:
            self._sdk.events.publish(
                "reminder_due", {"id": reminder.id, "person": reminder.person, "text": text, "due": reminder.due}
            )

    async def add_reminder(self, text: str, at: datetime, *, person: str = "", channel: str = "") -> Reminder:
        """Store and schedule a one-off reminder at ``at`` (for other built-ins, e.g. before a calendar event)."""
        reminder = await asyncio.to_thread(
            self.store.add, text, at.timestamp(), str(getattr(at.tzinfo, "key", "UTC")), "", "", channel, person
        )
        self._schedule(reminder)
        return reminder

    async def drop_reminder(self, reminder_id: str) -> bool:
        """Cancel a pending reminder; False when it is no longer pending (it fired or was cancelled)."""
        key = f"reminder_{seq_of(reminder_id)}"
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()
        return await asyncio.to_thread(self.store.remove, key)

    async def _after_fired(self, reminder: Reminder) -> None:
        """Its turn ended: drop a one-off, move a repeating one to its next instant."""
        following = None
        if reminder.rrule:
            zone = ZoneInfo(reminder.zone)
            after = max(self.now(zone), reminder.due_at())
            following = next_occurrence(reminder.rrule, datetime.fromisoformat(reminder.start), after, zone)
        if following is None:
            await asyncio.to_thread(self.store.remove, reminder.id)
            return
        if await asyncio.to_thread(self.store.set_due, reminder.id, following.timestamp()):
            self._tasks.pop(reminder.id, None)
            self._schedule(replace(reminder, due=following.timestamp()))

    async def _fire(self, reminder: Reminder, text: str) -> bool:
        """Inject the reminder and wait until the turn handling it ended; False if it must fire again."""
        assert self._sdk is not None
        return await deliver(
            self._sdk, log, f"reminder {reminder.id}", text, door=CHANNEL, channel=reminder.channel,
            person=reminder.person,
        )

    # ------------------------------------------------------------------ tools

    def zone(self) -> ZoneInfo:
        """The household's time zone (``plugin.reminders.timezone``; "" = the system's)."""
        assert self._sdk is not None
        return household_zone(str(self._sdk.settings.get("timezone") or ""))

    def now(self, zone: ZoneInfo | None = None) -> datetime:
        """Now by :attr:`clock`, in ``zone`` (default the household's)."""
        return datetime.fromtimestamp(self.clock.time(), zone if zone is not None else self.zone())

    async def create(self, when: str, text: str, repeat: str = "", *, person: str = "", channel: str = "") -> Reminder:
        """Read ``when`` / ``repeat``, check the limits, store and schedule; a :class:`ToolError` says what is wrong."""
        assert self._sdk is not None
        body = " ".join(str(text).split())
        if not body:
            raise ToolError("text is empty; say what the reminder is for")
        if len(body) > _MAX_TEXT:
            raise ToolError(f"text is {len(body)} characters; keep it under {_MAX_TEXT}")
        zone = self.zone()
        now = self.now(zone)
        try:
            parsed = parse_when(str(when), now, zone, repeat=str(repeat))
        except WhenError as exc:
            raise ToolError(str(exc)) from None
        horizon = float(self._sdk.settings.get("horizon") or 365 * 86400)
        if parsed.at.timestamp() - now.timestamp() > horizon:
            raise ToolError(
                f"{parsed.at.isoformat()} is more than {format_duration(horizon)} ahead "
                "(plugin.reminders.horizon); is that the time you meant?"
            )
        per_conversation = int(self._sdk.settings.get("max_pending") or 100)
        total = int(self._sdk.settings.get("max_pending_total") or 1000)
        if await asyncio.to_thread(self.store.count, channel) >= per_conversation:
            raise ToolError(
                f"this conversation already has {per_conversation} pending reminders "
                "(plugin.reminders.max_pending); cancel one with reminder_cancel first"
            )
        if await asyncio.to_thread(self.store.count) >= total:
            raise ToolError(
                f"{total} reminders are pending (plugin.reminders.max_pending_total); "
                "cancel one with reminder_cancel first"
            )
        start = parsed.start.isoformat() if parsed.start is not None else ""
        reminder = await asyncio.to_thread(
            self.store.add, body, parsed.at.timestamp(), zone.key, parsed.rrule, start, channel, person
        )
        self._schedule(reminder)
        return reminder

    async def reminder_set(self, when: str, text: str, repeat: str = "") -> str:
        """Set a reminder; when it comes due you receive "[提醒] <text>" / "reminder: <text>".

        Args:
            when: when, as the person said it: 明天早上7点, 下周三下午三点半, 三个月后, 12月24日晚上8点,
                in 2 hours, next Friday 9am, tomorrow evening, ISO 8601; or a repeat such as
                每周一早上八点 / every weekday at 7.
            text: what to remind of.
            repeat: optional repeat: 每天, 每周一, 每个工作日, 每个月1号, 每隔一周, every other Tuesday.
        """
        # a guest's reminder ("(guest)") must not come back as the owner's
        asker, conversation = turn_asker(self._sdk), turn_conversation(self._sdk)
        reminder = await self.create(when, text, repeat, person=asker, channel=conversation)
        repeats = f", repeats {reminder.rrule}" if reminder.rrule else ""
        return f"{reminder.id} set: next due {reminder.due_at().isoformat()}{repeats}"

    def _scope(self) -> str | None:
        """Whose reminders the turn may see and change: None = everyone's (the owner, the system,
        outside a turn), else that person's ("(guest)" for a guest)."""
        principal = turn_principal(self._sdk)
        if principal is None or principal.role in ("owner", "system"):
            return None
        return principal.person or GUEST

    async def pending_of(self, person: str | None) -> list[Reminder]:
        """The pending reminders of ``person`` (None = everyone's), soonest first."""
        pending = await asyncio.to_thread(self.store.pending)
        return [r for r in pending if person is None or r.person == person]

    async def find(self, reminder_id: str, person: str | None) -> Reminder | None:
        """The pending reminder ``reminder_id`` if ``person`` may see it (None = anyone's), else None."""
        reminder = await asyncio.to_thread(self.store.get, f"reminder_{seq_of(reminder_id)}")
        return reminder if reminder is not None and (person is None or reminder.person == person) else None

    async def reminder_list(self, offset: int = 0) -> dict[str, Any]:
        """The pending reminders, soonest first, 20 at a time: id, text, next due time (ISO 8601), repeat rule.

        Args:
            offset: how many to skip (the next_offset of the previous call), default 0.
        """
        if offset < 0:
            raise ToolError(f"offset {offset} is negative; start at 0")
        pending = await self.pending_of(self._scope())
        shown, next_offset = page(pending, offset)
        return {"reminders": [r.to_dict() for r in shown], "total": len(pending), "next_offset": next_offset}

    async def reminder_cancel(self, reminder_id: str) -> str:
        """Cancel a pending reminder (a repeating one stops repeating).

        Args:
            reminder_id: the id reminder_set returned, e.g. reminder_3.
        """
        if await self.find(reminder_id, self._scope()) is None or not await self.drop_reminder(reminder_id):
            raise ToolError(f"no pending reminder {reminder_id!r}; reminder_list shows the pending ones")
        return f"reminder_{seq_of(reminder_id)} cancelled"

    async def snooze(self, reminder: Reminder, by: str) -> Reminder:
        """Put ``reminder`` off ``by`` a span or until a time; a :class:`ToolError` says what is wrong."""
        zone = ZoneInfo(reminder.zone)
        now = self.now(zone)
        try:
            until = now + timedelta(seconds=parse_duration(str(by)))
        except ValueError:
            try:
                until = _snooze_when(str(by), now, zone)
            except WhenError as exc:
                raise ToolError(f"by: {exc}") from None
        if until <= now:
            raise ToolError("by must put the reminder off into the future, e.g. 10m or 明天早上8点")
        if not await asyncio.to_thread(self.store.set_due, reminder.id, until.timestamp()):
            raise ToolError(f"no pending reminder {reminder.id!r}; it fired or was cancelled meanwhile")
        snoozed = replace(reminder, due=until.timestamp())
        self._schedule(snoozed)
        return snoozed

    async def reminder_snooze(self, reminder_id: str, by: str) -> str:
        """Put a reminder's next time off (a repeating one keeps its rule after that).

        Args:
            reminder_id: the id reminder_set returned, e.g. reminder_3.
            by: how long to put it off (10m, 1h, 半小时, 20 minutes) or until when (明天早上8点, tomorrow 9am).
        """
        reminder = await self.find(reminder_id, self._scope())
        if reminder is None:
            raise ToolError(f"no pending reminder {reminder_id!r}; reminder_list shows the pending ones")
        snoozed = await self.snooze(reminder, by)
        return f"{snoozed.id} snoozed: next due {snoozed.due_at().isoformat()}"


def _snooze_when(by: str, now: datetime, zone: ZoneInfo) -> datetime:
    """A snooze: a bare span ("半小时", "20 minutes") counts from now; otherwise a time as in reminder_set."""
    text = by.strip()
    for attempt in (text, f"{text}后", f"in {text}"):
        with contextlib.suppress(WhenError):
            parsed = parse_when(attempt, now, zone)
            if not parsed.rrule:
                return parsed.at
    return parse_when(text, now, zone).at  # raises the question for what was said


def make_plugin() -> RemindersPlugin:
    return RemindersPlugin()
