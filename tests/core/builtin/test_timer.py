from __future__ import annotations

import json
from pathlib import Path

from homeagent_sdk import Priority

TIMER = "homeagent_core.builtin.timer"


async def test_a_timer_fires_an_l3_no_memory_interrupt_on_the_timer_channel(harness):
    h = await harness([TIMER])
    submitted = []
    submit = h.kernel.submit
    h.kernel.submit = lambda item: submitted.append(item) or submit(item)
    reply = await h.ok("timer_set", duration="50ms", message="tea is ready")
    assert reply.startswith("timer_1 set")
    (fired,) = await h.wait_event("raw_input", lambda e: e.data["channel"] == "timer")
    assert fired.data["text"] == "timer: tea is ready" and fired.data["interrupt"] and fired.data["source"] == "timer"
    (item,) = submitted
    assert item.level == Priority.L3.rank and item.no_memory
    await _fired(h, "timer_1")
    assert json.loads(await h.ok("timer_list"))["timers"] == []
    assert h.channels.input("timer").no_memory


async def test_bad_durations_and_messages_are_refused(harness):
    h = await harness([TIMER])
    assert "negative" in await h.fails("timer_set", duration="-5m", message="x")
    assert "longer than zero" in await h.fails("timer_set", duration="0s", message="x")
    assert "maximum of 1d" in await h.fails("timer_set", duration="25h", message="x")
    assert "invalid duration" in await h.fails("timer_set", duration="soon", message="x")
    assert "message is empty" in await h.fails("timer_set", duration="5m", message="  ")
    assert "missing required argument 'message'" in await h.fails("timer_set", duration="5m")
    h.config.set("plugin.timer.max_duration", "10m")
    assert "maximum of 10m" in await h.fails("timer_set", duration="11m", message="x")


async def test_list_and_cancel(harness):
    h = await harness([TIMER])
    await h.ok("timer_set", duration="2h", message="call mum")
    await h.ok("timer_set", duration="1h", message="stretch")
    rows = json.loads(await h.ok("timer_list"))["timers"]
    assert [r["message"] for r in rows] == ["stretch", "call mum"]
    assert rows[0]["remaining"] in ("1h", "59m59s")
    assert await h.ok("timer_cancel", timer_id="timer_1") == "timer_1 cancelled"
    assert "no pending timer" in await h.fails("timer_cancel", timer_id="timer_1")
    assert "invalid timer id" in await h.fails("timer_cancel", timer_id="banana")
    assert [r["id"] for r in json.loads(await h.ok("timer_list"))["timers"]] == ["timer_2"]


async def test_timers_survive_a_restart_and_fire_exactly_once(harness, tmp_path: Path):
    data = tmp_path / "persist"
    first = await harness([TIMER], data=data)
    await first.ok("timer_set", duration="1s", message="water the plants")
    await first.stop()
    assert not [e for e in first.events if e.name == "raw_input"]

    second = await harness([TIMER], data=data)
    (fired,) = await second.wait_event("raw_input", lambda e: e.data["channel"] == "timer")
    assert fired.data["text"] == "timer: water the plants"
    await second.wait_event("agent_output", lambda e: e.data.get("channel") == "timer")
    await _fired(second, "timer_1")
    await second.stop()

    third = await harness([TIMER], data=data)
    assert json.loads(await third.ok("timer_list"))["timers"] == []
    assert (await third.ok("timer_set", duration="1h", message="next")).startswith("timer_2 set")


def test_timers_remember_their_chat_and_old_timer_files_still_open(tmp_path: Path):
    import sqlite3

    from homeagent_core.builtin.timer import TimerStore

    old = sqlite3.connect(tmp_path / "timers.db")
    old.execute(
        "CREATE TABLE timers (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "fire_at REAL NOT NULL, message TEXT NOT NULL, created_at REAL NOT NULL)"
    )
    old.execute("INSERT INTO timers (fire_at, message, created_at) VALUES (1, 'old one', 0)")
    old.commit()
    old.close()
    store = TimerStore(tmp_path / "timers.db")
    store.add(2, "from qq", "qq:private:12345")
    assert [(t.message, t.channel) for t in store.pending()] == [("old one", ""), ("from qq", "qq:private:12345")]
    store.close()


async def _fired(h, timer_id: str, timeout: float = 10.0) -> None:
    """Wait (bounded) until the timer plugin counted ``timer_id`` as fired (its turn ended)."""
    import asyncio

    async with asyncio.timeout(timeout):
        while timer_id not in h.plugin("timer").fired:
            await asyncio.sleep(0.01)


async def test_a_timer_whose_turn_had_not_ended_at_stop_fires_again_after_the_next_start(harness, tmp_path: Path):
    from homeagent_sdk._fake_model import FakeModel, FakeReply

    data = tmp_path / "persist"
    first = await harness([TIMER], data=data, model=FakeModel(default=FakeReply(hang=True)))
    await first.ok("timer_set", duration="50ms", message="take the bread out")
    await first.model.wait_started()  # the interrupt was accepted and its turn is asking the model
    await first.stop()  # the turn never ended
    assert first.plugin("timer").fired == []

    second = await harness([TIMER], data=data)
    (fired,) = await second.wait_event("raw_input", lambda e: e.data["channel"] == "timer")
    assert fired.data["text"] == "timer: take the bread out"
    await _fired(second, "timer_1")
    assert json.loads(await second.ok("timer_list"))["timers"] == []


async def test_pending_timers_are_capped_per_conversation_and_in_all(harness):
    h = await harness([TIMER], {"plugin.timer.max_pending": 3, "plugin.timer.max_pending_total": 5})
    for n in range(3):
        await h.ok("timer_set", duration="1h", message=f"t{n}")
    refused = await h.fails("timer_set", duration="1h", message="one too many")
    assert "already has 3 pending timers (plugin.timer.max_pending)" in refused
    h.config.set("plugin.timer.max_pending", 100)
    await h.ok("timer_set", duration="1h", message="t3")
    await h.ok("timer_set", duration="1h", message="t4")
    assert "5 timers are pending (plugin.timer.max_pending_total)" in await h.fails("timer_set", duration="1h",
                                                                                   message="t5")


async def test_the_list_comes_in_pages(harness):
    h = await harness([TIMER], {"plugin.timer.max_pending": 100})
    for n in range(25):
        await h.ok("timer_set", duration=f"{n + 1}m", message=f"t{n}")
    first = json.loads(await h.ok("timer_list"))
    assert (len(first["timers"]), first["total"], first["next_offset"]) == (20, 25, 20)
    second = json.loads(await h.ok("timer_list", offset=20))
    assert [t["message"] for t in second["timers"]] == ["t20", "t21", "t22", "t23", "t24"]
    assert second["next_offset"] is None
    assert "negative" in await h.fails("timer_list", offset=-1)


async def test_timers_due_together_enter_the_queue_one_at_a_time(harness):
    h = await harness([TIMER], {"plugin.timer.max_pending": 100})
    answered_before_each: list[int] = []
    submit = h.kernel.submit

    def counting_submit(item):
        if item.channel == "timer":
            answered = [e for e in h.events if e.name == "agent_output" and e.data.get("channel") == "timer"]
            answered_before_each.append(len(answered))
        return submit(item)

    h.kernel.submit = counting_submit
    for n in range(8):
        await h.ok("timer_set", duration="50ms", message=f"t{n}")
    for n in range(1, 9):
        await _fired(h, f"timer_{n}")
    # each fired timer waited for the one before it to be answered: never a flood in the queue
    assert answered_before_each == list(range(8))
