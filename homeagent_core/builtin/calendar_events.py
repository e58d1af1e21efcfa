"""Calendar events as data: reading iCalendar text, expanding repeats, writing new events.

Pure functions over :mod:`icalendar` and :mod:`recurring_ical_events` (no IO; both imported on
first use), shared by the CalDAV calendars and the read-only ICS subscriptions of
:mod:`homeagent_core.builtin.calendar`.
Every instant is an aware datetime; an all-day event starts at local midnight of the household's
zone. A repeating event is expanded into its occurrences inside the asked window (RRULE, RDATE,
EXDATE and moved single occurrences, evaluated in the event's own time zone, so a weekly 09:00
meeting in Europe/Berlin stays at 09:00 Berlin time across daylight-saving changes).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Any

__all__ = [
    "CalendarEvent",
    "EventDataError",
    "expand",
    "make_event",
    "shift_event",
]

_PRODID = "-//HomeAgent//calendar//EN"
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


class EventDataError(ValueError):
    """iCalendar text that cannot be read (the message says which source and why)."""


@dataclass(frozen=True)
class CalendarEvent:
    """One occurrence of an event in a calendar."""

    calendar: str
    uid: str
    title: str
    start: datetime
    end: datetime
    all_day: bool = False
    location: str = ""
    repeat: str = ""  # the RRULE of the series this occurrence belongs to ("" = a one-off)
    read_only: bool = False

    @property
    def id(self) -> str:
        """The id the tools take: ``<calendar>/<uid>`` (one id for every occurrence of a series)."""
        return f"{self.calendar}/{self.uid}"

    def to_dict(self, zone: tzinfo) -> dict[str, Any]:
        """As the tools answer: times in ``zone`` (ISO 8601 with offset; a date for all-day events)."""
        start, end = self.start.astimezone(zone), self.end.astimezone(zone)
        out: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "start": start.date().isoformat() if self.all_day else start.isoformat(),
            "end": (end - timedelta(days=1)).date().isoformat() if self.all_day else end.isoformat(),
            "calendar": self.calendar,
        }
        if self.all_day:
            out["all_day"] = True
        if self.location:
            out["location"] = self.location
        if self.repeat:
            out["repeat"] = self.repeat
        if self.read_only:
            out["read_only"] = True
        return out


def _instant(value: date | datetime, zone: tzinfo) -> datetime:
    """An aware instant: a date is local midnight in ``zone``, a floating time is read in ``zone``."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=zone)
    return datetime.combine(value, time(0), tzinfo=zone)


def parse_calendar(text: str | bytes, source: str) -> Any:
    """Parse iCalendar text; a clear error naming ``source`` when it is not iCalendar."""
    from icalendar import Calendar

    try:
        return Calendar.from_ical(text)
    except (ValueError, KeyError, IndexError) as exc:
        raise EventDataError(f"{source} did not return iCalendar data ({exc})") from None


def expand(
    text: str | bytes,
    start: datetime,
    end: datetime,
    zone: tzinfo,
    *,
    calendar: str,
    read_only: bool = False,
) -> list[CalendarEvent]:
    """The occurrences in ``[start, end)`` of every event in the iCalendar ``text``, soonest first.

    Raises:
        EventDataError: ``text`` is not iCalendar, or a repeat rule in it cannot be evaluated.
    """
    import recurring_ical_events

    parsed = parse_calendar(text, f"calendar {calendar!r}")
    try:
        components: list[Any] = list(recurring_ical_events.of(parsed).between(start, end))
    except (ValueError, TypeError) as exc:
        raise EventDataError(f"calendar {calendar!r} has an event whose repeat cannot be read ({exc})") from None
    rules = {str(c.get("UID", "")): c["RRULE"].to_ical().decode() for c in parsed.walk("VEVENT") if "RRULE" in c}
    events: list[CalendarEvent] = []
    for component in components:
        if component.name != "VEVENT":
            continue
        raw_start = component.get("DTSTART")
        if raw_start is None:
            continue
        first = raw_start.dt
        all_day = not isinstance(first, datetime)
        begin = _instant(first, zone)
        raw_end = component.get("DTEND")
        if raw_end is not None:
            finish = _instant(raw_end.dt, zone)
        elif component.get("DURATION") is not None:
            finish = begin + component["DURATION"].dt
        else:
            finish = begin + (timedelta(days=1) if all_day else timedelta(0))
        uid = str(component.get("UID", ""))
        events.append(
            CalendarEvent(
                calendar=calendar,
                uid=uid,
                title=str(component.get("SUMMARY", "")) or "(untitled)",
                start=begin,
                end=finish,
                all_day=all_day,
                location=str(component.get("LOCATION", "")),
                repeat=rules.get(uid, ""),
                read_only=read_only,
            )
        )
    events.sort(key=lambda e: (e.start, e.title))
    return events


