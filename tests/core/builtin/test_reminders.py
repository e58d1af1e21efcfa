from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from homeagent_core.builtin.reminders import DB_NAME, ReminderStore
from homeagent_sdk import Priority

REMINDERS = "homeagent_core.builtin.reminders"
SHANGHAI = {"plugin.reminders.timezone": "Asia/Shanghai"}
ISO_WITH_OFFSET = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d\d:\d\d"


async def _fired(h: Any, reminder_id: str, count: int = 1, timeout: float = 10.0) -> list[str]:
    """Wait (bounded) until ``reminder_id`` fired ``count`` times (its turn ended); the texts delivered."""
    async with asyncio.timeout(timeout):
        while len(texts := [t for i, t in h.plugin("reminders").fired if i == reminder_id]) < count:
            await asyncio.sleep(0.01)
    return texts


async def _pending(h: Any) -> list[dict[str, Any]]:
    listed = await h.ok("reminder_list")
    rows: list[dict[str, Any]] = json.loads(listed)["reminders"]
    return rows


def _move_due(data: Path, reminder_id: str, due: float) -> None:
    """What time passing while the daemon was down does to a stored reminder."""
    store = ReminderStore(data / "plugin_data" / "reminders" / DB_NAME)
    assert store.set_due(reminder_id, due)
    store.close()


async def test_a_reminder_fires_marked_as_a_reminder_and_is_answered(harness: Any) -> None:
    h = await harness([REMINDERS], SHANGHAI)
    submitted: list[Any] = []
    submit = h.kernel.submit

    def recording_submit(item: Any) -> Any:
        submitted.append(item)
        return submit(item)

    h.kernel.submit = recording_submit
    reply = await h.ok("reminder_set", when="in 1 second", text="take the tea out")
    assert re.fullmatch(rf"reminder_1 set: next due {ISO_WITH_OFFSET}", reply), reply
    assert reply.endswith("+08:00")
    (fired,) = await h.wait_event("raw_input", lambda e: e.data["channel"] == "reminder")
    assert fired.data["text"] == "reminder: take the tea out" and fired.data["interrupt"]
    (item,) = submitted
    assert item.level == Priority.L3.rank and item.no_memory
    await h.wait_event("agent_output", lambda e: e.data.get("channel") == "reminder")
    assert await _fired(h, "reminder_1") == ["reminder: take the tea out"]
    assert await _pending(h) == []


async def test_a_reminder_asked_for_in_a_conversation_keeps_who_asked_and_comes_back_there(harness: Any) -> None:
    from homeagent_sdk._fake_model import FakeModel, ToolCallReply

    model = FakeModel([ToolCallReply("reminder_set", {"when": "1秒后", "text": "关火"}), "好的"], default="该关火了")
    h = await harness([REMINDERS], SHANGHAI, model=model)
    answer = await h.kernel.io_for("cli_socket").inject_input_sync("一秒后提醒我关火", "cli:term-7")
    assert "好的" in str(answer)
    (row,) = await _pending(h)
    owner = h.app.people.owner()
    assert (row["channel"], row["person"]) == ("cli:term-7", owner.name)
    (fired,) = await h.wait_event("raw_input", lambda e: e.data["text"].startswith("[提醒]"))
    assert (fired.data["text"], fired.data["channel"]) == ("[提醒] 关火", "cli:term-7")
    await _fired(h, "reminder_1")
    assert await _pending(h) == []


async def test_chinese_text_is_marked_in_chinese(harness: Any) -> None:
    h = await harness([REMINDERS], SHANGHAI)
    await h.ok("reminder_set", when="1秒后", text="关火")
    (fired,) = await h.wait_event("raw_input", lambda e: e.data["channel"] == "reminder")
    assert fired.data["text"] == "[提醒] 关火"


async def test_what_people_say_is_stored_with_its_next_due_time_and_rule(harness: Any) -> None:
    h = await harness([REMINDERS], SHANGHAI)
    reply = await h.ok("reminder_set", when="每周一早上八点", text="倒垃圾")
    assert "repeats FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=0;BYSECOND=0" in reply
    due = datetime.fromisoformat(re.search(ISO_WITH_OFFSET, reply).group())  # type: ignore[union-attr]
    assert (due.weekday(), due.hour, due.minute, due.utcoffset()) == (0, 8, 0, ZoneInfo("Asia/Shanghai").utcoffset(due))
    separate = await h.ok("reminder_set", when="7点", text="vitamins", repeat="每个工作日")
    assert "BYDAY=MO,TU,WE,TH,FR;BYHOUR=7" in separate
    rows = await _pending(h)
    assert {r["text"] for r in rows} == {"倒垃圾", "vitamins"}
    assert all(r["zone"] == "Asia/Shanghai" and r["person"] == "" for r in rows)


