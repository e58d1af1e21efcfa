"""One turn end to end: tool loop, short-circuits, limits, memory calls, events, failures."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from homeagent_core.agent.kernel import KernelSettings
from homeagent_core.agent.scheduler import InputItem
from homeagent_sdk import hookimpl
from homeagent_sdk._fake_model import FakeModel, FakeReply, ToolCallReply
from homeagent_sdk.errors import ProviderError
from homeagent_sdk.types import StageContext, ToolCall

MakeKernel = Any


class Tools:
    name = "tools"

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        def lookup(key: str) -> str:
            """Look a key up."""
            self.calls.append(key)
            return f"value-of-{key}"

        registry.add(lookup)


async def test_a_plain_turn_sends_system_prompt_history_and_input(make_kernel: MakeKernel) -> None:
    model = FakeModel(["第一次回答", "第二次回答"])
    kernel = await make_kernel(model=model)
    assert await kernel.ask("第一句") == "第一次回答"
    assert await kernel.ask("第二句") == "第二次回答"
    messages = model.requests[1]["messages"]
    assert messages[0]["role"] == "system"
    assert messages[1:] == [
        {"role": "user", "content": "第一句"},
        {"role": "assistant", "content": "第一次回答"},
        {"role": "user", "content": "第二句"},
    ]
    assert model.requests[1]["stream"] is True


async def test_tool_loop_runs_calls_and_feeds_results_back(make_kernel: MakeKernel) -> None:
    tools = Tools()
    model = FakeModel(
        [ToolCallReply("lookup", {"key": "a"}, text="查一下"), ToolCallReply("lookup", {"key": "b"}), "a 和 b 都查到了"]
    )
    kernel = await make_kernel(tools, model=model)
    reply = await kernel.ask("查 a 和 b")
    assert reply == "a 和 b 都查到了"
    assert tools.calls == ["a", "b"]
    last = model.requests[2]["messages"]
    assert last[-4]["role"] == "assistant" and last[-4]["content"] == "查一下"
    assert last[-4]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"key": "a"}'}
    assert last[-3] == {"role": "tool", "tool_call_id": last[-4]["tool_calls"][0]["id"], "content": "value-of-a"}


async def test_max_tool_turns_reached_ends_with_one_answer_without_tools(make_kernel: MakeKernel) -> None:
    tools = Tools()

    def responder(request: dict[str, Any]) -> Any:
        if "tools" not in request:
            return "根据已有结果：完成"
        return ToolCallReply("lookup", {"key": str(len(request["messages"]))})

    model = FakeModel(responder=responder)
    kernel = await make_kernel(tools, model=model, settings=KernelSettings(max_tool_turns=3))
    reply = await kernel.ask("一直查")
    assert reply == "根据已有结果：完成"
    assert len(tools.calls) == 3
    assert len(model.requests) == 4
    assert "已达到工具调用上限（3 轮）" in model.requests[-1]["messages"][-1]["content"]


async def test_a_rejected_tool_call_is_reported_to_the_model_and_the_loop_goes_on(make_kernel: MakeKernel) -> None:
    tools = Tools()

    class Guard:
        name = "guard"

        @hookimpl
        def before_toolcall(self, ctx: StageContext, call: ToolCall) -> str | None:
            return "禁止查询 secret" if call.arguments.get("key") == "secret" else None

    model = FakeModel([ToolCallReply(calls=[("lookup", {"key": "secret"}), ("lookup", {"key": "ok"})]), "只查到 ok"])
    kernel = await make_kernel(tools, Guard(), model=model)
    reply = await kernel.ask("查 secret 和 ok")
    assert reply == "只查到 ok"
    assert tools.calls == ["ok"]
    tool_messages = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "工具调用被拒绝：禁止查询 secret"
    assert tool_messages[1]["content"] == "value-of-ok"


async def test_when_every_call_is_rejected_the_loop_exits(make_kernel: MakeKernel) -> None:
    class DenyAll:
        name = "deny"

        @hookimpl
        async def before_toolcall(self, ctx: StageContext, call: ToolCall) -> str:
            return "维护中"

    model = FakeModel([ToolCallReply("lookup", {"key": "x"}, text="我去查")])
    kernel = await make_kernel(Tools(), DenyAll(), model=model)
    reply = await kernel.ask("查 x")
    assert reply == "我去查"
    assert len(model.requests) == 1
    assert reply.tool_results[0].result == "工具调用被拒绝：维护中"


async def test_on_input_response_short_circuits_to_after_output(make_kernel: MakeKernel) -> None:
    stages: list[str] = []

    class Canned:
        name = "canned"

        @hookimpl
        def on_input(self, ctx: StageContext) -> None:
            if ctx.raw_message == "/ping":
                ctx.response = "pong"

        @hookimpl
        def pre_action(self, ctx: StageContext) -> None:
            stages.append("pre_action")

        @hookimpl
        def before_output(self, ctx: StageContext) -> None:
            stages.append("before_output")

        @hookimpl
        def after_output(self, ctx: StageContext) -> None:
            stages.append(f"after_output:{ctx.final_text}")

    model = FakeModel()
    kernel = await make_kernel(Canned(), model=model)
    assert await kernel.ask("/ping") == "pong"
    assert model.requests == []
    assert stages == ["after_output:pong"]


async def test_on_input_drop_discards_the_input_silently(make_kernel: MakeKernel) -> None:
    class Blacklist:
        name = "blacklist"

        @hookimpl
        def on_input(self, ctx: StageContext) -> None:
            ctx.drop = ctx.source == "library" and "spam" in ctx.raw_message

    model = FakeModel(default="ok")
    kernel = await make_kernel(Blacklist(), model=model)
    reply = await kernel.ask("buy spam now")
    assert reply == "" and reply.dropped
    assert model.requests == []
    assert len(kernel.timeline) == 0


async def test_post_action_response_and_dropped_calls(make_kernel: MakeKernel) -> None:
    tools = Tools()

    class Redirect:
        name = "redirect"

        @hookimpl
        def post_action(self, ctx: StageContext) -> None:
            ctx.tool_calls = [c for c in ctx.tool_calls if c.arguments.get("key") != "drop-me"]
            if "STOP" in ctx.llm_text:
                ctx.response = "已转人工"

    model = FakeModel([ToolCallReply(calls=[("lookup", {"key": "drop-me"}), ("lookup", {"key": "keep"})]), "STOP here"])
    kernel = await make_kernel(tools, Redirect(), model=model)
    assert await kernel.ask("go") == "已转人工"
    assert tools.calls == ["keep"]


async def test_an_exception_in_a_turn_is_logged_and_the_loop_goes_on(
    make_kernel: MakeKernel, caplog: pytest.LogCaptureFixture
) -> None:
    model = FakeModel([ProviderError("all sources down"), "recovered"])
    kernel = await make_kernel(model=model)
    caplog.set_level(logging.ERROR)
    with pytest.raises(ProviderError, match="all sources down"):
        await kernel.ask("first")
    assert await kernel.ask("second") == "recovered"
    record = next(r for r in caplog.records if "failed" in r.getMessage())
    assert record.exc_info is not None and record.exc_info[0] is ProviderError
    assert kernel.loop.failures == 1


async def test_a_stage_handler_that_raises_does_not_stop_the_turn(make_kernel: MakeKernel) -> None:
    class Broken:
        name = "broken"

        @hookimpl
        async def pre_action(self, ctx: StageContext) -> None:
            raise RuntimeError("plugin bug")

    kernel = await make_kernel(Broken(), model=FakeModel(["fine"]))
    reply = await kernel.ask("hi")
    assert reply == "fine"
    assert reply.errors == ["pre_action: plugin broken: RuntimeError: plugin bug"]


async def test_a_hung_stage_handler_cannot_hang_the_turn(make_kernel: MakeKernel) -> None:
    class Hangs:
        name = "hangs"

        @hookimpl
        async def before_output(self, ctx: StageContext) -> None:
            await asyncio.get_running_loop().create_future()

    kernel = await make_kernel(Hangs(), model=FakeModel(["fine"]), settings=KernelSettings(stage_timeout=0.2))
    reply = await asyncio.wait_for(kernel.ask("hi"), 5)
    assert reply == "fine"
    assert "did not finish within 0.2 s" in reply.errors[0]


async def test_a_tool_that_times_out_in_a_turn_is_reported_to_the_model(make_kernel: MakeKernel) -> None:
    class Slow:
        name = "slow"

        @hookimpl
        def register_tools(self, registry: Any) -> None:
            async def wait_forever() -> str:
                """Never returns."""
                await asyncio.get_running_loop().create_future()
                return ""

            registry.add(wait_forever)

    model = FakeModel([ToolCallReply("wait_forever"), "工具超时了"])
    kernel = await make_kernel(Slow(), model=model, settings=KernelSettings(tool_timeout=0.2))
    reply = await kernel.ask("等")
    assert reply == "工具超时了"
    assert model.requests[1]["messages"][-1]["content"] == "工具 wait_forever 执行超时（0.2秒），已取消"


async def test_invalid_tool_arguments_reach_the_model_as_an_error(make_kernel: MakeKernel) -> None:
    tools = Tools()
    model = FakeModel([ToolCallReply("lookup", {"kee": "typo"}), ToolCallReply("lookup", {"key": "fixed"}), "ok"])
    kernel = await make_kernel(tools, model=model)
    assert await kernel.ask("x") == "ok"
    error = model.requests[1]["messages"][-1]["content"]
    assert "missing required argument 'key'" in error and "unexpected argument 'kee'" in error
    assert tools.calls == ["fixed"]


class RecordingMemory:
    """A TurnMemory that records the calls and keeps the input durable in a list."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.durable: list[str] = []

    async def record_input(self, ctx: StageContext, item: InputItem) -> None:
        await asyncio.sleep(0)
        self.durable.append(ctx.raw_message)
        self.log.append(f"record_input:{ctx.raw_message}")

    async def prune(self, ctx: StageContext) -> None:
        self.log.append("prune")

    async def recall(self, ctx: StageContext) -> list[str]:
        self.log.append("recall")
        return ["【记忆索引】 关联 1 个记忆实体：小王(Person)"]

    async def record_output(self, ctx: StageContext) -> None:
        self.log.append(f"record_output:{ctx.final_text}")


