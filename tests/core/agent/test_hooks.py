"""One test per hook the kernel calls: every stage with a sync and an async impl, and the
three registration hooks."""

from __future__ import annotations

import threading
from typing import Any

from homeagent_core.agent.kernel import KernelSettings
from homeagent_sdk import hookimpl
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.types import Caps, ChannelDef, StageContext, ToolCall, ToolDef, ToolResult

MakeKernel = Any


def _echo_tool_plugin() -> object:
    class Tools:
        name = "tools"

        @hookimpl
        def register_tools(self, registry: Any) -> None:
            def echo(text: str) -> str:
                """Echo the text back."""
                return f"echo:{text}"

            registry.add(echo)

    return Tools()


async def test_hook_on_input(make_kernel: MakeKernel) -> None:
    seen: dict[str, Any] = {}

    class SyncImpl:
        name = "sync_impl"

        @hookimpl
        def on_input(self, ctx: StageContext) -> None:
            seen["sync_thread"] = threading.current_thread().name
            ctx.raw_message = ctx.raw_message + "（已改写）"

    class AsyncImpl:
        name = "async_impl"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            seen["async_source"] = ctx.source
            ctx.extra["async_saw"] = ctx.channel

    model = FakeModel(["好的"])
    kernel = await make_kernel(SyncImpl(), AsyncImpl(), model=model)
    reply = await kernel.ask("你好", channel="webui")
    assert reply == "好的"
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": "你好（已改写）"}
    assert seen["async_source"] == "library"
    assert seen["sync_thread"] != threading.main_thread().name  # sync impls run off the loop


async def test_hook_pre_action(make_kernel: MakeKernel) -> None:
    class SyncImpl:
        name = "sync_impl"

        @hookimpl
        def pre_action(self, ctx: StageContext) -> None:
            ctx.context_msgs.append({"role": "system", "content": "外部数据：今天下雨"})

    class AsyncImpl:
        name = "async_impl"

        @hookimpl
        async def pre_action(self, ctx: StageContext) -> None:
            ctx.extra["weather"] = "rain"

    model = FakeModel(["带伞"])
    kernel = await make_kernel(SyncImpl(), AsyncImpl(), model=model)
    await kernel.ask("要带伞吗")
    messages = model.requests[0]["messages"]
    assert {"role": "system", "content": "外部数据：今天下雨"} in messages
    assert messages[0]["role"] == "system"


async def test_hook_post_action(make_kernel: MakeKernel) -> None:
    counts: list[int] = []

    class SyncImpl:
        name = "sync_impl"

        @hookimpl
        def post_action(self, ctx: StageContext) -> None:
            ctx.llm_text = ctx.llm_text.replace("密码", "**")

    class AsyncImpl:
        name = "async_impl"

        @hookimpl
        async def post_action(self, ctx: StageContext) -> None:
            counts.append(len(ctx.tool_calls))

    model = FakeModel([ToolCallReply("echo", {"text": "x"}), "你的密码是 123"])
    kernel = await make_kernel(_echo_tool_plugin(), SyncImpl(), AsyncImpl(), model=model)
    reply = await kernel.ask("我的密码？")
    assert reply == "你的**是 123"
    assert counts == [1, 0]  # once per model round


async def test_hook_before_toolcall(make_kernel: MakeKernel) -> None:
    audited: list[str] = []

    class SyncImpl:
        name = "sync_impl"

        @hookimpl
        def before_toolcall(self, ctx: StageContext, call: ToolCall) -> None:
            call.arguments["text"] = call.arguments["text"].upper()

    class AsyncImpl:
        name = "async_impl"

        @hookimpl
        async def before_toolcall(self, ctx: StageContext, call: ToolCall) -> None:
            audited.append(f"{call.plugin}.{call.name}")

    model = FakeModel([ToolCallReply("echo", {"text": "abc"}), "done"])
    kernel = await make_kernel(_echo_tool_plugin(), SyncImpl(), AsyncImpl(), model=model)
    reply = await kernel.ask("echo abc")
    assert [r.result for r in reply.tool_results] == ["echo:ABC"]
    assert audited == ["tools.echo"]


async def test_hook_after_toolcall(make_kernel: MakeKernel) -> None:
    outcomes: list[bool] = []

    class SyncImpl:
        name = "sync_impl"

        @hookimpl
        def after_toolcall(self, ctx: StageContext, call: ToolCall, result: ToolResult) -> None:
            result.result = result.result.replace("secret", "[redacted]")

    class AsyncImpl:
        name = "async_impl"

        @hookimpl
        async def after_toolcall(self, ctx: StageContext, call: ToolCall, result: ToolResult) -> None:
            outcomes.append(result.success)

    model = FakeModel([ToolCallReply("echo", {"text": "secret"}), "done"])
    kernel = await make_kernel(_echo_tool_plugin(), SyncImpl(), AsyncImpl(), model=model)
    await kernel.ask("echo")
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"] == "echo:[redacted]"
    assert outcomes == [True]


