"""Moving and cancelling one occurrence of a repeating event, against a real Radicale server.

What the tools write is read back as another CalDAV client sees it (the ``caldav`` library, its
own expansion) and parsed with ``icalendar`` to check the EXDATE / RECURRENCE-ID properties.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import caldav
import icalendar
import pytest
from radicale_server import Radicale, start_radicale

CALENDAR = "homeagent_core.builtin.calendar"
REMINDERS = "homeagent_core.builtin.reminders"
SHANGHAI = ZoneInfo("Asia/Shanghai")
BERLIN = ZoneInfo("Europe/Berlin")
UID = "piano-berlin@test"
_names = itertools.count(1)

# A weekly Monday 09:00-09:45 Berlin lesson over the 2027 spring daylight-saving change (28 March),
# written by another calendar app: 22 March (CET), 29 March, 5 and 12 April (CEST).
BERLIN_SERIES = f"""BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//other app//EN
BEGIN:VTIMEZONE
TZID:Europe/Berlin
BEGIN:DAYLIGHT
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
TZNAME:CEST
DTSTART:19700329T020000
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU
END:DAYLIGHT
BEGIN:STANDARD
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
TZNAME:CET
DTSTART:19701025T030000
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU
END:STANDARD
END:VTIMEZONE
BEGIN:VEVENT
UID:{UID}
DTSTAMP:20261201T000000Z
DTSTART;TZID=Europe/Berlin:20270322T090000
DTEND;TZID=Europe/Berlin:20270322T094500
RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=4
SUMMARY:Piano
LOCATION:Music school
END:VEVENT
END:VCALENDAR
"""

CLEANING = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//other app//EN
BEGIN:VEVENT
UID:cleaning@test
DTSTAMP:20261201T000000Z
DTSTART;VALUE=DATE:20270307
DTEND;VALUE=DATE:20270308
RRULE:FREQ=WEEKLY;BYDAY=SU
SUMMARY:Cleaning
END:VEVENT
END:VCALENDAR
"""


@pytest.fixture(scope="module")
def radicale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Radicale]:
    with start_radicale(tmp_path_factory.mktemp("radicale")) as server:
        yield server


def client(server: Radicale) -> caldav.DAVClient:
    return caldav.DAVClient(url=server.url, username=server.user, password=server.password)


def new_calendar(server: Radicale, *objects: str) -> str:
    name = f"occ{next(_names)}"
    with client(server) as c:
        cal = c.principal().make_calendar(name=name, cal_id=name)
        for text in objects:
            cal.add_event(text)
    return server.calendar_url(name)


def settings(url: str, server: Radicale, zone: str = "Asia/Shanghai") -> dict[str, Any]:
    return {
        "plugin.reminders.timezone": zone,
        "plugin.calendar.calendars": json.dumps([{"name": "home", "url": url, "user": server.user}]),
        "plugin.calendar.passwords": json.dumps({"home": server.password}),
        "plugin.calendar.remind_before": 0,
    }


def stored(server: Radicale, url: str, uid: str) -> tuple[Any, list[Any]]:
    """The series' master VEVENT and its overrides, as another client reads the object."""
    with client(server) as c:
        text = str(c.calendar(url=url).get_event_by_uid(uid).data)
    events = [e for e in icalendar.Calendar.from_ical(text).walk("VEVENT") if str(e["UID"]) == uid]
    overrides = [e for e in events if "RECURRENCE-ID" in e]
    assert len(events) - len(overrides) == 1, text
    return next(e for e in events if "RECURRENCE-ID" not in e), overrides


def exdates(master: Any) -> list[Any]:
    raw = master.get("EXDATE")
    return [] if raw is None else [d.dt for group in (raw if isinstance(raw, list) else [raw]) for d in group.dts]


async def listed(h: Any, start: str, end: str) -> list[tuple[str, str, str]]:
    answer = json.loads(await h.ok("calendar_list", **{"from": start, "to": end}))
    return [(e["title"], e["start"], e["end"]) for e in answer["events"]]