async def test_unreadable_times_ask_back_and_store_nothing(harness: Any) -> None:
    h = await harness([REMINDERS], {"plugin.reminders.timezone": "Europe/Berlin"})
    assert "what time do you mean?" in await h.fails("reminder_set", when="下下下周八", text="x")
    assert "month 2 of" in await h.fails("reminder_set", when="2月30日", text="x")
    assert "what time do you mean?" in await h.fails("reminder_set", when="soon-ish", text="x")
    gap = await h.fails("reminder_set", when="2027-03-28 02:30", text="x")
    assert "does not exist in Europe/Berlin" in gap and "03:30" in gap
    assert "already passed" in await h.fails("reminder_set", when="2020-01-01T09:00:00+01:00", text="x")
    assert "text is empty" in await h.fails("reminder_set", when="tomorrow 9am", text="  ")
    assert "plugin.reminders.horizon" in await h.fails("reminder_set", when="2099-01-01T09:00:00+01:00", text="x")
    assert await _pending(h) == []


async def test_an_unknown_zone_setting_is_named(harness: Any) -> None:
    h = await harness([REMINDERS], {"plugin.reminders.timezone": "Mars/Olympus"})
    refused = await h.fails("reminder_set", when="tomorrow 9am", text="x")
    assert "unknown time zone 'Mars/Olympus' in plugin.reminders.timezone" in refused


async def test_list_cancel_and_snooze(harness: Any) -> None:
    h = await harness([REMINDERS], SHANGHAI)
    await h.ok("reminder_set", when="in 3 hours", text="call mum")
    await h.ok("reminder_set", when="in 1 hour", text="stretch")
    assert [r["text"] for r in await _pending(h)] == ["stretch", "call mum"]
    assert await h.ok("reminder_cancel", reminder_id="reminder_2") == "reminder_2 cancelled"
    assert "no pending reminder" in await h.fails("reminder_cancel", reminder_id="reminder_2")
    assert "invalid reminder id" in await h.fails("reminder_cancel", reminder_id="banana")
    before = time.time()
    snoozed = await h.ok("reminder_snooze", reminder_id="reminder_1", by="半小时")
    assert re.fullmatch(rf"reminder_1 snoozed: next due {ISO_WITH_OFFSET}", snoozed), snoozed
    (row,) = await _pending(h)
    assert 1790 <= datetime.fromisoformat(row["due"]).timestamp() - before <= 1810
    await h.ok("reminder_snooze", reminder_id="reminder_1", by="10m")
    (row,) = await _pending(h)
    assert 590 <= datetime.fromisoformat(row["due"]).timestamp() - before <= 610
    assert "what time do you mean?" in await h.fails("reminder_snooze", reminder_id="reminder_1", by="a while")


async def test_a_missed_one_off_fires_at_start_and_says_when_it_was_due(harness: Any, tmp_path: Path) -> None:
    data = tmp_path / "persist"
    first = await harness([REMINDERS], SHANGHAI, data=data)
    await first.ok("reminder_set", when="tomorrow 9am", text="dentist")
    await first.stop()
    due = time.time() - 3600  # the daemon was down when it came due
    _move_due(data, "reminder_1", due)

    second = await harness([REMINDERS], SHANGHAI, data=data)
    (text,) = await _fired(second, "reminder_1")
    stamp = datetime.fromtimestamp(due, ZoneInfo("Asia/Shanghai")).isoformat(timespec="minutes")
    assert text == f"reminder: dentist (was due {stamp})"
    assert await _pending(second) == []


