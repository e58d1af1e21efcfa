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