async def test_memory_is_called_in_order_and_the_input_is_durable_before_the_model_call(
    make_kernel: MakeKernel,
) -> None:
    memory = RecordingMemory()
    seen_durable: list[list[str]] = []

    def responder(request: dict[str, Any]) -> str:
        seen_durable.append(list(memory.durable))
        return "你好小王"

    model = FakeModel(responder=responder)
    kernel = await make_kernel(model=model, memory=memory)
    await kernel.ask("我叫小王")
    assert seen_durable == [["我叫小王"]]
    assert memory.log == ["record_input:我叫小王", "prune", "recall", "record_output:你好小王"]
    assert "【记忆索引】 关联 1 个记忆实体：小王(Person)" in model.requests[0]["messages"][0]["content"]


async def test_a_memory_with_its_own_timeline_replaces_the_kernels(make_kernel: MakeKernel) -> None:
    class WithTimeline(RecordingMemory):
        async def timeline(self, ctx: StageContext, budget: int) -> list[dict[str, Any]]:
            return [{"role": "user", "content": "很久以前的话"}]

    model = FakeModel(["ok"])
    kernel = await make_kernel(model=model, memory=WithTimeline())
    await kernel.ask("现在")
    assert model.requests[0]["messages"][1:] == [
        {"role": "user", "content": "很久以前的话"},
        {"role": "user", "content": "现在"},
    ]
    assert len(kernel.timeline) == 0


