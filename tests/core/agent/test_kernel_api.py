"""The kernel's library surface: ask, stream, de-dup, backpressure, self-inputs, lifecycle."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from homeagent_core.agent import InputQueueFull, KernelSettings
from homeagent_core.agent.loop import AgentClosed
from homeagent_sdk import errors, hookimpl
from homeagent_sdk._fake_model import FakeModel, FakeReply, ToolCallReply
from homeagent_sdk.errors import ConfigValueError, UsageError
from homeagent_sdk.types import InjectOptions

MakeKernel = Any


async def test_ask_returns_a_reply_whose_str_is_the_text(make_kernel: MakeKernel) -> None:
    kernel = await make_kernel(model=FakeModel([FakeReply(content="答案", reasoning="想", usage={"total": 7})]))
    reply = await kernel.ask("问题")
    assert str(reply) == "答案" and reply.text == "答案"
    assert reply.usage == {"total": 7} and reply.reasoning_content == "想"
    assert reply.to_dict()["content"] == "答案"


async def test_stream_yields_deltas_that_add_up_to_the_reply(make_kernel: MakeKernel) -> None:
    model = FakeModel(
        [ToolCallReply("get_plugin_tools", {"plugin": "kernel"}, text="我看看。"), "一二三四五六七八九十"], chunk_size=3
    )
    kernel = await make_kernel(model=model)
    deltas = [d async for d in kernel.stream("数到十")]
    assert "".join(deltas) == "我看看。一二三四五六七八九十"
    assert len(deltas) > 3


async def test_stream_does_not_repeat_text_after_a_provider_reset(make_kernel: MakeKernel) -> None:
    kernel = await make_kernel(model=FakeModel([FakeReply(content="hello world", reset_after=5)], chunk_size=4))
    assert "".join([d async for d in kernel.stream("hi")]) == "hello world"


async def test_stream_of_a_short_circuited_turn_yields_the_reply(make_kernel: MakeKernel) -> None:
    class Canned:
        name = "canned"

        @hookimpl
        def on_input(self, ctx: Any) -> None:
            ctx.response = "canned answer"

    kernel = await make_kernel(Canned())
    assert [d async for d in kernel.stream("x")] == ["canned answer"]


async def test_stream_raises_what_the_turn_raised(make_kernel: MakeKernel) -> None:
    kernel = await make_kernel(model=FakeModel([RuntimeError("model exploded")]))
    with pytest.raises(RuntimeError, match="model exploded"):
        async for _ in kernel.stream("x"):
            pass


async def test_a_person_repeating_themselves_is_asked_again_each_time(make_kernel: MakeKernel) -> None:
    model = FakeModel(["第一段", "第二段", "第三段", "第四段"])
    kernel = await make_kernel(model=model)
    cli = kernel.io_for("cli")
    first = await cli.inject_input_sync("继续", "cli", timeout=5)
    second = await cli.inject_input_sync("继续", "cli", timeout=5)  # well within the 10 s window
    # and twice at once, the second while the first still waits
    third, fourth = await asyncio.gather(*(cli.inject_input_sync("继续", "cli", timeout=5) for _ in range(2)))
    replies = [first, second, third, fourth]
    assert [str(r) for r in replies] == ["第一段", "第二段", "第三段", "第四段"] and model.calls == 4
    assert not any(r.skipped for r in replies)


async def test_a_door_re_sending_a_message_id_gets_the_first_reply_whole_without_a_model_call(
    make_kernel: MakeKernel,
) -> None:
    class Flaky:
        name = "flaky"

        @hookimpl
        async def pre_action(self, ctx: Any) -> None:
            raise RuntimeError("plugin bug")

    model = FakeModel(
        [ToolCallReply("get_plugin_tools", {"plugin": "kernel"}), FakeReply(content="只回答一次", delay=0.05)],
        default="a second model call",
    )
    kernel = await make_kernel(Flaky(), model=model)
    qq = kernel.io_for("qq")
    sent = InjectOptions(message_id="qq-4711")
    first, second = await asyncio.gather(
        qq.inject_input_sync("在吗", "qq", sent, timeout=5), qq.inject_input_sync("在吗", "qq", sent, timeout=5)
    )
    third = await qq.inject_input_sync("在吗", "qq", sent, timeout=5)  # re-delivered right after: still the same
    assert (str(first), first.skipped) == ("只回答一次", False)
    assert model.calls == 2  # one tool round and the answer, for the first delivery only
    for again in (second, third):
        assert (str(again), again.skipped) == ("只回答一次", True)
        assert again.errors == first.errors == ["pre_action: plugin flaky: RuntimeError: plugin bug"]
        assert [r.name for r in again.tool_results] == [r.name for r in first.tool_results] == ["get_plugin_tools"]
        assert again.tool_results[0].success and again.answered_by == first.answered_by


async def test_a_full_queue_rejects_inputs_with_a_clear_error(make_kernel: MakeKernel) -> None:
    model = FakeModel([FakeReply(hang=True)], default="ok")
    kernel = await make_kernel(model=model, settings=KernelSettings(queue_capacity=2))
    await kernel.io.inject_text("running", "cli")
    await model.wait_started(1)
    await kernel.io.inject_text("one", "cli")
    await kernel.io.inject_text("two", "cli")
    with pytest.raises(InputQueueFull, match="2 inputs waiting"):
        await kernel.io.inject_text("three", "cli")
    assert kernel.status()["rejected_inputs"] == 1
    # The library API and plugins get the SDK's error, with a retry hint, before any turn starts.
    with pytest.raises(errors.InputQueueFull, match="retry in about 5 s") as caught:
        await kernel.ask("four", "library")
    assert caught.value.retry_after == 5.0
    with pytest.raises(errors.InputQueueFull):
        kernel.open_stream("five", "library")  # raised at once, not at the first iteration
    assert kernel.status()["rejected_inputs"] == 3


async def test_self_inputs_run_on_the_consolidation_channel_without_memory(
    make_kernel: MakeKernel, events: Any
) -> None:
    model = FakeModel(["合并：是"])
    kernel = await make_kernel(model=model, events=events)
    reply = await asyncio.wait_for(kernel.submit_self_input("小王 和 王小 是同一个人吗？"), 5)
    assert reply == "合并：是" and reply.channel == "_consolidation_"
    tools = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert "spawn_child" not in tools and not any(t.startswith("output_send__") for t in tools)
    assert len(kernel.timeline) == 0
    await kernel.bus.drain()
    assert events.named("agent_output") == []


async def test_inputs_before_start_and_bad_settings_are_refused_clearly(make_kernel: MakeKernel) -> None:
    kernel = await make_kernel(start=False)
    with pytest.raises(UsageError, match=r"await kernel\.start"):
        await kernel.ask("too early")
    with pytest.raises(ConfigValueError, match="max_tool_turns must be > 0"):
        KernelSettings(max_tool_turns=0)


async def test_aclose_fails_waiting_inputs_and_cancels_the_running_turn(make_kernel: MakeKernel) -> None:
    model = FakeModel([FakeReply(hang=True)], default="never")
    kernel = await make_kernel(model=model)
    running = asyncio.ensure_future(kernel.ask("running"))
    await model.wait_started(1)
    waiting = asyncio.ensure_future(kernel.io_for("other").inject_input_sync("waiting", "cli"))
    await asyncio.sleep(0)
    await kernel.aclose()
    for fut in (running, waiting):
        with pytest.raises(AgentClosed):
            await asyncio.wait_for(fut, 5)
    assert model.cancelled == 1


async def test_kernel_tools_describe_plugins_and_channels(make_kernel: MakeKernel) -> None:
    class Plugin:
        name = "notes"

        @hookimpl
        def register_tools(self, registry: Any) -> None:
            def note_add(text: str) -> str:
                """Add a note to the notebook."""
                return "ok"

            registry.add(note_add)

    model = FakeModel(
        [
            ToolCallReply(calls=[("get_plugin_tools", {"plugin": "notes"}), ("get_plugin_tools", {"plugin": "nope"})]),
            "done",
        ]
    )
    kernel = await make_kernel(Plugin(), model=model)
    reply = await kernel.ask("what can notes do")
    ok, bad = reply.tool_results
    assert '"name": "note_add"' in ok.result and '"required": ["text"]' in ok.result
    assert not bad.success and "unknown plugin 'nope'" in bad.result
    system = model.requests[0]["messages"][0]["content"]
    assert "- notes (1 tools): Add a note to the notebook." in system
    assert "get_plugin_tools(plugin)" in system


async def test_llm_source_tools_exist_when_the_provider_can_switch_sources(make_kernel: MakeKernel) -> None:
    class Switchable(FakeModel):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.active = "deepseek"

        def list_sources(self) -> list[dict[str, Any]]:
            return [
                {"name": "deepseek", "active": self.active == "deepseek"},
                {"name": "local", "active": self.active == "local"},
            ]

        async def set_source(self, name: str) -> None:
            if name not in ("deepseek", "local"):
                raise ValueError(f"unknown source {name!r}")
            self.active = name

    model = Switchable(
        [ToolCallReply("llm_list_sources"), ToolCallReply("llm_set_source", {"name": "local"}), "switched"]
    )
    kernel = await make_kernel(model=model)
    reply = await kernel.ask("switch to local")
    listed, switched = reply.tool_results
    assert '"name": "local"' in listed.result
    assert switched.result == "已切换到 LLM 源 local" and model.active == "local"
    plain = await make_kernel(model=FakeModel())
    assert "llm_set_source" not in plain.tools
