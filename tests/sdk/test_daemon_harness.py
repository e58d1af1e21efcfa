"""The test kit's end-to-end helpers: a real ``homeagent serve`` and real ``homeagent`` commands."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from homeagent_sdk.testing import (
    CommandFailed,
    FakeModel,
    FakeModelServer,
    cli_output,
    daemon_env,
    free_port,
    plugin_pythonpath,
    run_cli,
    serve_daemon,
)

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return daemon_env("", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")


async def test_the_daemon_runs_answers_and_stops_cleanly(tmp_path: Path):
    async with FakeModelServer(FakeModel(responder=lambda request: "pong")) as model:
        settings = [("core.llm.sources.deepseek.base_url", model.base_url)]
        async with serve_daemon(tmp_path / "home", _env(), settings=settings, secrets=["never-printed"]) as daemon:
            assert daemon.url.startswith("http://127.0.0.1:") and "HomeAgent running" in daemon.text
            assert (await daemon.cli("ask", "ping")).strip() == "pong"
            said = await daemon.printed("HomeAgent running", timeout=1)
            assert str(daemon.data) in said
            with pytest.raises(AssertionError, match=re.escape("'no such line' not printed within 0.1 s")):
                await daemon.printed("no such line", timeout=0.1)
            doctor = await daemon.cli_output("doctor")
            assert doctor.strip()
        assert daemon.process.returncode == 0
        assert model.model.requests  # the daemon's turn reached the loopback model


async def test_a_daemon_that_does_not_stop_in_time_is_killed_and_reported(tmp_path: Path):
    with pytest.raises(AssertionError, match="did not stop within 0 s of SIGTERM"):
        async with serve_daemon(tmp_path / "home", _env(), stop_timeout=0) as daemon:
            pass
    assert daemon.process.returncode is not None  # it does not outlive the test


async def test_a_daemon_that_cannot_start_fails_with_its_output(tmp_path: Path):
    data = tmp_path / "a-file"
    data.write_text("not a directory", encoding="utf-8")
    with pytest.raises(AssertionError, match="homeagent serve exited"):
        async with serve_daemon(data, _env()):
            raise AssertionError("the block must not run")  # pragma: no cover


async def test_a_secret_printed_by_config_set_fails_the_test(tmp_path: Path):
    model_name = "leaky-model-name-31337"
    with pytest.raises(AssertionError, match=re.escape("config set core.llm.sources.deepseek.model` printed a secret")):
        async with serve_daemon(tmp_path / "home", _env(), settings=[
            ("core.llm.sources.deepseek.model", model_name),
        ], secrets=[model_name]):
            raise AssertionError("the block must not run")  # pragma: no cover


def test_run_cli_returns_stdout_and_raises_with_the_output(tmp_path: Path):
    env, data = _env(), tmp_path / "home"
    assert "core.llm.sources.deepseek.model" in run_cli(env, data, "config", "set", "core.llm.sources.deepseek.model",
                                                         "m1")
    with pytest.raises(CommandFailed) as failed:
        run_cli(env, data, "config", "set", "no.such.key", "1")
    assert failed.value.returncode != 0 and "no.such.key" in failed.value.output
    assert "no.such.key" in str(failed.value)
    assert "no.such.key" in cli_output(env, data, "config", "set", "no.such.key", "1")


def test_daemon_env_puts_the_plugin_path_first(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = daemon_env("onebot,telegram", pythonpath="/plugins/site", HOMEAGENT_WEBUI_API_KEY="k")
    assert env["PYTHONPATH"].split(":") == ["/plugins/site", "/elsewhere"]
    assert (env["HOMEAGENT_LOAD_PLUGINS"], env["HOMEAGENT_LLM_API_KEY"], env["HOMEAGENT_WEBUI_API_KEY"]) == (
        "onebot,telegram", "test-key", "k")
    monkeypatch.delenv("PYTHONPATH")
    assert "PYTHONPATH" not in daemon_env("")


def test_free_port_is_free():
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_plugin_pythonpath_installs_a_plugin_that_is_not_installed(tmp_path: Path):
    project = REPO / "plugins" / "homeagent-plugin-onebot"
    assert plugin_pythonpath(project, "onebot", tmp_path / "installed") == ""  # the venv has it
    # asked for an entry point the environment lacks, it installs the project with pip
    target = Path(plugin_pythonpath(project, "no-such-entry-point", tmp_path / "fresh"))
    assert (target / "homeagent_plugin_onebot" / "plugin.py").is_file()
    dist = next(target.glob("homeagent_plugin_onebot-*.dist-info"))
    assert "onebot" in (dist / "entry_points.txt").read_text(encoding="utf-8")
    assert not (target / "tests").exists()