async def test_events_are_published_for_each_round_tool_call_and_output(make_kernel: MakeKernel, events: Any) -> None:
    model = FakeModel(
        [
            ToolCallReply("lookup", {"key": "k"}, reasoning="先查"),
            FakeReply(content="结果是 value", reasoning="想好了"),
        ],
        chunk_size=3,
    )
    kernel = await make_kernel(Tools(), model=model, events=events)
    await kernel.ask("查 k", channel="webui")
    await kernel.bus.drain()
    names = events.names()
    assert (
        names.index("raw_input")
        < names.index("agent_llm_chain")
        < names.index("tool_call")
        < names.index("agent_output")
    )
    chains = events.named("agent_llm_chain")
    assert [c["round"] for c in chains] == [1, 2]
    assert chains[0]["tool_calls"][0]["name"] == "lookup" and chains[0]["reasoning_content"] == "先查"
    assert chains[1]["content"] == "结果是 value" and chains[1]["usage"]["total"] > 0
    assert "".join(d["content"] for d in events.named("content_delta")) == "结果是 value"
    assert "".join(d["reasoning_content"] for d in events.named("reasoning_delta")) == "先查想好了"
    (call,) = events.named("tool_call")
    assert (call["name"], call["plugin"], call["success"], call["result"]) == ("lookup", "tools", True, "value-of-k")
    (output,) = events.named("agent_output")
    assert (output["content"], output["channel"]) == ("结果是 value", "webui")


