"""Built-in ``calendar``: the household's shared calendars over CalDAV, and read-only ICS subscriptions.

Tools: ``calendar_list(from, to)`` (the events of every calendar and subscription in a window,
times in the household's zone — "明天家里有什么安排" is ``calendar_list(from="明天")``),
``calendar_add(title, when, duration, repeat, location)``, ``calendar_move(id, when, occurrence)`` and
``calendar_delete(id, occurrence, following)``: without ``occurrence`` a repeating event moves or goes
as a whole series, with it only that occurrence (an override VEVENT or an EXDATE, see
:mod:`homeagent_core.builtin.calendar_occurrences`); a changed event is written back only if
nobody changed it since it was read (If-Match). ``when`` and ``repeat`` are read like a reminder's
(:func:`homeagent_core.builtin.when.parse_when`: 明天早上7点, 每周一早上八点, next Friday 9am,
ISO 8601) in the household's zone (``plugin.reminders.timezone``); a repeat is stored as the
event's RRULE with its VTIMEZONE, so other calendar apps show it at the same local time.

Settings: ``calendars`` (a JSON list of ``{"name", "url", "user"}``; ``"calendar"`` picks one
calendar by name under an account URL), ``passwords`` (a secret JSON object ``{name: password}``,
never logged or listed), ``subscriptions`` (``[{"name", "url"}]`` of ``.ics`` URLs, fetched
through the SSRF guard; ``allow_private`` names private hosts that may be fetched),
``remind_before`` (a reminder that long before each event, through the reminders plugin; 0 = off),
``timeout``. A calendar that answers 401/500 or does not answer is reported by name; the others
still answer, and a subscription that fails shows its last good copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from zoneinfo import ZoneInfo

from homeagent_core.builtin.calendar_events import CalendarEvent, EventDataError, expand, make_event, shift_event
from homeagent_core.builtin.calendar_occurrences import (
    Occurrence,
    cancel_occurrence,
    end_series_before,
    find_occurrence,
    move_occurrence,
)
from homeagent_core.builtin.calendar_said import (
    RELATIVE,
    list_window,
    midnight,
    read_duration,
    read_occurrence,
    read_when,
)
from homeagent_core.builtin.calendar_sources import (
    CalDAVCalendar,
    CalendarError,
    IcsSubscription,
    StoredEvent,
    fetch_ics,
)
from homeagent_core.builtin.reminders import RemindersPlugin, household_zone
from homeagent_core.builtin.when import WhenError, parse_when
from homeagent_core.durations import format_duration
from homeagent_core.workers import WorkerPool
from homeagent_sdk import ConfigDef, SettingsRegistry, ToolDef, ToolError, ToolRegistryProtocol, hookimpl
from homeagent_sdk._schema import StoreSchema, open_schema, sql_step, version_one_if
from homeagent_sdk.schema import tool_from_function
from homeagent_sdk.ssrf import AddressPolicy

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

__all__ = ["CalendarPlugin", "make_plugin"]

PLUGIN_NAME = "calendar"
DB_NAME = "calendar.db"

log = logging.getLogger(__name__)

T = TypeVar("T")

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
_MAX_EVENTS = 200
_MAX_TITLE = 500
_CHINESE = re.compile(r"[\u4e00-\u9fff]")
_NOT_SET_UP = "no calendar is set up; the owner adds one to plugin.calendar.calendars (see docs/CALENDAR.md)"


class CalendarPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self._pool = WorkerPool("calendar", 4, owner_limit=4)
        self._ics_cache: dict[str, tuple[float, bytes]] = {}
        self._db: sqlite3.Connection | None = None
        self._db_lock = threading.Lock()
        self._sync_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._syncing = asyncio.Lock()
        self._last_sync_error = ""

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        for definition in _SETTINGS:
            registry.add(definition)

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(_renamed(tool_from_function(self.calendar_list, plugin=PLUGIN_NAME), from_="from"),
                     parallel_safe=True)
        registry.add(self.calendar_add)
        registry.add(self.calendar_move)
        registry.add(self.calendar_delete)

    @hookimpl
    async def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk
        self._db = await asyncio.to_thread(_open_db, sdk.data_dir / DB_NAME)
        self._sync_task = asyncio.get_running_loop().create_task(self._sync_loop(), name="calendar-reminders")

    @hookimpl
    async def shutdown(self) -> None:
        if self._sync_task is not None:
            self._sync_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sync_task
            self._sync_task = None
        if self._db is not None:
            db, self._db = self._db, None
            await asyncio.to_thread(db.close)
        self._pool.shutdown()

    # ------------------------------------------------------------------ settings

    @property
    def sdk(self) -> ScopedSDK:
        if self._sdk is None:
            raise ToolError("calendar has not started yet")
        return self._sdk

    def zone(self) -> ZoneInfo:
        """The household's zone (``plugin.reminders.timezone``; empty = the system's)."""
        services = self.sdk.services
        name = services.config.get("plugin.reminders.timezone", "") if services is not None else ""
        return household_zone(str(name or ""))

    def calendars(self) -> list[CalDAVCalendar]:
        """The configured CalDAV calendars (with their passwords); a clear error for a bad entry."""
        raw = self.sdk.settings.get("calendars") or []
        passwords = self.sdk.settings.get("passwords") or {}
        if not isinstance(raw, list) or not isinstance(passwords, dict):
            raise ToolError(
                "plugin.calendar.calendars must be a JSON list of {\"name\", \"url\", \"user\"} and "
                "plugin.calendar.passwords a JSON object {name: password}"
            )
        timeout = float(self.sdk.settings.get("timeout") or 20)
        out: list[CalDAVCalendar] = []
        for i, entry in enumerate(raw):
            name, url = _entry(entry, i, "calendars")
            auth = str(entry.get("auth") or "basic")
            if auth not in ("basic", "digest", "auto"):
                raise ToolError(f"plugin.calendar.calendars[{i}]: auth {auth!r} must be basic, digest or auto")
            out.append(
                CalDAVCalendar(
                    name, url, str(entry.get("user") or ""), str(passwords.get(name) or ""), timeout,
                    str(entry.get("calendar") or ""), auth,
                )
            )
        return out

    def subscriptions(self) -> list[IcsSubscription]:
        raw = self.sdk.settings.get("subscriptions") or []
        if not isinstance(raw, list):
            raise ToolError("plugin.calendar.subscriptions must be a JSON list of {\"name\", \"url\"}")
        return [IcsSubscription(*_entry(entry, i, "subscriptions")) for i, entry in enumerate(raw)]

    def _writable(self, name: str = "") -> CalDAVCalendar:
        calendars = self.calendars()
        if name and any(sub.name == name for sub in self.subscriptions()):
            raise ToolError(f"{name!r} is a read-only subscription; its events cannot be changed here")
        if not calendars:
            raise ToolError(_NOT_SET_UP)
        name = name or str(self.sdk.settings.get("default_calendar") or "") or calendars[0].name
        for cal in calendars:
            if cal.name == name:
                return cal
        raise ToolError(f"no calendar named {name!r}; the calendars are {', '.join(c.name for c in calendars)}")

    async def _blocking(self, fn: Callable[..., T], *args: Any) -> T:
        timeout = float(self.sdk.settings.get("timeout") or 20)
        try:
            return await asyncio.wait_for(self._pool.run(fn, *args, owner=PLUGIN_NAME), timeout + 5)
        except TimeoutError:
            raise CalendarError(
                f"the calendar server did not answer within {timeout:g} s (plugin.calendar.timeout); "
                "nothing was changed, try again later"
            ) from None

    # ------------------------------------------------------------------ reading

    async def events(self, start: datetime, end: datetime) -> tuple[list[CalendarEvent], dict[str, str]]:
        """Every occurrence in ``[start, end)`` from every source, and a message per failed source (by name)."""
        zone = self.zone()
        calendars, subscriptions = self.calendars(), self.subscriptions()

        async def caldav_events(cal: CalDAVCalendar) -> list[CalendarEvent]:
            texts = await self._blocking(cal.fetch, start, end)
            found: list[CalendarEvent] = []
            for text in texts:
                found += expand(text, start, end, zone, calendar=cal.name)
            return found

        async def ics_events(sub: IcsSubscription) -> list[CalendarEvent]:
            data = await self._ics(sub)
            return expand(data, start, end, zone, calendar=sub.name, read_only=True)

        jobs = [caldav_events(c) for c in calendars] + [ics_events(s) for s in subscriptions]
        names = [c.name for c in calendars] + [s.name for s in subscriptions]
        results = await asyncio.gather(*jobs, return_exceptions=True)
        events: list[CalendarEvent] = []
        errors: dict[str, str] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, ToolError | EventDataError):
                errors[name] = str(result)
            elif isinstance(result, BaseException):
                raise result
            else:
                events += result
        events.sort(key=lambda e: (e.start, e.title))
        return events, errors

    async def _ics(self, sub: IcsSubscription) -> bytes:
        """A subscription's text: fetched again once ``ics_refresh`` passed, the last good copy on failure."""
        refresh = float(self.sdk.settings.get("ics_refresh") or 900)
        cached = self._ics_cache.get(sub.url)
        if cached is not None and time.time() - cached[0] < refresh:
            return cached[1]
        policy = AddressPolicy.parse(str(self.sdk.settings.get("allow_private") or ""))
        try:
            data = await fetch_ics(
                sub, policy, max_bytes=int(self.sdk.settings.get("max_ics_bytes") or 5_000_000),
                timeout=float(self.sdk.settings.get("timeout") or 20),
            )
        except CalendarError as exc:
            if cached is None:
                raise
            log.warning("%s; showing the copy from %s", exc, time.strftime("%Y-%m-%d %H:%M", time.localtime(cached[0])))
            return cached[1]
        self._ics_cache[sub.url] = (time.time(), data)
        return data

    # ------------------------------------------------------------------ tools

    async def calendar_list(self, from_: str = "", to: str = "") -> dict[str, Any]:
        """The household calendar's events between two times, soonest first, in the household's time zone.

        For "明天家里有什么安排" pass from="明天"; a day without a time of day means that whole day.

        Args:
            from_: start: 今天, 明天, 下周一, 12月24日, next Friday, 2026-12-24 or ISO 8601; default now.
                A week or weekend (这周, 下周, 周末, next week, this weekend) is that whole window.
            to: end, said the same way (a day means until that day's end); default the end of
                from's day, or 7 days from now when from is not given either.
        """
        zone = self.zone()
        now = datetime.now(zone)
        start, end = list_window(from_, to, now, zone)
        sources = len(self.calendars()) + len(self.subscriptions())
        if not sources:
            raise ToolError(_NOT_SET_UP)
        events, errors = await self.events(start, end)
        if errors and not events and len(errors) == sources:
            raise CalendarError("; ".join(errors.values()))
        answer: dict[str, Any] = {
            "zone": zone.key,
            "from": start.isoformat(),
            "to": end.isoformat(),
            "events": [e.to_dict(zone) for e in events[:_MAX_EVENTS]],
        }
        if len(events) > _MAX_EVENTS:
            answer["more"] = len(events) - _MAX_EVENTS
        if errors:
            answer["unavailable"] = list(errors.values())
        return answer

    async def calendar_add(
        self, title: str, when: str, duration: str = "", repeat: str = "", location: str = "", calendar: str = ""
    ) -> dict[str, Any]:
        """Add an event to the household calendar.

        Args:
            title: what it is (e.g. 家长会, dentist).
            when: when it starts: 明天下午3点, 下周三下午三点半, 12月24日晚上8点, next Friday 9am, ISO 8601.
            duration: how long: 1h, 30m, 1h30m, 半小时, 2小时; default plugin.calendar.default_duration.
            repeat: optional repeat: 每周一, 每个工作日, 每个月1号, every other Tuesday.
            location: optional place.
            calendar: which calendar (a name from plugin.calendar.calendars); default the first.
        """
        body = " ".join(str(title).split())
        if not body:
            raise ToolError("title is empty; say what the event is")
        if len(body) > _MAX_TITLE:
            raise ToolError(f"title is {len(body)} characters; keep it under {_MAX_TITLE}")
        cal = self._writable(calendar)
        zone = self.zone()
        try:
            parsed = parse_when(str(when), datetime.now(zone), zone, repeat=str(repeat))
        except WhenError as exc:
            raise ToolError(str(exc)) from None
        length = read_duration(duration or str(self.sdk.settings.get("default_duration") or "1h"))
        uid, ical = make_event(body, parsed.at, length, rrule=parsed.rrule, location=" ".join(location.split()))
        await self._blocking(cal.add, ical)
        self._wake.set()
        event = CalendarEvent(cal.name, uid, body, parsed.at, parsed.at + length, location=location.strip(),
                              repeat=parsed.rrule)
        return {"added": event.to_dict(zone)}

    async def calendar_move(
        self, event_id: str, when: str, occurrence: str = "", following: bool = False
    ) -> dict[str, Any]:
        """Move an event to a new start time; its length stays.

        Without occurrence a repeating event moves as a whole series; with occurrence only that one
        occurrence moves ("把下周二的游泳课改到周三下午四点": occurrence="下周二", when="周三下午四点").

        Args:
            event_id: the event's id from calendar_list (calendar/uid).
            when: the new start: 明天下午4点, 下周五上午10点, next Monday 9am, ISO 8601. With occurrence, a time
                alone (下午五点) or a weekday alone (周三下午四点) is read from the occurrence's own day.
            occurrence: only for a repeating event: which occurrence, by its start as calendar_list shows it
                (ISO 8601) or its day as said: 这周四, 下周二, 12月24日, this Sunday, 2026-12-24.
            following: not supported: moving one occurrence and all after it would split the series.
        """
        if following:
            raise ToolError(
                "moving an occurrence and all following ones would split the series in two, which is not "
                "supported; move the whole series (leave out occurrence), or move the occurrences one by one"
            )
        cal, uid = self._locate(event_id)
        zone = self.zone()
        now = datetime.now(zone)
        if not str(occurrence).strip():
            new_start = read_when(when, now, zone)
            stored = await self._blocking(cal.read, uid)
            try:
                changed, old_start = await self._blocking(
                    shift_event, stored.text, uid, new_start, f"calendar {cal.name!r}"
                )
            except EventDataError as exc:
                raise ToolError(str(exc)) from None
            await self._blocking(cal.replace, stored, changed)
            self._wake.set()
            return {"moved": f"{cal.name}/{uid}", "from": old_start.astimezone(zone).isoformat(),
                    "to": new_start.isoformat()}
        stored, found = await self._occurrence(cal, uid, occurrence, now, zone)
        reference = midnight(found.start.astimezone(zone))
        new_start = read_when(when, now if RELATIVE.search(str(when)) else max(reference, now), zone)
        try:
            changed = await self._blocking(
                move_occurrence, stored.text, uid, found, new_start, zone, f"calendar {cal.name!r}"
            )
        except EventDataError as exc:
            raise ToolError(str(exc)) from None
        await self._blocking(cal.replace, stored, changed)
        self._wake.set()
        return {"moved": f"{cal.name}/{uid}", "occurrence": _shown(found.recurrence_id, zone, found.all_day),
                "from": _shown(found.start, zone, found.all_day),
                "to": new_start.date().isoformat() if found.all_day else new_start.isoformat()}

    async def calendar_delete(self, event_id: str, occurrence: str = "", following: bool = False) -> str:
        """Delete an event, or cancel one occurrence of a repeating event.

        Without occurrence a repeating event is deleted with all its occurrences; with occurrence only
        that one is cancelled ("这周四的钢琴课取消": occurrence="这周四"), the rest stays.

        Args:
            event_id: the event's id from calendar_list (calendar/uid).
            occurrence: only for a repeating event: which occurrence, by its start as calendar_list shows it
                (ISO 8601) or its day as said: 这周四, 下周二, 12月24日, this Sunday, 2026-12-24.
            following: with occurrence: also cancel every later occurrence (the series ends before it).
        """
        cal, uid = self._locate(event_id)
        if not str(occurrence).strip():
            if following:
                raise ToolError("following needs occurrence: from which occurrence on should the series end?")
            await self._blocking(cal.delete, uid)
            self._wake.set()
            return f"{cal.name}/{uid} deleted"
        zone = self.zone()
        stored, found = await self._occurrence(cal, uid, occurrence, datetime.now(zone), zone)
        source = f"calendar {cal.name!r}"
        try:
            edit = end_series_before if following else cancel_occurrence
            changed = await self._blocking(edit, stored.text, uid, found, zone, source)
        except EventDataError as exc:
            raise ToolError(str(exc)) from None
        day = _shown(found.start, zone, found.all_day)
        if changed is None:  # from its first occurrence on: nothing is left of the series
            await self._blocking(cal.delete, uid)
            answer = f"{cal.name}/{uid} deleted: the series started with the occurrence on {day}"
        else:
            await self._blocking(cal.replace, stored, changed)
            answer = (f"{cal.name}/{uid}: the occurrences from {day} on are cancelled; the earlier ones stay"
                      if following else f"{cal.name}/{uid}: the occurrence on {day} is cancelled; the rest stays")
        self._wake.set()
        return answer

    async def _occurrence(
        self, cal: CalDAVCalendar, uid: str, said: str, now: datetime, zone: ZoneInfo
    ) -> tuple[StoredEvent, Occurrence]:
        """The stored series ``uid`` and its occurrence named by ``said``; a clear error when there is not one."""
        start, end, that_day = read_occurrence(str(said), now, zone)
        stored = await self._blocking(cal.read, uid)
        try:
            found = await self._blocking(
                find_occurrence, stored.text, uid, start, end, zone, f"calendar {cal.name!r}", that_day
            )
        except EventDataError as exc:
            raise ToolError(str(exc)) from None
        return stored, found

    def _locate(self, event_id: str) -> tuple[CalDAVCalendar, str]:
        name, sep, uid = str(event_id).strip().partition("/")
        if not sep or not uid:
            raise ToolError(f"invalid event id {event_id!r}; ids look like home/1234@example (see calendar_list)")
        return self._writable(name), uid

    # ------------------------------------------------------------------ reminders before events

    def _reminders(self) -> RemindersPlugin | None:
        services = self.sdk.services
        host = services.host if services is not None else None
        plugin = host.pm.get_plugin("reminders") if host is not None else None
        return plugin if isinstance(plugin, RemindersPlugin) else None

    async def _sync_loop(self) -> None:
        while True:
            interval = float(self.sdk.settings.get("sync_interval") or 300)
            self._wake.clear()
            try:
                await self.sync_reminders()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("calendar reminders could not be brought up to date: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)

    async def sync_reminders(self) -> int:
        """Make sure each event starting soon has its reminder ``remind_before`` ahead; returns how many were added.

        A reminder whose event moved or was deleted is cancelled. Sources that fail are logged
        (once per different error) and their reminders are left as they are.
        """
        async with self._syncing:
            return await self._sync_reminders()

    async def _sync_reminders(self) -> int:
        before = float(self.sdk.settings.get("remind_before") or 0)
        reminders = self._reminders()
        if before <= 0 or reminders is None or not (self.calendars() or self.subscriptions()):
            return 0
        interval = float(self.sdk.settings.get("sync_interval") or 300)
        zone = self.zone()
        now = datetime.now(zone)
        end = now + timedelta(seconds=before + 2 * interval + 60)
        events, errors = await self.events(now, end)
        error = "; ".join(errors.values())
        if error and error != self._last_sync_error:
            log.warning("calendar reminders: %s", error)
        self._last_sync_error = error
        wanted: dict[str, tuple[CalendarEvent, float]] = {}
        for event in events:
            at = event.start.timestamp() - before
            if at > time.time() and not event.all_day:
                wanted[f"{event.id}@{event.start.timestamp():.0f}"] = (event, at)
        known = await asyncio.to_thread(self._known)
        added = 0
        for key, reminder_id, at in known:
            source = key.split("/", 1)[0]
            if key not in wanted and at > time.time() and source not in errors:
                await reminders.drop_reminder(reminder_id)
                await asyncio.to_thread(self._forget, key)
        known_keys = {k for k, _, _ in known}
        for key, (event, at) in wanted.items():
            if key in known_keys:
                continue
            reminder = await reminders.add_reminder(
                _before_text(event, zone, before), datetime.fromtimestamp(at, zone),
                person=str(self.sdk.settings.get("remind_person") or ""),
            )
            await asyncio.to_thread(self._remember, key, reminder.id, at)
            added += 1
        return added

    def _known(self) -> list[tuple[str, str, float]]:
        assert self._db is not None
        with self._db_lock:
            self._db.execute("DELETE FROM reminded WHERE at < ?", (time.time() - 86400,))
            rows = self._db.execute("SELECT key, reminder, at FROM reminded").fetchall()
        return [(str(k), str(r), float(a)) for k, r, a in rows]

    def _remember(self, key: str, reminder_id: str, at: float) -> None:
        assert self._db is not None
        with self._db_lock:
            self._db.execute(
                "INSERT OR REPLACE INTO reminded (key, reminder, at) VALUES (?, ?, ?)", (key, reminder_id, at)
            )

    def _forget(self, key: str) -> None:
        assert self._db is not None
        with self._db_lock:
            self._db.execute("DELETE FROM reminded WHERE key = ?", (key,))


# ---------------------------------------------------------------------------- helpers


CALENDAR_SCHEMA = StoreSchema(
    "calendar.db",
    [sql_step("CREATE TABLE IF NOT EXISTS reminded (key TEXT PRIMARY KEY, reminder TEXT NOT NULL, at REAL NOT NULL)")],
    legacy=version_one_if("reminded"),
)
"""The schema of ``calendar.db`` (the reminders set before events): one step per version."""


def _open_db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    open_schema(db, path, CALENDAR_SCHEMA)
    return db


def _entry(entry: Any, index: int, setting: str) -> tuple[str, str]:
    """``(name, url)`` of one entry of a calendar setting; a clear error naming the entry."""
    where = f"plugin.calendar.{setting}[{index}]"
    if not isinstance(entry, dict):
        raise ToolError(f"{where} must be an object like {{\"name\": \"home\", \"url\": \"https://...\"}}")
    name, url = str(entry.get("name") or ""), str(entry.get("url") or "")
    if not _NAME.match(name):
        raise ToolError(f"{where}: name {name!r} must be 1-40 letters, digits, '_', '-' or '.' (no '/')")
    if not url.startswith(("http://", "https://")):
        raise ToolError(f"{where}: url {url[:100]!r} must start with https:// (or http://)")
    return name, url


def _renamed(tool: ToolDef, **names: str) -> ToolDef:
    """``tool`` with parameters renamed (``from_`` shown to the model as ``from``)."""
    handler = tool.handler
    assert handler is not None
    props = {names.get(k, k): v for k, v in tool.parameters.get("properties", {}).items()}
    required = [names.get(r, r) for r in tool.parameters.get("required", [])]
    back = {new: old for old, new in names.items()}
    description = tool.description
    for old, new in names.items():
        description = description.replace(f"{old}:", f"{new}:").replace(f"{old}=", f"{new}=")

    async def renamed(**kwargs: Any) -> Any:
        return await handler(**{back.get(k, k): v for k, v in kwargs.items()})

    return ToolDef(
        name=tool.name,
        description=description,
        parameters={**tool.parameters, "properties": props, "required": required},
        handler=renamed,
    )


def _shown(moment: date | datetime, zone: ZoneInfo, all_day: bool) -> str:
    """An occurrence's start as calendar_list shows it: ISO 8601 in the household's zone, a date when all-day."""
    if not isinstance(moment, datetime):
        return moment.isoformat()
    local = (moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)).astimezone(zone)
    return local.date().isoformat() if all_day else local.isoformat()


