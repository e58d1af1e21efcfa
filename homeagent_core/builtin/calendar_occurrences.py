"""One occurrence of a repeating event: finding it, cancelling it, moving it (RFC 5545).

Pure functions over iCalendar text, like :mod:`homeagent_core.builtin.calendar_events`. An
occurrence is named by a window in the household's zone (a day, a week, or one instant as
``calendar_list`` shows it) and matched against the series' occurrences as they are shown (a
moved occurrence at its new time) and, failing that, as the series first put them (its
RECURRENCE-ID). Then:

- cancelling adds an ``EXDATE`` to the series, written like its ``DTSTART`` (``VALUE=DATE`` for
  an all-day series, the same ``TZID`` for a zoned one, UTC or floating likewise), and drops a
  moved copy of that occurrence if there is one;
- moving writes an override ``VEVENT`` in the same object: same ``UID``, ``RECURRENCE-ID`` =
  the occurrence's original start (again written like ``DTSTART``), the new ``DTSTART``/``DTEND``
  (the occurrence keeps its length); an occurrence already moved has its override edited;
- cancelling "this and all following" ends the series before the occurrence (``UNTIL``).

Each change bumps the ``SEQUENCE`` and ``DTSTAMP`` of the components it touches, so other
calendar apps take it as a new revision.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

from homeagent_core.builtin.calendar_events import EventDataError, parse_calendar

__all__ = [
    "Occurrence",
    "cancel_occurrence",
    "end_series_before",
    "find_occurrence",
    "move_occurrence",
]

#: How far around the named window the series is expanded to find the nearest occurrences.
_AROUND = timedelta(days=45)
_NEAREST = 4


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of a series as it is now."""

    recurrence_id: date | datetime  # its original start, as the series' rule puts it
    start: datetime  # where it is shown now (aware)
    end: datetime
    all_day: bool
    moved: bool  # an override VEVENT holds it


def _instant(value: date | datetime, zone: tzinfo) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=zone)
    return datetime(value.year, value.month, value.day, tzinfo=zone)


def _same(a: date | datetime, b: date | datetime, zone: tzinfo) -> bool:
    """Two RECURRENCE-ID/EXDATE values name the same occurrence (compared as instants)."""
    if not isinstance(a, datetime) and not isinstance(b, datetime):
        return a == b
    return _instant(a, zone) == _instant(b, zone)


def _master(cal: Any, uid: str, source: str) -> Any:
    for component in cal.walk("VEVENT"):
        if str(component.get("UID", "")) == uid and component.get("RECURRENCE-ID") is None:
            return component
    raise EventDataError(f"{source} has no event {uid!r}")


def _overrides(cal: Any, uid: str) -> list[Any]:
    return [c for c in cal.walk("VEVENT") if str(c.get("UID", "")) == uid and c.get("RECURRENCE-ID") is not None]


def _repeats(master: Any) -> bool:
    return master.get("RRULE") is not None or master.get("RDATE") is not None


def _occurrences(cal: Any, uid: str, start: datetime, end: datetime, zone: tzinfo) -> list[Occurrence]:
    import recurring_ical_events

    moved = [o["RECURRENCE-ID"].dt for o in _overrides(cal, uid)]
    try:
        components: list[Any] = list(recurring_ical_events.of(cal).between(start, end))
    except (ValueError, TypeError) as exc:
        raise EventDataError(f"the repeat of {uid!r} cannot be read ({exc})") from None
    found: list[Occurrence] = []
    for component in components:
        if component.name != "VEVENT" or str(component.get("UID", "")) != uid or component.get("DTSTART") is None:
            continue
        first = component["DTSTART"].dt
        rid = component["RECURRENCE-ID"].dt if component.get("RECURRENCE-ID") is not None else first
        begin = _instant(first, zone)
        if component.get("DTEND") is not None:
            finish = _instant(component["DTEND"].dt, zone)
        elif component.get("DURATION") is not None:
            finish = begin + component["DURATION"].dt
        else:
            finish = begin + (timedelta(0) if isinstance(first, datetime) else timedelta(days=1))
        found.append(
            Occurrence(rid, begin, finish, not isinstance(first, datetime), any(_same(rid, m, zone) for m in moved))
        )
    found.sort(key=lambda o: o.start)
    return found