async def test_a_provider_reset_becomes_a_reset_content_delta(make_kernel: MakeKernel, events: Any) -> None:
    kernel = await make_kernel(model=FakeModel([FakeReply(content="完整的回答", reset_after=2)]), events=events)
    assert await kernel.ask("x") == "完整的回答"
    await kernel.bus.drain()
    deltas = events.named("content_delta")
    assert {"content": "", "reset": True, "channel": "library", "person": "", "thread": "main"} in deltas


async def test_a_non_streaming_provider_works_too(make_kernel: MakeKernel, events: Any) -> None:
    model = FakeModel([ToolCallReply("lookup", {"key": "z"}), "done"])
    kernel = await make_kernel(Tools(), model=model, settings=KernelSettings(stream=False), events=events)
    assert await kernel.ask("x") == "done"
    assert model.requests[0]["stream"] is False
    await kernel.bus.drain()
    assert [d["content"] for d in events.named("content_delta")] == ["done"]


async def test_media_inputs_reach_the_model_as_content_blocks(make_kernel: MakeKernel) -> None:
    from homeagent_sdk.types import MediaAttachment

    model = FakeModel(["一只猫"])
    kernel = await make_kernel(model=model)
    await kernel.io.inject_media(
        "这是什么", [MediaAttachment(mime="image/png", data=b"\x89PNG", name="cat.png")], "webui"
    )
    await model.wait_started(1)
    content = model.requests[0]["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "这是什么"}
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")


async def test_a_turn_runs_on_its_declared_dependencies_alone(make_kernel: Any) -> None:
    """A turn reaches the kernel only through TurnHost: a host holding just those members runs one."""
    import types

    from homeagent_core.agent.turn import Turn
    from homeagent_core.agent.turn_host import TurnHost

    class Echo:
        name = "echo"

        @hookimpl
        def register_tools(self, registry: Any) -> None:
            def echo(text: str) -> str:
                """Say it back."""
                return text

            registry.add(echo)

    model = FakeModel([ToolCallReply("echo", {"text": "hi"}), "done"])
    kernel = await make_kernel(Echo(), model=model)
    members = [*TurnHost.__annotations__, "modalities"]
    narrow = types.SimpleNamespace(**{name: getattr(kernel, name) for name in members})
    reply = await Turn(narrow, kernel.make_item("hello", "cli", source="test")).run()
    assert reply == "done"
    (result,) = reply.tool_results
    assert result.success and result.result == "hi"
