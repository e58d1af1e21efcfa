"""``homeagent ask`` / ``homeagent chat`` end to end against a daemon running in the test."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from homeagent_core.cli.chat import ask, chat
from homeagent_sdk._fake_model import FakeModel
from homeagent_sdk.errors import ProviderError

CLI = "homeagent_core.builtin.cli_socket"

app = typer.Typer()
app.command("ask")(ask)
app.command("chat")(chat)


async def invoke(args: list[str], stdin: str | None = None) -> tuple[int, str]:
    """Run the command in a worker thread so the daemon keeps serving on this loop."""
    runner = CliRunner()
    result = await asyncio.to_thread(runner.invoke, app, args, input=stdin)
    return result.exit_code, result.output


async def test_ask_prints_the_reply(harness):
    h = await harness([CLI], model=FakeModel(["杭州今天晴，25 度。"]))
    code, out = await invoke(["ask", "杭州天气怎么样", "--data", str(h.app.data_dir)])
    assert code == 0, out
    assert out == "杭州今天晴，25 度。\n"


async def test_ask_reads_standard_input_for_pipelines(harness):
    model = FakeModel(["three lines received"])
    h = await harness([CLI], model=model)
    code, out = await invoke(["ask", "--data", str(h.app.data_dir)], stdin="a\nb\nc\n")
    assert code == 0 and out.strip() == "three lines received"
    assert model.requests[0]["messages"][-1]["content"].endswith("a\nb\nc")


async def test_ask_json_prints_the_response_object(harness):
    h = await harness([CLI], model=FakeModel(["fine"]))
    code, out = await invoke(["ask", "status?", "--json", "--data", str(h.app.data_dir)])
    assert code == 0
    assert json.loads(out)["content"] == "fine"


async def test_ask_exits_non_zero_on_errors(harness, tmp_path: Path):
    code, out = await invoke(["ask", "hello", "--data", str(tmp_path / "nowhere")])
    assert code == 2 and "homeagent serve" in out
    h = await harness([CLI], {"plugin.cli.api_key": "k"})
    code, out = await invoke(["ask", "hello", "--data", str(h.app.data_dir)])
    assert code == 1 and "unauthorized" in out
    code, out = await invoke(["ask", "hello", "--data", str(h.app.data_dir), "--api-key", "k"])
    assert code == 0 and out.strip() == "ok"
    code, out = await invoke(["ask", "/frobnicate", "--data", str(h.app.data_dir), "--api-key", "k"])
    assert code == 1 and "unknown command" in out
    code, out = await invoke(["ask", "--data", str(h.app.data_dir)], stdin="   ")
    assert code == 1 and "nothing to ask" in out


async def test_ask_reports_a_model_failure_with_exit_code_one(harness):
    h = await harness([CLI], model=FakeModel([ProviderError("upstream is down")]))
    code, out = await invoke(["ask", "hello", "--data", str(h.app.data_dir)])
    assert code == 1 and out == "Error: upstream is down\n"


async def test_chat_converses_runs_commands_and_keeps_history(harness):
    h = await harness([CLI], model=FakeModel(["第一句回答", "second answer"]))
    data = str(h.app.data_dir)
    code, out = await invoke(["chat", "--plain", "--data", data], stdin="你好\n/status\nand now?\n/quit\n")
    assert code == 0, out
    assert "第一句回答" in out and "uptime:" in out and "second answer" in out
    assert out.index("第一句回答") < out.index("uptime:") < out.index("second answer")
    code, out = await invoke(["chat", "--plain", "--data", data], stdin="/nope\n")
    assert code == 0 and "Error: unknown command /nope" in out


async def test_chat_shows_command_replies_as_written_and_status_names_the_model(harness):
    h = await harness([CLI])
    runner = CliRunner(env={"FORCE_COLOR": "1", "COLUMNS": "200"})  # a terminal: replies are Markdown
    result = await asyncio.to_thread(runner.invoke, app, ["chat", "--data", str(h.app.data_dir)],
                                     input="/help\n/status\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "/settings set <key> <value>" in result.output  # placeholders kept, not eaten as HTML
    assert "model: fake" in result.output or "model: FakeModel" in result.output


async def test_chat_reconnects_when_the_daemon_restarts(harness, tmp_path: Path):
    import os

    data = tmp_path / "restarting"
    first = await harness([CLI], data=data, model=FakeModel(["第一次回答"]))
    read_end, write_end = os.pipe()
    stdin = os.fdopen(read_end, "rb")

    def say(line: str) -> None:
        os.write(write_end, (line + "\n").encode())

    from click.testing import CliRunner as StreamingRunner  # takes a live stream as standard input

    command = typer.main.get_command(app)
    running = asyncio.create_task(asyncio.to_thread(
        StreamingRunner().invoke, command, ["chat", "--plain", "--data", str(data)], input=stdin))
    say("你好")
    await first.wait_event("agent_output")
    await first.stop()
    second = await harness([CLI], data=data, model=FakeModel(["重启后的回答"]))
    say("还在吗")  # lost with the old connection: the client reconnects and says so
    say("还在吗")
    try:
        await second.wait_event("agent_output")
    finally:
        say("/quit")
        result = await running
        os.close(write_end)
        stdin.close()
    assert result.exit_code == 0, result.output
    assert "第一次回答" in result.output
    assert "daemon restarted, reconnected" in result.output
    assert "重启后的回答" in result.output