def make_event(
    title: str,
    start: datetime,
    duration: timedelta,
    *,
    rrule: str = "",
    location: str = "",
    uid: str = "",
) -> tuple[str, str]:
    """A new VCALENDAR with one VEVENT; returns ``(uid, ical text)``.

    ``start`` is aware and written in its own zone (with a VTIMEZONE), so a repeat keeps its
    local wall time across daylight-saving changes.
    """
    from icalendar import Calendar
    from icalendar import Event as VEvent

    uid = uid or f"{uuid.uuid4()}@homeagent"
    cal: Any = Calendar()
    cal.add("PRODID", _PRODID)
    cal.add("VERSION", "2.0")
    event: Any = VEvent()
    event.add("UID", uid)
    event.add("SUMMARY", title)
    event.add("DTSTAMP", datetime.now(start.tzinfo))
    event.add("DTSTART", start)
    event.add("DTEND", start + duration)
    if location:
        event.add("LOCATION", location)
    if rrule:
        event.add("RRULE", _rrule_dict(rrule))
    cal.add_component(event)
    cal.add_missing_timezones()
    return uid, cal.to_ical().decode()


def _rrule_dict(rrule: str) -> dict[str, list[str]]:
    """``FREQ=WEEKLY;BYDAY=MO`` as the mapping icalendar's vRecur takes."""
    parts: dict[str, list[str]] = {}
    for item in rrule.split(";"):
        if "=" in item:
            key, value = item.split("=", 1)
            parts[key.strip().upper()] = value.split(",")
    return parts


def _carry_exceptions(cal: Any, master: Any, uid: str, old: datetime, new_start: datetime) -> None:
    """Move the series' EXDATEs and its overrides' RECURRENCE-IDs along with its first start.

    An occurrence ``d`` after the old first start (wall-clock, in the old zone) is the same
    distance after the new one (in the new zone), so a cancelled occurrence stays cancelled
    and a moved one keeps replacing the occurrence it replaced; a moved one keeps its own time.
    """
    old_zone = old.tzinfo or new_start.tzinfo
    zone = new_start.tzinfo
    assert old_zone is not None and zone is not None

    def carried(value: date | datetime) -> date | datetime:
        if not isinstance(value, datetime):
            return value
        wall = _instant(value, old_zone).astimezone(old_zone).replace(tzinfo=None)
        return (new_start.replace(tzinfo=None) + (wall - old.replace(tzinfo=None))).replace(tzinfo=zone)

    raw = master.get("EXDATE")
    if raw is not None:
        values = [d.dt for group in (raw if isinstance(raw, list) else [raw]) for d in group.dts]
        del master["EXDATE"]
        for value in values:
            master.add("EXDATE", carried(value))
    for override in cal.walk("VEVENT"):
        if str(override.get("UID", "")) == uid and override.get("RECURRENCE-ID") is not None:
            rid = carried(override["RECURRENCE-ID"].dt)
            del override["RECURRENCE-ID"]
            override.add("RECURRENCE-ID", rid)


def shift_event(text: str | bytes, uid: str, new_start: datetime, source: str) -> tuple[str, datetime]:
    """Move the event ``uid`` in ``text`` so it starts at ``new_start`` (a series moves as a whole).

    The duration is kept; the start is written in ``new_start``'s zone, and so are the series'
    cancelled (EXDATE) and moved (RECURRENCE-ID) occurrences, carried along. Returns the new
    iCalendar text and the old start.

    Raises:
        EventDataError: the text does not hold an event ``uid``.
    """
    cal = parse_calendar(text, source)
    masters: list[Any] = [
        c for c in cal.walk("VEVENT") if str(c.get("UID", "")) == uid and c.get("RECURRENCE-ID") is None
    ]
    if not masters:
        raise EventDataError(f"{source} has no event {uid!r}")
    master = masters[0]
    old = master["DTSTART"].dt
    zone = new_start.tzinfo
    assert zone is not None
    old_start = _instant(old, zone)
    if master.get("DTEND") is not None:
        length = _instant(master["DTEND"].dt, zone) - old_start
    elif master.get("DURATION") is not None:
        length = master["DURATION"].dt
    else:
        length = timedelta(0)
    for key in ("DTSTART", "DTEND", "DURATION"):
        if key in master:
            del master[key]
    master.add("DTSTART", new_start)
    master.add("DTEND", new_start + length)
    if isinstance(old, datetime):
        _carry_exceptions(cal, master, uid, old, new_start)
    rule = master.get("RRULE")
    if rule is not None and len(rule.get("BYDAY", [])) == 1 and isinstance(old, datetime):
        moved = old_start.astimezone(zone).weekday() != new_start.weekday()
        if moved:  # a weekly series on one day moves to the new day
            rule["BYDAY"] = [_WEEKDAYS[new_start.weekday()]]
    sequence = int(master.get("SEQUENCE", 0)) + 1
    if "SEQUENCE" in master:
        del master["SEQUENCE"]
    master.add("SEQUENCE", sequence)
    cal.add_missing_timezones()
    return cal.to_ical().decode(), old_start