def _shown(occurrence: Occurrence, zone: tzinfo) -> str:
    local = occurrence.start.astimezone(zone)
    return f"{local:%Y-%m-%d %a}" if occurrence.all_day else f"{local:%Y-%m-%d %a %H:%M}"


def _said(start: datetime, end: datetime, zone: tzinfo) -> str:
    local = start.astimezone(zone)
    if start == end:
        return f"{local:%Y-%m-%d %a %H:%M}"
    if end - start <= timedelta(days=1, hours=1):
        return f"{local:%Y-%m-%d %a}"
    return f"{local:%Y-%m-%d} – {(end - timedelta(seconds=1)).astimezone(zone):%Y-%m-%d}"


def find_occurrence(
    text: str | bytes, uid: str, start: datetime, end: datetime, zone: tzinfo, source: str, that_day: bool = False
) -> Occurrence:
    """The one occurrence of series ``uid`` named by ``[start, end)`` (``start == end``: that instant).

    An occurrence shown in the window wins over one whose original start is in it. ``zone`` is
    the household's, in which the window was said and the messages show times. With
    ``that_day``, an instant nothing starts at names the only occurrence shown on its local day.

    Raises:
        EventDataError: ``uid`` is not in ``text`` or does not repeat; no occurrence is there
            (the message lists the nearest ones); several are (it lists them and asks which).
    """
    cal = parse_calendar(text, source)
    master = _master(cal, uid, source)
    title = str(master.get("SUMMARY", "")) or uid
    if not _repeats(master):
        raise EventDataError(
            f"{title!r} does not repeat, so it has no occurrences to pick; leave out occurrence to move or "
            "delete the event itself"
        )
    exact = start == end
    around = _occurrences(cal, uid, start - _AROUND, end + _AROUND + timedelta(seconds=1), zone)

    def inside(moment: datetime) -> bool:
        return moment == start if exact else start <= moment < end

    hits = [o for o in around if inside(o.start)] or [o for o in around if inside(_instant(o.recurrence_id, zone))]
    if not hits and exact and that_day:
        day = start.astimezone(zone).date()
        same_day = [o for o in around if o.start.astimezone(zone).date() == day]
        hits = same_day if len(same_day) == 1 else []
    when = _said(start, end, zone)
    if len(hits) == 1:
        return hits[0]
    if hits:
        listed = ", ".join(_shown(o, zone) for o in hits)
        raise EventDataError(
            f"{title!r} has {len(hits)} occurrences in {when}: {listed}; which one is meant? "
            "Give its start as calendar_list shows it"
        )
    if around:
        nearest = sorted(sorted(around, key=lambda o: abs((o.start - start).total_seconds()))[:_NEAREST],
                         key=lambda o: o.start)
        near = ", ".join(_shown(o, zone) for o in nearest)
    else:
        import recurring_ical_events

        later = []
        for component in recurring_ical_events.of(cal).after(start):
            if str(component.get("UID", "")) == uid:
                later.append(f"{_instant(component['DTSTART'].dt, zone).astimezone(zone):%Y-%m-%d %a %H:%M}")
            if len(later) == _NEAREST:
                break
        near = ", ".join(later) if later else "none: the series has ended"
    raise EventDataError(
        f"{title!r} has no occurrence on {when}; the nearest are {near} (times in {getattr(zone, 'key', zone)}); "
        "which one is meant?"
    )


def _like_start(value: date | datetime, master: Any, zone: tzinfo) -> date | datetime:
    """``value`` written the way the series writes its DTSTART: a date, in its TZID, in UTC, or floating."""
    first = master["DTSTART"].dt
    if not isinstance(first, datetime):
        return value.astimezone(zone).date() if isinstance(value, datetime) else value
    moment = _instant(value, zone)
    if first.tzinfo is None:
        return moment.astimezone(zone).replace(tzinfo=None)
    return moment.astimezone(first.tzinfo)


def _touch(component: Any, sequence: int | None = None) -> None:
    """Mark ``component`` as a new revision (SEQUENCE + 1, DTSTAMP now)."""
    number = int(component.get("SEQUENCE", 0)) + 1 if sequence is None else sequence
    for key in ("SEQUENCE", "DTSTAMP"):
        if key in component:
            del component[key]
    component.add("SEQUENCE", number)
    component.add("DTSTAMP", datetime.now(UTC))