async def test_one_occurrence_after_the_daylight_saving_change_is_moved_and_one_cancelled(
    harness: Any, radicale: Radicale
) -> None:
    url = new_calendar(radicale, BERLIN_SERIES)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale))
    before = await listed(h, "2027-03-20", "2027-04-30")
    assert [s for _, s, _ in before] == [
        "2027-03-22T16:00:00+08:00", "2027-03-29T15:00:00+08:00",
        "2027-04-05T15:00:00+08:00", "2027-04-12T15:00:00+08:00",
    ]
    # cancel the 5 April one by its start as calendar_list shows it (household zone Shanghai)
    said = await h.ok("calendar_delete", event_id=f"home/{UID}", occurrence="2027-04-05T15:00:00+08:00")
    assert "2027-04-05T15:00:00+08:00" in said and "cancelled" in said
    # move the 29 March one (after the change) by its day, to Wednesday 31 March 18:00 Shanghai
    moved = json.loads(await h.ok(
        "calendar_move", event_id=f"home/{UID}", occurrence="2027-03-29", when="2027-03-31T18:00:00+08:00"
    ))
    assert moved["from"] == "2027-03-29T15:00:00+08:00" and moved["to"] == "2027-03-31T18:00:00+08:00"
    assert moved["occurrence"] == "2027-03-29T15:00:00+08:00"
    assert await listed(h, "2027-03-20", "2027-04-30") == [
        ("Piano", "2027-03-22T16:00:00+08:00", "2027-03-22T16:45:00+08:00"),
        ("Piano", "2027-03-31T18:00:00+08:00", "2027-03-31T18:45:00+08:00"),  # keeps its 45 minutes
        ("Piano", "2027-04-12T15:00:00+08:00", "2027-04-12T15:45:00+08:00"),
    ]

    # what another client sees: RFC 5545 properties written like the series' DTSTART (TZID=Europe/Berlin)
    master, (override,) = stored(radicale, url, UID)
    (exdate,) = exdates(master)
    assert exdate == datetime(2027, 4, 5, 9, 0, tzinfo=BERLIN) and exdate.utcoffset() == timedelta(hours=2)
    assert master["EXDATE"].params.get("TZID") == "Europe/Berlin"
    assert str(master["RRULE"].to_ical().decode()) == "FREQ=WEEKLY;COUNT=4;BYDAY=MO"
    rid = override["RECURRENCE-ID"]
    assert rid.dt == datetime(2027, 3, 29, 9, 0, tzinfo=BERLIN) and rid.params.get("TZID") == "Europe/Berlin"
    assert override["DTSTART"].dt == datetime(2027, 3, 31, 12, 0, tzinfo=BERLIN)  # 18:00 +08 = 12:00 CEST
    assert override["DTEND"].dt == datetime(2027, 3, 31, 12, 45, tzinfo=BERLIN)
    assert str(override["SUMMARY"]) == "Piano" and str(override["LOCATION"]) == "Music school"
    assert "RRULE" not in override and int(override["SEQUENCE"]) >= 1 and int(master["SEQUENCE"]) >= 1
    with client(radicale) as c:
        expanded = c.calendar(url=url).search(
            start=datetime(2027, 3, 20, tzinfo=BERLIN), end=datetime(2027, 4, 30, tzinfo=BERLIN),
            event=True, expand=True,
        )
        starts = sorted(e.icalendar_component["DTSTART"].dt.astimezone(SHANGHAI).isoformat() for e in expanded)
    assert starts == ["2027-03-22T16:00:00+08:00", "2027-03-31T18:00:00+08:00", "2027-04-12T15:00:00+08:00"]

    # the moved one, named by its new start, moves again: its override is edited, not doubled
    again = json.loads(await h.ok(
        "calendar_move", event_id=f"home/{UID}", occurrence="2027-03-31T18:00:00+08:00", when="下午五点"
    ))
    assert again["to"] == "2027-03-31T17:00:00+08:00"  # a time alone is on the occurrence's own day
    assert again["occurrence"] == "2027-03-29T15:00:00+08:00" and again["from"] == "2027-03-31T18:00:00+08:00"
    _, (override,) = stored(radicale, url, UID)
    assert override["DTSTART"].dt == datetime(2027, 3, 31, 11, 0, tzinfo=BERLIN)
    assert int(override["SEQUENCE"]) >= 2
    # the moved one, named by its original day, is cancelled: the override goes, an EXDATE comes
    await h.ok("calendar_delete", event_id=f"home/{UID}", occurrence="2027-03-29")
    master, overrides = stored(radicale, url, UID)
    assert overrides == [] and sorted(exdates(master)) == [
        datetime(2027, 3, 29, 9, 0, tzinfo=BERLIN), datetime(2027, 4, 5, 9, 0, tzinfo=BERLIN)
    ]
    assert [s for _, s, _ in await listed(h, "2027-03-20", "2027-04-30")] == [
        "2027-03-22T16:00:00+08:00", "2027-04-12T15:00:00+08:00"
    ]


