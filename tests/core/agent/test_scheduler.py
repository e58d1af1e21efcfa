"""Scheduler semantics: queued vs interrupts, preemption, cooldown, starvation, stop, de-dup,
backpressure."""

from __future__ import annotations

import asyncio
import logging

import pytest

from homeagent_core.agent.scheduler import InputItem, InputQueueFull, Scheduler


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeTurn:
    """Stands in for the running turn."""

    def __init__(self, level: int = 0, accepting: bool = True) -> None:
        self.level = level
        self.accepting = accepting
        self.injected: list[InputItem] = []
        self.stopped = False

    def accepts_interrupts(self, item: InputItem | None = None) -> bool:
        return self.accepting

    def interrupt(self, item: InputItem) -> None:
        self.injected.append(item)
        self.level = max(self.level, item.level)

    def stop(self) -> None:
        self.stopped = True


def item(text: str, level: int = 0, source: str = "user", channel: str = "cli", message_id: str = "") -> InputItem:
    return InputItem(text=text, channel=channel, source=source, level=level, message_id=message_id)


def drain(s: Scheduler) -> list[str]:
    out = []
    while (i := s.pop()) is not None:
        out.append(i.text)
    return out


def test_queued_inputs_run_first_in_first_out() -> None:
    s = Scheduler()
    for t in ("a", "b", "c"):
        s.submit(item(t))
    assert drain(s) == ["a", "b", "c"]


def test_interrupts_run_before_queued_inputs_highest_level_first() -> None:
    s = Scheduler()
    s.submit(item("queued"))
    s.submit(item("l1", 1, source="timer"))
    s.submit(item("l3", 3, source="alarm"))
    s.submit(item("l2", 2, source="qq"))
    assert drain(s) == ["l3", "l2", "l1", "queued"]


def test_strictly_higher_interrupt_preempts_the_running_turn() -> None:
    s = Scheduler(clock=Clock())
    s.running = turn = FakeTurn(level=0)
    s.submit(item("urgent", 2, source="timer"))
    assert [i.text for i in turn.injected] == ["urgent"]
    assert len(s) == 0


def test_equal_level_interrupt_does_not_preempt_and_waits_its_turn() -> None:
    clock = Clock()
    s = Scheduler(clock=clock)
    s.running = turn = FakeTurn(level=2)
    s.submit(item("same", 2, source="timer"))
    assert turn.injected == []
    assert drain(s) == ["same"]


def test_preemption_cooldown_queues_a_second_higher_interrupt() -> None:
    clock = Clock()
    s = Scheduler(clock=clock, cooldown=2.0)
    s.running = turn = FakeTurn(level=0)
    s.submit(item("first", 1, source="a"))
    s.submit(item("second", 3, source="b"))  # higher, but within 2 s of the first
    assert [i.text for i in turn.injected] == ["first"]
    assert drain(s) == ["second"]
    clock.now += 2.5
    s.submit(item("third", 4, source="c"))
    assert [i.text for i in turn.injected] == ["first", "third"]


def test_a_turn_past_its_tool_loop_does_not_take_interrupts() -> None:
    s = Scheduler(clock=Clock())
    s.running = turn = FakeTurn(level=0, accepting=False)
    s.submit(item("late", 2, source="timer"))
    assert turn.injected == []
    assert drain(s) == ["late"]


def test_inputs_passed_over_again_and_again_are_promoted_at_most_two_levels() -> None:
    s = Scheduler(promote_after=3)
    s.submit(item("queued"))
    picked = []
    for n in range(3):
        s.submit(item(f"l1-{n}", 1, source=f"b{n}"))
        picked.append(s.pop().text)  # type: ignore[union-attr]
    # passed over three times: the queued input now ranks like an L1 interrupt, and is older
    s.submit(item("l1-late", 1, source="c"))
    picked.append(s.pop().text)  # type: ignore[union-attr]
    assert picked == ["l1-0", "l1-1", "l1-2", "queued"]
    assert InputItem(text="x", channel="c", level=3, passed_over=99).effective_level(3) == 4
    assert InputItem(text="x", channel="c", level=0, passed_over=99).effective_level(3) == 2


def test_stop_short_circuits_only_what_was_queued_at_that_moment() -> None:
    s = Scheduler()
    s.running = turn = FakeTurn()
    s.submit(item("a"))
    s.submit(item("b", source="other"))
    assert s.stop() == 2
    assert turn.stopped
    s.submit(item("after", source="third"))
    picked = [s.pop() for _ in range(3)]
    assert [(i.text, i.stopped) for i in picked if i] == [("a", True), ("b", True), ("after", False)]


def test_repeated_stops_take_the_latest_snapshot_not_the_sum() -> None:
    s = Scheduler()
    s.submit(item("a"))
    s.stop()
    s.stop()
    s.submit(item("b", source="x"))
    picked = [s.pop(), s.pop()]
    assert [i.stopped for i in picked if i] == [True, False]


