"""``homeagent doctor`` tells what the running daemon sees, and tests a keyless local model server."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_procs import Proc, env, homeagent, serve
from openai_loopback import openai_loopback

BROKEN_LUA = """return {
  name = "needs-key",
  start = function(sdk) error("the weather service key is missing") end,
}
"""


def config_set(data: Path, **settings: str) -> None:
    for key, value in settings.items():
        subprocess.run(homeagent("config", "set", key, value, "--data", str(data)), check=True, env=env(),
                       capture_output=True)


def doctor(data: Path) -> tuple[int, list[dict[str, str]]]:
    run = subprocess.run(homeagent("doctor", "--json", "--data", str(data)), env=env(), capture_output=True,
                         text=True, timeout=300)
    return run.returncode, json.loads(run.stdout)


@pytest.fixture
def daemons() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.stop()


def test_doctor_reports_the_running_daemon_s_failed_plugin_and_the_source_that_answered(
    tmp_path: Path, daemons: list[Proc]
):
    data = tmp_path / "d"
    plugin = data / "plugins" / "needs-key"
    plugin.mkdir(parents=True)
    (plugin / "plugin.json").write_text(json.dumps({"name": "needs-key", "version": "0.1.0", "entry": "main.lua"}))
    (plugin / "main.lua").write_text(BROKEN_LUA)
    with openai_loopback() as server:
        config_set(data, **{"core.llm.sources.box.adapter": "openai", "core.llm.sources.box.base_url": server.base_url,
                            "core.llm.sources.box.model": "qwen2.5:7b", "core.llm.provider": "box"})
        serve(data, daemons)
        ask = subprocess.run(homeagent("ask", "hello", "--data", str(data)), env=env(), capture_output=True,
                             text=True, timeout=300)
        assert ask.returncode == 0, ask.stdout + ask.stderr
        code, findings = doctor(data)
    messages = [f"{f['status']} {f['message']}" for f in findings]
    assert code == 1, messages
    assert any(m.startswith("fail plugin needs-key") and "the weather service key is missing" in m
               for m in messages), messages
    count = next(m for m in messages if "plugins started in the running daemon" in m)
    assert count.startswith("fail ") and " of " in count and "failed: needs-key" in count
    assert "ok running daemon: source box (model qwen2.5:7b) answered last" in messages
    assert any(m.startswith("ok running daemon: no hung worker threads (") for m in messages), messages
    assert "ok running daemon: the loop watch is off, event-loop stalls are not recorded" in messages
    assert not any("no API key" in m for m in messages), messages


def test_without_a_daemon_doctor_counts_failures_and_accepts_a_keyless_local_server(tmp_path: Path):
    data = tmp_path / "d"
    with openai_loopback() as server:
        config_set(data, **{"core.llm.sources.box.adapter": "openai", "core.llm.sources.box.base_url": server.base_url,
                            "core.llm.sources.box.model": "qwen2.5:7b", "core.llm.provider": "box"})
        _, findings = doctor(data)
        assert "/v1/models" in server.paths
    messages = [f"{f['status']} {f['message']}" for f in findings]
    assert f"ok source box needs no API key: {server.base_url} is local and answers" in messages
    assert not any("no API key is set" in m for m in messages), messages
    count = next(m for m in messages if "plugins load" in m)
    assert " of " in count and "start-up was not checked" in count
    # the same source, its server gone: the warning names what did not answer
    _, findings = doctor(data)
    messages = [f"{f['status']} {f['message']}" for f in findings]
    assert any(m.startswith("warn source box (keyless, local) does not answer") for m in messages), messages
