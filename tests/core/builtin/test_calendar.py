"""The ``calendar`` built-in against a real Radicale server on loopback (htpasswd login)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from zoneinfo import ZoneInfo

import caldav
import pytest
from radicale_server import Radicale, failing_server, silent_server, start_radicale

CALENDAR = "homeagent_core.builtin.calendar"
REMINDERS = "homeagent_core.builtin.reminders"
SHANGHAI = ZoneInfo("Asia/Shanghai")
_names = itertools.count(1)

# A weekly 09:00 Berlin meeting over the 2027 spring daylight-saving change (28 March), written
# by another calendar app, and a one-off.
BERLIN_SERIES = """BEGIN:VCALENDAR
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
UID:standup-berlin@test
DTSTAMP:20261201T000000Z
DTSTART;TZID=Europe/Berlin:20270322T090000
DTEND;TZID=Europe/Berlin:20270322T093000
RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=4
SUMMARY:Standup
END:VEVENT
END:VCALENDAR
"""


@pytest.fixture(scope="module")
def radicale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Radicale]:
    with start_radicale(tmp_path_factory.mktemp("radicale")) as server:
        yield server


def new_calendar(server: Radicale) -> str:
    """A fresh calendar collection on the server (one per test); its URL."""
    name = f"cal{next(_names)}"
    with caldav.DAVClient(url=server.url, username=server.user, password=server.password) as client:
        client.principal().make_calendar(name=name, cal_id=name)
    return server.calendar_url(name)


def settings(url: str, server: Radicale, *, password: str | None = None, **more: Any) -> dict[str, Any]:
    return {
        "plugin.reminders.timezone": "Asia/Shanghai",
        "plugin.calendar.calendars": json.dumps([{"name": "home", "url": url, "user": server.user}]),
        "plugin.calendar.passwords": json.dumps({"home": server.password if password is None else password}),
        "plugin.calendar.remind_before": 0,
        **more,
    }


def server_events(server: Radicale, url: str) -> list[str]:
    with caldav.DAVClient(url=server.url, username=server.user, password=server.password) as client:
        return [str(e.data) for e in client.calendar(url=url).events()]


async def test_add_list_move_and_delete_against_radicale(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale))
    added = json.loads(
        await h.ok("calendar_add", title="家长会", when="明天下午3点", duration="1h30m", location="学校")
    )
    event = added["added"]
    tomorrow = (datetime.now(SHANGHAI) + timedelta(days=1)).date()
    assert event["start"] == f"{tomorrow.isoformat()}T15:00:00+08:00"
    assert event["end"] == f"{tomorrow.isoformat()}T16:30:00+08:00"
    (stored,) = server_events(radicale, url)
    assert "SUMMARY:家长会" in stored and "LOCATION:学校" in stored and "TZID=Asia/Shanghai" in stored

    schema = h.tools.get("calendar_list").parameters
    assert list(schema["properties"]) == ["from", "to"] and "from_" not in json.dumps(schema)
    listed = json.loads(await h.ok("calendar_list", **{"from": "明天"}))
    assert listed["zone"] == "Asia/Shanghai"
    assert listed["from"] == f"{tomorrow.isoformat()}T00:00:00+08:00"
    assert [(e["title"], e["start"], e.get("location")) for e in listed["events"]] == [
        ("家长会", event["start"], "学校")
    ]
    assert json.loads(await h.ok("calendar_list", **{"from": "后天"}))["events"] == []

    moved = json.loads(await h.ok("calendar_move", event_id=event["id"], when="后天上午10点"))
    assert moved["to"].endswith("T10:00:00+08:00")
    (after,) = json.loads(await h.ok("calendar_list", **{"from": "后天"}))["events"]
    assert after["start"] == moved["to"] and after["end"].endswith("T11:30:00+08:00")
    assert json.loads(await h.ok("calendar_list", **{"from": "明天"}))["events"] == []

    assert (await h.ok("calendar_delete", event_id=event["id"])).endswith("deleted")
    assert server_events(radicale, url) == []
    missing = await h.fails("calendar_delete", event_id=event["id"])
    assert "calendar 'home'" in missing


async def test_a_series_made_in_berlin_reads_right_in_shanghai_across_daylight_saving(
    harness: Any, radicale: Radicale
) -> None:
    url = new_calendar(radicale)
    with caldav.DAVClient(url=radicale.url, username=radicale.user, password=radicale.password) as client:
        client.calendar(url=url).add_event(BERLIN_SERIES)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale))
    listed = json.loads(await h.ok("calendar_list", **{"from": "2027-03-20", "to": "2027-04-30"}))
    starts = [(e["title"], e["start"]) for e in listed["events"]]
    assert starts == [
        ("Standup", "2027-03-22T16:00:00+08:00"),  # CET, UTC+1
        ("Standup", "2027-03-29T15:00:00+08:00"),  # CEST from 28 March, UTC+2
        ("Standup", "2027-04-05T15:00:00+08:00"),
        ("Standup", "2027-04-12T15:00:00+08:00"),  # COUNT=4
    ]
    assert all(e["repeat"].startswith("FREQ=WEEKLY") for e in listed["events"])


async def test_a_repeat_added_in_berlin_keeps_its_local_time(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    berlin = {"plugin.reminders.timezone": "Europe/Berlin"}
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale, **berlin))
    added = json.loads(await h.ok("calendar_add", title="Swim", when="2027-03-22T09:00:00", repeat="每周一"))
    assert added["added"]["start"] == "2027-03-22T09:00:00+01:00"
    stored = server_events(radicale, url)[0]
    assert "RRULE:FREQ=WEEKLY;" in stored and "BYDAY=MO" in stored and "TZID=Europe/Berlin:20270322T090000" in stored
    h.config.set("plugin.reminders.timezone", "Asia/Shanghai")
    listed = json.loads(await h.ok("calendar_list", **{"from": "2027-03-22", "to": "2027-03-29"}))
    assert [e["start"] for e in listed["events"]] == ["2027-03-22T16:00:00+08:00", "2027-03-29T15:00:00+08:00"]


async def test_unreadable_times_ask_back_and_change_nothing(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale))
    for when in ("下下下周八", "2月30日", "banana"):
        message = await h.fails("calendar_add", title="x", when=when)
        assert "?" in message or "？" in message, message
    assert "duration" in await h.fails("calendar_add", title="x", when="明天下午3点", duration="forever")
    assert "invalid event id" in await h.fails("calendar_move", event_id="nonsense", when="明天")
    assert server_events(radicale, url) == []


async def test_a_wrong_password_is_named_and_nothing_is_stored(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale, password="wrong"))
    message = await h.fails("calendar_add", title="x", when="明天下午3点")
    assert "401" in message and "plugin.calendar.passwords" in message
    assert "wrong" not in message
    assert "401" in await h.fails("calendar_list")
    assert server_events(radicale, url) == []


async def test_a_server_error_and_a_silent_server_give_clear_messages(harness: Any, radicale: Radicale) -> None:
    with failing_server() as broken, silent_server() as silent:
        h = await harness(
            [REMINDERS, CALENDAR],
            {
                "plugin.reminders.timezone": "Asia/Shanghai",
                "plugin.calendar.calendars": json.dumps(
                    [{"name": "broken", "url": broken + "/cal/"}, {"name": "silent", "url": silent + "/cal/"}]
                ),
                "plugin.calendar.timeout": 1,
            },
        )
        started = time.monotonic()
        message = await h.fails("calendar_list")
        assert "'broken'" in message and "500" in message
        assert "'silent'" in message and ("did not answer" in message or "timed out" in message)
        assert time.monotonic() - started < 15
        silent_add = await h.fails("calendar_add", title="x", when="明天下午3点", calendar="silent")
        assert "did not answer" in silent_add and "nothing was changed" in silent_add.lower()
        # the daemon is fine: other tools still run
        assert "set" in await h.ok("reminder_set", when="明天早上7点", text="still here")


async def test_one_failing_calendar_does_not_hide_the_others(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    with failing_server() as broken:
        h = await harness(
            [REMINDERS, CALENDAR],
            {
                **settings(url, radicale),
                "plugin.calendar.calendars": json.dumps(
                    [{"name": "home", "url": url, "user": radicale.user}, {"name": "broken", "url": broken + "/x/"}]
                ),
            },
        )
        await h.ok("calendar_add", title="Dentist", when="明天上午10点")
        listed = json.loads(await h.ok("calendar_list", **{"from": "明天"}))
        assert [e["title"] for e in listed["events"]] == ["Dentist"]
        (problem,) = listed["unavailable"]
        assert "'broken'" in problem and "500" in problem


class _Ics(BaseHTTPRequestHandler):
    body = BERLIN_SERIES.encode()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/calendar")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


async def test_an_ics_subscription_on_a_private_host_needs_the_owners_allowance(harness: Any) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        h = await harness(
            [REMINDERS, CALENDAR],
            {
                "plugin.reminders.timezone": "Asia/Shanghai",
                "plugin.calendar.subscriptions": json.dumps(
                    [{"name": "team", "url": f"http://127.0.0.1:{port}/team.ics"}]
                ),
            },
        )
        refused = await h.fails("calendar_list", **{"from": "2027-03-20", "to": "2027-04-01"})
        assert "'team'" in refused and f"127.0.0.1:{port}" in refused and "plugin.calendar.allow_private" in refused
        h.config.set("plugin.calendar.allow_private", f"127.0.0.1:{port}")
        listed = json.loads(await h.ok("calendar_list", **{"from": "2027-03-20", "to": "2027-04-01"}))
        assert [(e["start"], e["read_only"]) for e in listed["events"]] == [
            ("2027-03-22T16:00:00+08:00", True),
            ("2027-03-29T15:00:00+08:00", True),
        ]
        assert "read-only" in await h.fails("calendar_delete", event_id=listed["events"][0]["id"])
    finally:
        server.shutdown()
        server.server_close()


async def test_an_event_starting_soon_gets_a_reminder_before_it(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale, **{"plugin.calendar.remind_before": 60}))
    start = (datetime.now(SHANGHAI) + timedelta(seconds=62)).replace(microsecond=0)
    await h.ok("calendar_add", title="接孩子", when=start.isoformat())
    (fired,) = await h.wait_event("raw_input", lambda e: "接孩子" in e.data["text"], timeout=20)
    assert fired.data["text"] == f"[提醒] 日程「接孩子」{start.strftime('%H:%M')} 开始"
    # a second pass sets no second reminder for the same event
    assert await h.plugin("calendar").sync_reminders() == 0


async def test_a_moved_event_moves_its_reminder(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    hourly = {"plugin.calendar.remind_before": 3600, "plugin.calendar.sync_interval": 3600}
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale, **hourly))
    start = (datetime.now(SHANGHAI) + timedelta(minutes=65)).replace(microsecond=0)
    event = json.loads(await h.ok("calendar_add", title="Piano", when=start.isoformat()))["added"]
    await h.plugin("calendar").sync_reminders()
    (before,) = json.loads(await h.ok("reminder_list"))["reminders"]
    assert datetime.fromisoformat(before["due"]) == start - timedelta(hours=1)
    later = start + timedelta(minutes=10)
    await h.ok("calendar_move", event_id=event["id"], when=later.isoformat())
    await h.plugin("calendar").sync_reminders()
    (after,) = json.loads(await h.ok("reminder_list"))["reminders"]
    assert datetime.fromisoformat(after["due"]) == later - timedelta(hours=1)


async def test_children_may_read_the_calendar_but_not_write_it(harness: Any) -> None:
    from homeagent_core.agent.policy import Decision, ToolPolicy, is_guarded
    from homeagent_sdk import Principal

    h = await harness([REMINDERS, CALENDAR])
    people = h.app.people
    people.add("kid", "child")
    people.add("mum", "adult")
    policy = ToolPolicy(people)
    kid, mum = Principal(person="kid", role="child"), Principal(person="mum", role="adult")
    guest = Principal(role="guest")
    assert policy.decide(kid, "calendar_list") is Decision.ALLOW
    for tool in ("calendar_add", "calendar_move", "calendar_delete"):
        assert policy.decide(kid, tool) is Decision.DENY
        assert policy.decide(mum, tool) is Decision.ALLOW
        assert policy.decide(guest, tool) is Decision.DENY
    assert policy.decide(guest, "calendar_list") is Decision.DENY
    assert is_guarded("plugin.calendar.passwords") and is_guarded("plugin.calendar.calendars")


async def test_the_password_is_a_secret_setting(harness: Any) -> None:
    h = await harness([REMINDERS, CALENDAR])
    definition = h.config.definition("plugin.calendar.passwords")
    assert definition.secret



async def test_whats_on_tomorrow_is_answered_from_the_calendar(harness: Any, radicale: Radicale) -> None:
    from homeagent_sdk._fake_model import FakeModel, ToolCallReply

    url = new_calendar(radicale)
    model = FakeModel([ToolCallReply("calendar_list", {"from": "明天"}), "明天下午三点有家长会"], default="好的")
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale), model=model)
    await h.ok("calendar_add", title="家长会", when="明天下午3点")
    await h.ok("calendar_add", title="Not tomorrow", when="后天上午9点")
    answer = await h.kernel.io_for("cli_socket").inject_input_sync("明天家里有什么安排", "cli:term-1")
    assert "家长会" in str(answer)
    (result,) = [e for e in h.events if e.name == "tool_call" and e.data.get("name") == "calendar_list"
                 and e.data.get("result")]
    listed = json.loads(result.data["result"])
    tomorrow = (datetime.now(SHANGHAI) + timedelta(days=1)).date().isoformat()
    assert [(e["title"], e["start"]) for e in listed["events"]] == [("家长会", f"{tomorrow}T15:00:00+08:00")]


async def test_a_week_and_a_time_of_day_are_windows(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale))
    listed = json.loads(await h.ok("calendar_list", **{"from": "下周"}))
    start, end = datetime.fromisoformat(listed["from"]), datetime.fromisoformat(listed["to"])
    assert start.weekday() == 0 and start.hour == 0 and end - start == timedelta(days=7)
    assert start.date() > datetime.now(SHANGHAI).date()
    evening = json.loads(await h.ok("calendar_list", **{"from": "明天晚上"}))
    assert evening["from"].endswith("T20:00:00+08:00") and evening["to"].endswith("T00:00:00+08:00")


async def test_a_one_off_in_a_daylight_saving_gap_is_refused(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale, **{"plugin.reminders.timezone": "Europe/Berlin"}))
    message = await h.fails("calendar_add", title="x", when="2027年3月28日凌晨2点30分")
    assert "?" in message or "？" in message, message
    assert server_events(radicale, url) == []


async def test_a_subscription_that_stops_answering_shows_its_last_good_copy(harness: Any) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    h = await harness(
        [REMINDERS, CALENDAR],
        {
            "plugin.reminders.timezone": "Asia/Shanghai",
            "plugin.calendar.subscriptions": json.dumps([{"name": "team", "url": f"http://127.0.0.1:{port}/t.ics"}]),
            "plugin.calendar.allow_private": f"127.0.0.1:{port}",
            "plugin.calendar.ics_refresh": 0,
            "plugin.calendar.timeout": 2,
        },
    )
    window = {"from": "2027-03-20", "to": "2027-04-01"}
    first = json.loads(await h.ok("calendar_list", **window))
    server.shutdown()
    server.server_close()
    again = json.loads(await h.ok("calendar_list", **window))
    assert again["events"] == first["events"] and len(first["events"]) == 2


async def test_messages_never_carry_a_urls_token_or_login(harness: Any, radicale: Radicale) -> None:
    url = new_calendar(radicale)
    with failing_server() as broken:
        port = broken.rsplit(":", 1)[1]
        secret_ics = f"{broken}/private/TOKEN-5f3a9c/basic.ics"
        with_login = url.replace("http://", "http://alice:pw-in-url@")
        h = await harness(
            [REMINDERS, CALENDAR],
            {
                "plugin.reminders.timezone": "Asia/Shanghai",
                "plugin.calendar.calendars": json.dumps([{"name": "home", "url": with_login}]),
                "plugin.calendar.passwords": json.dumps({"home": "wrong"}),
                "plugin.calendar.subscriptions": json.dumps([{"name": "school", "url": secret_ics}]),
                "plugin.calendar.allow_private": f"127.0.0.1:{port}",
            },
        )
        message = await h.fails("calendar_list")
        assert "'home'" in message and "'school'" in message and "500" in message
        assert "TOKEN-5f3a9c" not in message and "pw-in-url" not in message and "wrong" not in message


async def test_a_skipped_and_a_moved_occurrence_of_a_series_are_read_as_such(
    harness: Any, radicale: Radicale
) -> None:
    url = new_calendar(radicale)
    rule = "RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=4\n"
    series = BERLIN_SERIES.replace(rule, rule + "EXDATE;TZID=Europe/Berlin:20270405T090000\n").replace(
        "END:VEVENT\n",
        "END:VEVENT\nBEGIN:VEVENT\nUID:standup-berlin@test\nDTSTAMP:20261201T000000Z\n"
        "RECURRENCE-ID;TZID=Europe/Berlin:20270329T090000\nDTSTART;TZID=Europe/Berlin:20270330T110000\n"
        "DTEND;TZID=Europe/Berlin:20270330T113000\nSUMMARY:Standup (moved)\nEND:VEVENT\n",
    )
    with caldav.DAVClient(url=radicale.url, username=radicale.user, password=radicale.password) as client:
        client.calendar(url=url).add_event(series)
    h = await harness([REMINDERS, CALENDAR], settings(url, radicale))
    listed = json.loads(await h.ok("calendar_list", **{"from": "2027-03-20", "to": "2027-04-30"}))
    assert [(e["title"], e["start"]) for e in listed["events"]] == [
        ("Standup", "2027-03-22T16:00:00+08:00"),
        ("Standup (moved)", "2027-03-30T17:00:00+08:00"),
        ("Standup", "2027-04-12T15:00:00+08:00"),
    ]
