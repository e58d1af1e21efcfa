"""Interrupts against a running turn, idle interrupts, stop, and the IO facade's level clamp."""

from __future__ import annotations

import asyncio
from typing import Any

from homeagent_core.agent.kernel import KernelSettings
from homeagent_core.agent.scheduler import InputItem
from homeagent_sdk._fake_model import FakeModel, FakeReply
from homeagent_sdk.types import InjectOptions, Priority, StageContext

MakeKernel = Any


def system_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "system"][1:]


async def test_an_interrupt_cancels_the_model_call_and_is_injected_before_the_next(make_kernel: MakeKernel) -> None:
    model = FakeModel([FakeReply(hang=True), "好的，先处理提醒"])
    kernel = await make_kernel(model=model)
    pending = asyncio.ensure_future(kernel.ask("写一篇长文"))
    await model.wait_started(1)
    timer = kernel.io_for("timer")
    await timer.inject_interrupt("喝水时间到了", "timer", InjectOptions(priority=Priority.L2))
    reply = await asyncio.wait_for(pending, 5)
    assert reply == "好的，先处理提醒" and reply.interrupted
    assert model.cancelled == 1
    assert system_texts(model.requests[1]) == ["[打断消息][来源:timer][输出通道:timer] 喝水时间到了"]


async def test_two_interrupts_racing_a_turn_one_preempts_and_the_other_waits(make_kernel: MakeKernel) -> None:
    model = FakeModel([FakeReply(hang=True), "处理了第一个", "处理了第二个"])
    kernel = await make_kernel(model=model, settings=KernelSettings(preempt_cooldown=2.0))
    main = asyncio.ensure_future(kernel.ask("长任务"))
    await model.wait_started(1)
    a, b = kernel.io_for("a"), kernel.io_for("b")
    second_reply = asyncio.ensure_future(
        b.inject_input_sync("第二个打断", "qq", InjectOptions(priority=Priority.L3), timeout=5)
    )
    await a.inject_interrupt("第一个打断", "timer", InjectOptions(priority=Priority.L2))
    assert await asyncio.wait_for(main, 5) == "处理了第一个"
    # the second came inside the 2 s cooldown: it ran as its own (interrupt) turn afterwards
    assert await asyncio.wait_for(second_reply, 5) == "处理了第二个"
    assert system_texts(model.requests[1]) == ["[打断消息][来源:a][输出通道:timer] 第一个打断"]
    assert model.requests[2]["messages"][-1] == {"role": "user", "content": "第二个打断"}
    assert model.cancelled == 1


async def test_racing_interrupts_of_rising_level_both_land_in_the_next_call(make_kernel: MakeKernel) -> None:
    model = FakeModel([FakeReply(hang=True), "两个都看到了"])
    kernel = await make_kernel(model=model, settings=KernelSettings(preempt_cooldown=0.0))
    main = asyncio.ensure_future(kernel.ask("长任务"))
    await model.wait_started(1)
    await asyncio.gather(
        kernel.io_for("x").inject_interrupt("一", "timer", InjectOptions(priority=Priority.L1)),
        kernel.io_for("y").inject_interrupt("二", "timer", InjectOptions(priority=Priority.L2)),
    )
    assert await asyncio.wait_for(main, 5) == "两个都看到了"
    assert system_texts(model.requests[1]) == [
        "[打断消息][来源:x][输出通道:timer] 一",
        "[打断消息][来源:y][输出通道:timer] 二",
    ]


async def test_an_interrupt_while_idle_starts_a_normal_turn_that_is_never_recorded(make_kernel: MakeKernel) -> None:
    recorded: list[str] = []

    class Memory:
        async def record_input(self, ctx: StageContext, item: InputItem) -> None:
            recorded.append(f"in:{ctx.raw_message}")

        async def recall(self, ctx: StageContext) -> list[str]:
            return []

        async def record_output(self, ctx: StageContext) -> None:
            recorded.append(f"out:{ctx.final_text}")

        async def prune(self, ctx: StageContext) -> None:
            return None

    model = FakeModel(["记得喝水哦"])
    kernel = await make_kernel(model=model, memory=Memory())
    reply = await kernel.io_for("timer").inject_input_sync(
        "timer: 喝水", "timer", InjectOptions(priority=Priority.L3, no_memory=True), timeout=5
    )
    assert reply == "记得喝水哦" and reply.interrupted
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": "timer: 喝水"}
    assert recorded == []
    assert len(kernel.timeline) == 0


async def test_interrupts_injected_into_a_turn_are_not_recorded_either(make_kernel: MakeKernel) -> None:
    model = FakeModel([FakeReply(hang=True), "ok"])
    kernel = await make_kernel(model=model)
    main = asyncio.ensure_future(kernel.ask("主要输入"))
    await model.wait_started(1)
    await kernel.io.inject_interrupt("打断内容", "timer")
    await asyncio.wait_for(main, 5)
    assert [e.content for e in kernel.timeline.events()] == ["主要输入", "ok"]


async def test_stop_cancels_the_running_call_and_drops_what_was_queued(make_kernel: MakeKernel) -> None:
    model = FakeModel([FakeReply(hang=True)], default="later input answered")
    kernel = await make_kernel(model=model)
    running = asyncio.ensure_future(kernel.ask("长任务"))
    await model.wait_started(1)
    queued = [asyncio.ensure_future(kernel.io_for(f"s{n}").inject_input_sync(f"排队{n}", "cli")) for n in range(2)]
    await asyncio.sleep(0)  # let them reach the queue
    assert len(kernel.scheduler) == 2
    assert kernel.stop() == 2
    first = await asyncio.wait_for(running, 5)
    assert first == "" and first.stopped
    results = await asyncio.wait_for(asyncio.gather(*queued), 5)
    assert [(str(r), r.stopped) for r in results] == [("", True), ("", True)]
    assert await kernel.ask("之后的输入") == "later input answered"
    assert model.calls == 2  # the hung one and the later one; the dropped two never reached the model


async def test_external_plugins_are_clamped_to_l3(make_kernel: MakeKernel) -> None:
    model = FakeModel([FakeReply(hang=True), "saw the built-in alarm"], default="ok")
    kernel = await make_kernel(model=model, settings=KernelSettings(preempt_cooldown=0.0))
    running = asyncio.ensure_future(
        kernel.io_for("alarm").inject_input_sync("L3 任务", "timer", InjectOptions(priority=Priority.L3), timeout=5)
    )
    await model.wait_started(1)
    external = kernel.io_for("proc_plugin", external=True)
    await external.inject_interrupt("外部 L4", "qq", InjectOptions(priority=Priority.L4))
    assert [i.level for i in kernel.scheduler.waiting()] == [3]  # clamped: not above the running L3
    await kernel.io_for("webui").inject_interrupt("内置 L4", "webui", InjectOptions(priority=Priority.L4))
    assert await asyncio.wait_for(running, 5) == "saw the built-in alarm"
    assert system_texts(model.requests[1]) == ["[打断消息][来源:webui][输出通道:webui] 内置 L4"]