async def test_in_the_events_own_zone_the_wall_time_is_kept_and_a_series_move_carries_them(
    harness: Any, radicale: Radicale
) -> None:
    url = new_calendar(radicale, BERLIN_SERIES)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale, "Europe/Berlin"))
    # 12 April (CEST) to Tuesday 13 April 10:00 Berlin, said as a weekday alone: the occurrence's week
    moved = json.loads(await h.ok(
        "calendar_move", event_id=f"home/{UID}", occurrence="2027-04-12", when="周二上午10点"
    ))
    assert moved["to"] == "2027-04-13T10:00:00+02:00"
    await h.ok("calendar_delete", event_id=f"home/{UID}", occurrence="2027-03-22T09:00:00")
    assert [s for _, s, _ in await listed(h, "2027-03-20", "2027-04-30")] == [
        "2027-03-29T09:00:00+02:00", "2027-04-05T09:00:00+02:00", "2027-04-13T10:00:00+02:00"
    ]
    master, (override,) = stored(radicale, url, UID)
    assert exdates(master) == [datetime(2027, 3, 22, 9, 0, tzinfo=BERLIN)]
    assert exdates(master)[0].utcoffset() == timedelta(hours=1)  # CET, before the change
    assert override["RECURRENCE-ID"].dt == datetime(2027, 4, 12, 9, 0, tzinfo=BERLIN)
    # the whole series then moves to Tuesdays: the cancelled and the moved occurrence come along
    await h.ok("calendar_move", event_id=f"home/{UID}", when="2027-03-23T09:00:00")
    assert [s for _, s, _ in await listed(h, "2027-03-20", "2027-04-30")] == [
        "2027-03-30T09:00:00+02:00", "2027-04-06T09:00:00+02:00", "2027-04-13T10:00:00+02:00"
    ]
    master, (override,) = stored(radicale, url, UID)
    assert exdates(master) == [datetime(2027, 3, 23, 9, 0, tzinfo=BERLIN)]
    assert override["RECURRENCE-ID"].dt == datetime(2027, 4, 13, 9, 0, tzinfo=BERLIN)


async def test_an_all_day_series_gets_date_valued_exdate_and_recurrence_id(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale, CLEANING)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale))
    await h.ok("calendar_delete", event_id="home/cleaning@test", occurrence="2027-03-14")
    moved = json.loads(await h.ok(
        "calendar_move", event_id="home/cleaning@test", occurrence="2027-03-21", when="2027-03-20T09:00"
    ))
    assert (moved["occurrence"], moved["from"], moved["to"]) == ("2027-03-21", "2027-03-21", "2027-03-20")
    answer = json.loads(await h.ok("calendar_list", **{"from": "2027-03-06", "to": "2027-03-28"}))
    assert [(e["start"], e.get("all_day")) for e in answer["events"]] == [
        ("2027-03-07", True), ("2027-03-20", True), ("2027-03-28", True)
    ]
    master, (override,) = stored(radicale, url, "cleaning@test")
    assert exdates(master) == [date(2027, 3, 14)] and master["EXDATE"].params.get("VALUE") == "DATE"
    assert override["RECURRENCE-ID"].dt == date(2027, 3, 21)
    assert override["RECURRENCE-ID"].params.get("VALUE") == "DATE"
    assert override["DTSTART"].dt == date(2027, 3, 20) and override["DTEND"].dt == date(2027, 3, 21)


async def test_occurrences_said_in_words(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale))
    added = json.loads(await h.ok(
        "calendar_add", title="钢琴课", when="下周四下午5点", repeat="每周四", duration="45m"
    ))["added"]
    today = datetime.now(SHANGHAI).date()
    next_thursday = today - timedelta(days=today.weekday()) + timedelta(days=7 + 3)
    assert added["start"] == f"{next_thursday.isoformat()}T17:00:00+08:00"
    # "下下周四的钢琴课取消"
    cancelled = await h.ok("calendar_delete", event_id=added["id"], occurrence="下下周四")
    assert (next_thursday + timedelta(days=7)).isoformat() in cancelled
    # "把下周四下午的钢琴课改到周五下午四点": 下午 is 15:00, the lesson that afternoon is meant; and the
    # Friday is the one after that Thursday
    moved = json.loads(await h.ok(
        "calendar_move", event_id=added["id"], occurrence="下周四下午", when="周五下午四点"
    ))
    friday = next_thursday + timedelta(days=1)
    assert moved["to"] == f"{friday.isoformat()}T16:00:00+08:00"
    window = await listed(h, next_thursday.isoformat(), (next_thursday + timedelta(days=21)).isoformat())
    assert [s for _, s, _ in window] == [
        f"{friday.isoformat()}T16:00:00+08:00",
        f"{(next_thursday + timedelta(days=14)).isoformat()}T17:00:00+08:00",
        f"{(next_thursday + timedelta(days=21)).isoformat()}T17:00:00+08:00",
    ]
    assert window[0][2] == f"{friday.isoformat()}T16:45:00+08:00"
    # "从下下下周起不上了": this and all following
    third = (next_thursday + timedelta(days=14)).isoformat()
    ended = await h.ok("calendar_delete", event_id=added["id"], occurrence=third, following=True)
    assert "from" in ended and third in ended
    window = await listed(h, next_thursday.isoformat(), (next_thursday + timedelta(days=60)).isoformat())
    assert [s[:10] for _, s, _ in window] == [friday.isoformat()]
    master, overrides = stored(radicale, url, added["id"].split("/", 1)[1])
    until = master["RRULE"]["UNTIL"][0]
    assert "COUNT" not in master["RRULE"] and until.utcoffset() == timedelta(0)
    assert until < datetime.fromisoformat(f"{third}T17:00:00+08:00") and len(overrides) == 1