async def test_hook_before_output(make_kernel: MakeKernel) -> None:
    channels: list[str] = []

    class SyncImpl:
        name = "sync_impl"

        @hookimpl
        def before_output(self, ctx: StageContext) -> None:
            ctx.final_text = f"【{ctx.final_text}】"

    class AsyncImpl:
        name = "async_impl"

        @hookimpl
        async def before_output(self, ctx: StageContext) -> None:
            channels.append(ctx.channel)

    kernel = await make_kernel(SyncImpl(), AsyncImpl(), model=FakeModel(["答复"]))
    reply = await kernel.ask("问", channel="cli")
    assert reply == "【答复】"
    assert channels == ["cli"]


async def test_hook_after_output(make_kernel: MakeKernel) -> None:
    stats: list[tuple[str, str]] = []

    class SyncImpl:
        name = "sync_impl"

        @hookimpl
        def after_output(self, ctx: StageContext) -> None:
            stats.append(("sync", ctx.final_text))

    class AsyncImpl:
        name = "async_impl"

        @hookimpl
        async def after_output(self, ctx: StageContext) -> None:
            stats.append(("async", ctx.final_text))

    kernel = await make_kernel(SyncImpl(), AsyncImpl(), model=FakeModel(["fin"]))
    await kernel.ask("q")
    assert sorted(stats) == [("async", "fin"), ("sync", "fin")]


async def test_hook_register_tools(make_kernel: MakeKernel) -> None:
    class Plugin:
        name = "calc"

        @hookimpl
        def register_tools(self, registry: Any) -> None:
            async def add(a: int, b: int) -> int:
                """Add two integers."""
                return a + b

            registry.add(add, parallel_safe=True)
            registry.add(
                ToolDef(
                    name="negate",
                    description="Negate a number",
                    parameters={"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
                    handler=lambda x: -x,
                )
            )

    model = FakeModel([ToolCallReply(calls=[("add", {"a": 2, "b": 3}), ("negate", {"x": 4})]), "5 and -4"])
    kernel = await make_kernel(Plugin(), model=model)
    assert kernel.tools.get("add").plugin == "calc"  # type: ignore[union-attr]
    assert kernel.host.info("calc").contributions["tools"] == ["add", "negate"]  # type: ignore[union-attr]
    reply = await kernel.ask("compute")
    assert [r.result for r in reply.tool_results] == ["5", "-4"]
    sent = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert {"add", "negate", "get_plugin_tools", "spawn_child", "child_result"} <= sent


async def test_hook_register_input_channels(make_kernel: MakeKernel) -> None:
    class Plugin:
        name = "http_in"

        @hookimpl
        def register_input_channels(self, registry: Any) -> None:
            registry.add(ChannelDef(name="http", description="HTTP API", no_memory=True, recall_policy="none"))

    recorded: list[str] = []

    class Memory:
        async def record_input(self, ctx: StageContext, item: Any) -> None:
            recorded.append(f"{item.channel}:{item.no_memory}:{item.recall_policy}")

        async def recall(self, ctx: StageContext) -> list[str]:
            return []

        async def record_output(self, ctx: StageContext) -> None:
            return None

        async def prune(self, ctx: StageContext) -> None:
            return None

    kernel = await make_kernel(Plugin(), memory=Memory())
    await kernel.ask("ping", channel="http")
    await kernel.ask("ping", channel="webui")
    assert recorded == ["http:True:none", "webui:False:"]
    assert [c["name"] for c in kernel.channels.describe_inputs()] == ["http"]


async def test_hook_register_output_channels(make_kernel: MakeKernel) -> None:
    sent: list[tuple[str, dict[str, Any], str]] = []

    class Plugin:
        name = "qq"

        @hookimpl
        def register_output_channels(self, registry: Any) -> None:
            async def send(payload: str, meta: dict[str, Any], type: str) -> None:
                sent.append((payload, meta, type))

            registry.add(
                ChannelDef(name="qq", description="QQ 私聊", caps=int(Caps.TEXT | Caps.IMAGE), sync=False, send=send)
            )

    model = FakeModel(
        [ToolCallReply("output_send__qq", {"payload": "晚安", "type": "text", "meta": '{"to": "123"}'}), "已发送"]
    )
    kernel = await make_kernel(Plugin(), model=model, settings=KernelSettings())
    assert "output_send__qq" in kernel.tools and "output_send__qq_help" in kernel.tools
    reply = await kernel.ask("给 123 发晚安")
    assert sent == [("晚安", {"to": "123"}, "text")]
    assert reply.tool_results[0].success
    assert kernel.tools.get("output_send__qq").plugin == "qq"  # type: ignore[union-attr]