def cancel_occurrence(text: str | bytes, uid: str, occurrence: Occurrence, zone: tzinfo, source: str) -> str:
    """``text`` with ``occurrence`` of series ``uid`` cancelled (an EXDATE; its moved copy, if any, removed)."""
    cal = parse_calendar(text, source)
    master = _master(cal, uid, source)
    for override in _overrides(cal, uid):
        if _same(override["RECURRENCE-ID"].dt, occurrence.recurrence_id, zone):
            cal.subcomponents.remove(override)
    master.add("EXDATE", _like_start(occurrence.recurrence_id, master, zone))
    _touch(master)
    cal.add_missing_timezones()
    return str(cal.to_ical().decode())


def move_occurrence(
    text: str | bytes, uid: str, occurrence: Occurrence, new_start: datetime, zone: tzinfo, source: str
) -> str:
    """``text`` with ``occurrence`` of series ``uid`` moved to ``new_start``; it keeps its length.

    A new override VEVENT (RECURRENCE-ID = the original start) copies the series' summary,
    location, description and alarms; an occurrence moved before has its override edited.
    """
    cal = parse_calendar(text, source)
    master = _master(cal, uid, source)
    length = occurrence.end - occurrence.start
    found = [o for o in _overrides(cal, uid) if _same(o["RECURRENCE-ID"].dt, occurrence.recurrence_id, zone)]
    if found:
        override = found[0]
        sequence = None
    else:
        override = copy.deepcopy(master)
        for key in ("RRULE", "RDATE", "EXDATE", "EXRULE", "RECURRENCE-ID"):
            while key in override:
                del override[key]
        override.add("RECURRENCE-ID", _like_start(occurrence.recurrence_id, master, zone))
        sequence = int(master.get("SEQUENCE", 0)) + 1
        cal.add_component(override)
    for key in ("DTSTART", "DTEND", "DURATION"):
        if key in override:
            del override[key]
    if occurrence.all_day:
        day = new_start.astimezone(zone).date()
        override.add("DTSTART", day)
        override.add("DTEND", day + timedelta(days=max(1, round(length / timedelta(days=1)))))
    else:
        begin = _like_start(new_start, master, zone)
        assert isinstance(begin, datetime)
        override.add("DTSTART", begin)
        override.add("DTEND", begin + length)
    _touch(override, sequence)
    cal.add_missing_timezones()
    return str(cal.to_ical().decode())


def end_series_before(text: str | bytes, uid: str, occurrence: Occurrence, zone: tzinfo, source: str) -> str | None:
    """``text`` with series ``uid`` ending just before ``occurrence`` (this and all following cancelled).

    The RRULE gets an ``UNTIL`` (in UTC for a zoned series, a date for an all-day one, as RFC 5545
    §3.3.10 asks) instead of any ``COUNT``; later RDATEs and moved occurrences are dropped.
    Returns ``None`` when the occurrence is the series' first: then nothing of it is left.
    """
    cal = parse_calendar(text, source)
    master = _master(cal, uid, source)
    first = master["DTSTART"].dt
    cut = _instant(occurrence.recurrence_id, zone)
    if cut <= _instant(first, zone):
        return None
    rules = master.get("RRULE")
    for rule in rules if isinstance(rules, list) else [rules] if rules is not None else []:
        rule.pop("COUNT", None)
        if not isinstance(first, datetime):
            rule["UNTIL"] = [cut.date() - timedelta(days=1)]
        elif first.tzinfo is None:
            rule["UNTIL"] = [(cut - timedelta(seconds=1)).astimezone(zone).replace(tzinfo=None)]
        else:
            rule["UNTIL"] = [(cut - timedelta(seconds=1)).astimezone(UTC)]
    dates = master.get("RDATE")
    if dates is not None:
        kept = [d.dt for group in (dates if isinstance(dates, list) else [dates]) for d in group.dts
                if _instant(d.dt, zone) < cut]
        del master["RDATE"]
        for value in kept:
            master.add("RDATE", value)
    for override in _overrides(cal, uid):
        if _instant(override["RECURRENCE-ID"].dt, zone) >= cut:
            cal.subcomponents.remove(override)
    _touch(master)
    cal.add_missing_timezones()
    return str(cal.to_ical().decode())