async def test_what_does_not_fit_is_refused_with_a_clear_question(harness: Any, radicale: Radicale) -> None:
    one_off = BERLIN_SERIES.replace("RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=4\n", "").replace(UID, "once@test")
    url = new_calendar(radicale, BERLIN_SERIES, one_off)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale))
    before = await listed(h, "2027-03-20", "2027-04-30")

    missing = await h.fails("calendar_delete", event_id=f"home/{UID}", occurrence="2027-04-06")
    assert "no occurrence on 2027-04-06" in missing
    for near in ("2027-03-29 Mon 15:00", "2027-04-05 Mon 15:00", "2027-04-12 Mon 15:00"):
        assert near in missing, missing
    wrong_time = await h.fails("calendar_move", event_id=f"home/{UID}", occurrence="2027-04-05T16:00:00+08:00",
                               when="2027-04-06T15:00:00+08:00")
    assert "2027-04-05 Mon 15:00" in wrong_time
    ended = await h.fails("calendar_delete", event_id=f"home/{UID}", occurrence="2028-01-03")
    assert "ended" in ended
    alone = await h.fails("calendar_delete", event_id="home/once@test", occurrence="2027-03-22")
    assert "does not repeat" in alone and "leave out occurrence" in alone
    for bad in ("2月30日", "2027-02-30", "banana"):
        message = await h.fails("calendar_delete", event_id=f"home/{UID}", occurrence=bad)
        assert "?" in message, message
    message = await h.fails("calendar_move", event_id=f"home/{UID}", occurrence="2027-03-29", when="2月30日")
    assert "?" in message
    split = await h.fails("calendar_move", event_id=f"home/{UID}", occurrence="2027-03-29",
                          when="2027-03-30T15:00:00+08:00", following=True)
    assert "split the series" in split
    assert "following needs occurrence" in await h.fails("calendar_delete", event_id=f"home/{UID}", following=True)
    assert await listed(h, "2027-03-20", "2027-04-30") == before
    master, overrides = stored(radicale, url, UID)
    assert exdates(master) == [] and overrides == [] and "SEQUENCE" not in master


async def test_an_edit_by_another_client_in_between_is_not_overwritten(
    harness: Any, radicale: Radicale, monkeypatch: pytest.MonkeyPatch
) -> None:
    from homeagent_core.builtin.calendar_sources import CalDAVCalendar, StoredEvent

    url = new_calendar(radicale, BERLIN_SERIES)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale))
    read = CalDAVCalendar.read
    edits = itertools.count(1)

    def read_then_someone_else_edits(self: CalDAVCalendar, uid: str) -> StoredEvent:
        result = read(self, uid)
        with client(radicale) as c:  # another app renames the lesson right after HomeAgent read it
            obj = c.calendar(url=url).get_event_by_uid(uid)
            text = re.sub(r"SUMMARY:[^\r\n]*", f"SUMMARY:Piano (edit {next(edits)})", str(obj.data))
            obj.save(raw_data=text.encode())
        return result

    monkeypatch.setattr(CalDAVCalendar, "read", read_then_someone_else_edits)
    for tool, more in (
        ("calendar_delete", {}),
        ("calendar_move", {"when": "2027-03-30T15:00:00+08:00"}),
        ("calendar_move", {"when": "2027-03-30T15:00:00+08:00", "occurrence": ""}),  # the whole series
    ):
        message = await h.fails(tool, event_id=f"home/{UID}", **{"occurrence": "2027-03-29", **more})
        assert "changed by someone else" in message and "nothing was changed" in message, message
    monkeypatch.setattr(CalDAVCalendar, "read", read)
    master, overrides = stored(radicale, url, UID)
    assert str(master["SUMMARY"]) == "Piano (edit 3)" and exdates(master) == [] and overrides == []
    # read again, the cancel goes through and keeps their change
    await h.ok("calendar_delete", event_id=f"home/{UID}", occurrence="2027-03-29")
    master, _ = stored(radicale, url, UID)
    assert str(master["SUMMARY"]) == "Piano (edit 3)" and len(exdates(master)) == 1