def test_full_ready_queue_rejects_with_backpressure_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    s = Scheduler(capacity=256)
    for n in range(256):
        s.submit(item(f"m{n}", source=f"s{n}"))
    caplog.set_level(logging.WARNING)
    for n in range(3):
        with pytest.raises(InputQueueFull, match="256 inputs waiting"):
            s.submit(item(f"over{n}", source="late"))
    assert s.rejected == 3
    assert sum("input queue full" in r.message for r in caplog.records) == 1
    s.pop()
    s.submit(item("fits again", source="late"))
    assert any("has room again" in r.message for r in caplog.records)


async def test_a_message_id_re_sent_by_the_same_source_is_answered_once() -> None:
    s = Scheduler()
    loop = asyncio.get_running_loop()
    first = item("同一句话", message_id="m1")
    first.reply = loop.create_future()
    s.submit(first)
    second = item("同一句话", message_id="m1")
    second.reply = loop.create_future()
    s.submit(second)
    assert second.skipped and len(s) == 1
    other_source = s.submit(item("同一句话", source="someone-else", message_id="m1"))
    other_message = s.submit(item("同一句话", message_id="m2"))
    assert not other_source.skipped and not other_message.skipped and len(s) == 3
    first.reply.set_result("答复")
    assert await asyncio.wait_for(second.reply, 1) == "答复"


def test_the_same_words_sent_again_without_a_message_id_are_a_new_request() -> None:
    clock = Clock()
    s = Scheduler(clock=clock, dedup_window=10.0)
    first = s.submit(item("继续"))
    again = s.submit(item("继续"))  # while the first still waits
    assert not again.skipped and len(s) == 2
    assert drain(s) == ["继续", "继续"]
    first.result = "done"
    s.finished(first)
    clock.now += 1
    assert not s.submit(item("继续")).skipped and len(s) == 1


def test_a_re_sent_message_id_after_the_dedup_window_runs_again() -> None:
    clock = Clock()
    s = Scheduler(clock=clock, dedup_window=10.0)
    first = s.submit(item("again", message_id="m1"))
    s.pop()
    first.result = "done"
    s.finished(first)
    clock.now += 5
    assert s.submit(item("again", message_id="m1")).skipped
    clock.now += 20
    assert not s.submit(item("again", message_id="m1")).skipped


def test_a_message_whose_turn_failed_is_not_deduplicated() -> None:
    s = Scheduler()
    first = s.submit(item("retry me", message_id="m1"))
    s.pop()
    first.result = RuntimeError("model down")
    s.finished(first)
    assert not s.submit(item("retry me", message_id="m1")).skipped


async def test_self_inputs_wait_until_no_user_input_is_ready() -> None:
    s = Scheduler()
    s.submit_self(InputItem(text="merge entities", channel="_consolidation_"))
    s.submit(item("user"))
    assert (await s.next()).text == "user"
    assert (await s.next()).text == "merge entities"


def test_one_door_fills_only_its_share_and_other_doors_keep_the_rest() -> None:
    s = Scheduler(capacity=4, door_share=3)

    def door(text: str) -> InputItem:
        return InputItem(text=text, channel="qq:group:1", source="onebot", shared_door=True)

    for n in range(3):
        s.submit(door(f"group {n}"))
    with pytest.raises(InputQueueFull, match=r"for 'onebot': it has 3 inputs waiting, the most one door may have"):
        s.submit(door("group 3"))
    s.submit(item("owner", source="webui"))  # the reserved place
    with pytest.raises(InputQueueFull, match="4 inputs waiting"):
        s.submit(item("owner again", source="webui"))
    assert s.rejected == 2
    s.submit(door("restored"), restored=True)  # acknowledged before a restart: kept
    assert len(s) == 5
    owner_only = Scheduler(capacity=4, door_share=3)
    for n in range(4):  # the owner's own doors may use the whole queue
        owner_only.submit(item(f"owner {n}", source="webui"))
    assert len(owner_only) == 4


async def test_settle_hands_the_outcome_to_the_waiter_and_ends_the_stream():
    from homeagent_core.stream import END_OF_STREAM

    loop = asyncio.get_running_loop()
    answered = InputItem("hi", "cli", reply=loop.create_future(), sink=asyncio.Queue())
    answered.settle("the reply")
    assert answered.result == "the reply" and await answered.reply == "the reply"
    assert answered.sink is not None and answered.sink.get_nowait() is END_OF_STREAM

    failed = InputItem("hi", "cli", reply=loop.create_future())
    failed.settle(RuntimeError("the turn failed"))
    with pytest.raises(RuntimeError, match="the turn failed"):
        await failed.reply
    failed.settle("too late")  # a settled reply is left as it is; only ``result`` records the last word
    assert failed.reply.exception() is not None and failed.result == "too late"

    InputItem("fire and forget", "timer").settle("nobody waits")  # no reply, no sink: nothing to hand over