def _before_text(event: CalendarEvent, zone: ZoneInfo, before: float) -> str:
    start = event.start.astimezone(zone).strftime("%H:%M")
    where = f" @ {event.location}" if event.location else ""
    if _CHINESE.search(event.title):
        return f"日程「{event.title}」{start} 开始{where}"
    return f"{event.title} starts at {start} (in {format_duration(before)}){where}"


_SETTINGS: tuple[ConfigDef, ...] = (
    ConfigDef(key="calendars", type="json", default=[],
              description='CalDAV calendars: a JSON list of {"name": "home", "url": "https://.../calendars/me/home/", '
              '"user": "me"}; "calendar": "Family" picks a calendar by name under an account URL; "auth": '
              '"digest" or "auto" for servers without basic login. Passwords go in plugin.calendar.passwords.'),
    ConfigDef(key="passwords", type="json", default={}, secret=True,
              description='Passwords of the CalDAV calendars, a JSON object {"home": "app-password"}; '
              "never shown or logged."),
    ConfigDef(key="default_calendar", type="string", default="",
              description="The calendar calendar_add writes to; empty means the first one."),
    ConfigDef(key="subscriptions", type="json", default=[],
              description='Read-only ICS subscriptions: a JSON list of {"name": "school", "url": "https://.../holidays.ics"}.'),
    ConfigDef(key="allow_private", type="string", default="",
              description="Private hosts ICS subscriptions may be fetched from (host, host:port, network), like "
              "plugin.web.allow_private; public addresses only otherwise."),
    ConfigDef(key="remind_before", type="duration", default="15m", min=0, max=7 * 86400,
              description="A reminder this long before each event (through the reminders plugin); 0 turns it off."),
    ConfigDef(key="remind_person", type="string", default="",
              description="Who gets the reminders before events (a person's name); empty means the owner."),
    ConfigDef(key="default_duration", type="duration", default="1h", min=60, max=366 * 86400,
              description="The length of an event added without a duration."),
    ConfigDef(key="timeout", type="duration", default="20s", min=1, max=300,
              description="How long to wait for a calendar server or a subscription."),
    ConfigDef(key="sync_interval", type="duration", default="5m", min=10, max=86400,
              description="How often the calendars are read to set reminders before upcoming events."),
    ConfigDef(key="ics_refresh", type="duration", default="15m", min=0, max=7 * 86400,
              description="How long a fetched ICS subscription is reused before it is fetched again."),
    ConfigDef(key="max_ics_bytes", type="int", default=5_000_000, min=1000, max=100_000_000,
              description="The largest ICS subscription that is read."),
)


def make_plugin() -> CalendarPlugin:
    return CalendarPlugin()