async def test_a_repeating_one_missed_while_down_fires_and_is_rearmed_at_its_next_instant(
    harness: Any, tmp_path: Path
) -> None:
    data = tmp_path / "persist"
    first = await harness([REMINDERS], SHANGHAI, data=data)
    await first.ok("reminder_set", when="每天早上8点", text="吃药")
    await first.stop()
    _move_due(data, "reminder_1", time.time() - 7200)

    second = await harness([REMINDERS], SHANGHAI, data=data)
    (text,) = await _fired(second, "reminder_1")
    assert text.startswith("[提醒] 吃药（原定 ")
    await second.wait_event("agent_output", lambda e: e.data.get("channel") == "reminder")
    async with asyncio.timeout(10):
        while (rows := await _pending(second)) and datetime.fromisoformat(rows[0]["due"]).timestamp() < time.time():
            await asyncio.sleep(0.01)
    (row,) = rows
    due = datetime.fromisoformat(row["due"])
    assert row["id"] == "reminder_1" and row["repeat"].startswith("FREQ=DAILY")
    assert (due.hour, due.minute) == (8, 0) and 0 < due.timestamp() - time.time() <= 86400
    await second.stop()

    third = await harness([REMINDERS], SHANGHAI, data=data)
    assert [r["due"] for r in await _pending(third)] == [row["due"]]
    assert third.plugin("reminders").fired == []


async def test_a_repeating_one_fires_and_is_rearmed_at_its_next_instant(harness: Any) -> None:
    h = await harness([REMINDERS], SHANGHAI)
    first = (datetime.now(ZoneInfo("Asia/Shanghai")) + timedelta(seconds=2)).replace(microsecond=0)
    reply = await h.ok("reminder_set", when=first.isoformat(), text="stand up", repeat="every day")
    assert reply.startswith(f"reminder_1 set: next due {first.isoformat()}, repeats FREQ=DAILY;")
    assert await _fired(h, "reminder_1") == ["reminder: stand up"]
    async with asyncio.timeout(10):
        while (rows := await _pending(h)) and rows[0]["due"] == first.isoformat():
            await asyncio.sleep(0.01)
    (row,) = rows
    assert row["due"] == (first + timedelta(days=1)).isoformat()
    assert "reminder_1" in h.plugin("reminders")._tasks  # waiting for tomorrow


async def test_a_reminder_whose_turn_had_not_ended_fires_again_after_the_next_start(
    harness: Any, tmp_path: Path
) -> None:
    from homeagent_sdk._fake_model import FakeModel, FakeReply

    data = tmp_path / "persist"
    first = await harness([REMINDERS], SHANGHAI, data=data, model=FakeModel(default=FakeReply(hang=True)))
    await first.ok("reminder_set", when="in 1 second", text="bread")
    await first.model.wait_started()
    await first.stop()
    assert first.plugin("reminders").fired == []

    second = await harness([REMINDERS], SHANGHAI, data=data)
    (text,) = await _fired(second, "reminder_1")
    assert text.startswith("reminder: bread")
    assert await _pending(second) == []


async def test_pending_reminders_are_capped_per_conversation(harness: Any) -> None:
    h = await harness([REMINDERS], {**SHANGHAI, "plugin.reminders.max_pending": 2})
    await h.ok("reminder_set", when="in 1 hour", text="a")
    await h.ok("reminder_set", when="in 2 hours", text="b")
    refused = await h.fails("reminder_set", when="in 3 hours", text="c")
    assert "already has 2 pending reminders (plugin.reminders.max_pending)" in refused


async def test_the_timer_plugin_still_works_beside_it(harness: Any) -> None:
    h = await harness(["homeagent_core.builtin.timer", REMINDERS], SHANGHAI)
    assert (await h.ok("timer_set", duration="1h", message="x")).startswith("timer_1 set")
    assert (await h.ok("reminder_set", when="in 1 hour", text="y")).startswith("reminder_1 set")


async def test_without_a_zone_setting_the_systems_zone_is_the_households(harness: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    h = await harness([REMINDERS])
    new_york = ZoneInfo("America/New_York")
    day = (datetime.now(new_york) + timedelta(days=30)).date()
    reply = await h.ok("reminder_set", when=f"{day.isoformat()} 09:00", text="x")
    expected = datetime(day.year, day.month, day.day, 9, tzinfo=new_york).isoformat()
    assert reply == f"reminder_1 set: next due {expected}" and expected[-6:] in ("-05:00", "-04:00")
    (row,) = await _pending(h)
    assert row["zone"] == "America/New_York"
