"""The plugin author's test kit: fixtures, recorder, model-request switch, in-memory proc harness."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from homeagent_core.providers import ProviderManager, SourceConfig
from homeagent_sdk import ChannelDef, StageContext, hookimpl
from homeagent_sdk.errors import PluginError, PluginValidationError, UsageError
from homeagent_sdk.testing import AgentHarness, HookRecorder, ModelRequestsForbidden, ToolCallReply

pytest_plugins = ["pytester"]


class Echo:
    name = "echo"

    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0

    def echo(self, text: str) -> str:
        """Echo a text back."""
        return f"echo: {text}"

    @hookimpl
    def register_tools(self, registry) -> None:
        registry.add(self.echo)

    @hookimpl
    async def startup(self, sdk) -> None:
        self.started += 1

    @hookimpl
    async def shutdown(self) -> None:
        self.stopped += 1


async def test_the_agent_fixture_answers_with_its_fake_model_and_records_the_request(agent: AgentHarness):
    agent.model.add("你好")

    reply = await agent.ask("hi")

    assert str(reply) == "你好"
    assert agent.model.requests[0]["messages"][-1] == {"role": "user", "content": "hi"}
    assert agent.started and agent.data_dir.is_dir()


async def test_the_agent_has_memory_on_and_no_builtins(agent: AgentHarness):
    await agent.start()
    await agent.memory.commit([{"subject": "小王", "relation": "住在", "object": "杭州"}])
    recalled = await agent.memory.recall(["小王"])
    assert [r["target_name"] for r in recalled["relations"]] == ["杭州"]
    assert [p["name"] for p in agent.app.status()["plugins"] if p["kind"] == "builtin"] == []


async def test_a_registered_plugin_takes_part_in_a_turn(agent: AgentHarness, register_plugin):
    plugin = Echo()
    assert register_plugin(plugin) == "echo"
    agent.model.add(ToolCallReply("echo", {"text": "ping"}), "done")

    assert str(await agent.ask("echo ping")) == "done"
    assert "echo: ping" in agent.model.requests[1]["messages"][-1]["content"]
    assert plugin.started == 1
    assert agent.plugin("echo")["status"] == "started"


async def test_register_plugin_rejects_a_class_with_the_hosts_message(register_plugin):
    with pytest.raises(PluginValidationError, match=r"register an instance instead — did you forget \(\)\?"):
        register_plugin(Echo)


async def test_register_plugin_after_start_points_to_add_plugin(agent: AgentHarness, register_plugin):
    await agent.start()
    with pytest.raises(UsageError, match=r"await agent.add_plugin\(plugin\)"):
        register_plugin(Echo())


async def test_add_plugin_live_runs_startup_and_remove_plugin_runs_shutdown(agent: AgentHarness):
    await agent.start()
    plugin = Echo()

    await agent.add_plugin(plugin)
    assert plugin.started == 1 and "echo" in agent.tool_names()
    assert (await agent.call_tool("echo", text="x")).result == "echo: x"

    await agent.remove_plugin("echo")
    assert plugin.stopped == 1 and "echo" not in agent.tool_names()


async def test_a_plugin_failing_to_start_fails_the_strict_agent_with_its_error(agent: AgentHarness, register_plugin):
    class Broken:
        name = "broken"

        @hookimpl
        def startup(self, sdk) -> None:
            raise RuntimeError("no API key configured")

    register_plugin(Broken())
    with pytest.raises(PluginError, match="plugin 'broken' failed: RuntimeError: no API key configured"):
        await agent.start()


async def test_a_lenient_agent_only_marks_the_failed_plugin(make_agent):
    class Broken:
        name = "broken"

        @hookimpl
        def startup(self, sdk) -> None:
            raise RuntimeError("boom")

    agent = make_agent(strict=False, memory=False)
    agent.register(Broken())
    agent.model.add("still here")
    assert str(await agent.ask("hi")) == "still here"
    assert agent.plugin("broken")["status"] == "failed"


async def test_hook_recorder_sees_each_stage_of_a_turn_in_order(
    agent: AgentHarness, register_plugin, hook_recorder: HookRecorder
):
    register_plugin(Echo())
    agent.model.add(ToolCallReply("echo", {"text": "a"}), "ok")

    await agent.ask("go")

    stages = [c.name for c in hook_recorder.getcalls(
        "on_input pre_action post_action before_toolcall after_toolcall before_output after_output"
    )]
    assert stages == [
        "on_input", "pre_action", "post_action", "before_toolcall", "after_toolcall",
        "post_action", "before_output", "after_output",
    ]
    assert hook_recorder.getcall("on_input").ctx.raw_message == "go"
    assert hook_recorder.getcall("before_toolcall").call.arguments == {"text": "a"}
    assert hook_recorder.getcall("startup").sdk.name == "hook_recorder"
    outputs = await hook_recorder.wait_for("on_event", where=lambda c: c.event.name == "agent_output")
    assert outputs
    with pytest.raises(AssertionError, match="expected exactly one call of post_action, got 2"):
        hook_recorder.getcall("post_action")


async def test_hook_recorder_wait_for_names_what_it_saw_when_it_times_out(hook_recorder: HookRecorder):
    with pytest.raises(TimeoutError, match="on_input was called 0 matching time"):
        await hook_recorder.wait_for("on_input", timeout=0.05)


async def test_real_model_requests_fail_in_agent_tests(make_agent, tmp_path: Path):
    settings = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "adapter": "openai"}
    source = SourceConfig.from_mapping("local", settings)
    agent = make_agent(model=ProviderManager([source], default="local", data_dir=tmp_path), memory=False)
    with pytest.raises(ModelRequestsForbidden, match="real model requests are forbidden in this test"):
        await agent.ask("hi")


def test_the_ini_switch_forbids_model_requests_in_every_test(pytester: pytest.Pytester):
    pytester.makeini(
        "[pytest]\nhomeagent_allow_model_requests = false\nasyncio_mode = auto\n"
        "asyncio_default_fixture_loop_scope = function\n"
    )
    pytester.makepyfile(
        textwrap.dedent(
            """
            import pytest
            from homeagent_core.providers import ProviderManager, SourceConfig
            from homeagent_sdk.testing import ModelRequestsForbidden

            async def test_plain(tmp_path):
                settings = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "adapter": "openai"}
                source = SourceConfig.from_mapping("s", settings)
                manager = ProviderManager([source], default="s", data_dir=tmp_path)
                with pytest.raises(ModelRequestsForbidden):
                    await manager.chat({"messages": [{"role": "user", "content": "hi"}]})
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_register_plugin_always_unregisters_even_after_a_failing_test(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        textwrap.dedent(
            """
            import pytest
            from homeagent_sdk import hookimpl

            EVENTS = []

            class P:
                name = "p"

                @hookimpl
                def startup(self, sdk):
                    EVENTS.append("startup")

                @hookimpl
                def shutdown(self):
                    EVENTS.append("shutdown")

            @pytest.mark.asyncio
            async def test_fails_after_starting(agent, register_plugin):
                register_plugin(P())
                await agent.start()
                raise AssertionError("the test fails")

            def test_the_plugin_was_shut_down_and_removed():
                assert EVENTS == ["startup", "shutdown"]
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)


class Outbox:
    name = "outbox"

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def add(self, a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b

    @hookimpl
    def register_tools(self, registry) -> None:
        registry.add(self.add)

    @hookimpl
    def register_output_channels(self, registry) -> None:
        registry.add(ChannelDef(name="box", description="collects messages", send=self.send))

    def send(self, payload: str, meta: dict, type: str) -> dict:
        self.sent.append(payload)
        return {"count": len(self.sent)}

    @hookimpl
    def before_toolcall(self, ctx, call) -> str | None:
        if call.arguments.get("a") == 13:
            return "unlucky"
        call.arguments["b"] = 10
        return None

    @hookimpl
    def startup(self, sdk) -> None:
        sdk.settings.set("seen", True)


async def test_the_proc_harness_runs_a_plugin_over_the_wire_in_memory(proc_harness):
    plugin = Outbox()
    harness = await proc_harness(plugin, name="outbox")

    assert list(harness.tools) == ["add"] and harness.tools["add"]["parameters"]["required"] == ["a"]
    assert harness.stages == {"before_toolcall": "global"}
    assert list(harness.outputs) == ["box"]
    assert harness.settings == {"seen": True}
    assert await harness.call_tool("add", a=1) == 3
    assert await harness.send("box", "hello") == {"count": 1, "status": "sent"}
    assert plugin.sent == ["hello"]

    from homeagent_sdk.types import ToolCall

    call = ToolCall(id="c1", name="add", arguments={"a": 1})
    answer = await harness.run_stage("before_toolcall", StageContext(), call=call)
    assert call.arguments == {"a": 1, "b": 10} and "reject" not in answer
    unlucky = ToolCall(id="c2", name="add", arguments={"a": 13})
    rejected = await harness.run_stage("before_toolcall", StageContext(), call=unlucky)
    assert rejected["reject"] == "unlucky"


async def test_the_proc_harness_says_which_host_service_it_lacks(proc_harness):
    class Recaller:
        name = "recaller"

        @hookimpl
        async def startup(self, sdk) -> None:
            self.error = None
            try:
                await sdk.memory.recall(["x"])
            except PluginError as exc:
                self.error = str(exc)

    plugin = Recaller()
    await proc_harness(plugin, name="recaller")
    assert "memory.recall: not available in the in-memory plugin harness" in plugin.error


def test_importing_the_kit_imports_no_core_module():
    code = "import sys, homeagent_sdk.testing\nprint(sorted(m for m in sys.modules if m.startswith('homeagent_core')))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
