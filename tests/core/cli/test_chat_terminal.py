"""``homeagent chat`` as a person uses it: a real daemon process, a real client process, a restart."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_procs import Proc, env, homeagent, serve


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "d"
    settings = {
        "core.llm.sources.local.adapter": "openai",
        "core.llm.sources.local.base_url": "http://127.0.0.1:9/v1",
        "core.llm.sources.local.model": "qwen2.5:7b-instruct",
        "core.llm.provider": "local",
    }
    for key, value in settings.items():
        subprocess.run(homeagent("config", "set", key, value, "--data", str(root)), check=True, env=env(),
                       capture_output=True)
    return root


@pytest.fixture
def daemons(data: Path) -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.stop()


def test_chat_survives_a_daemon_restart_and_shows_commands_as_written(data: Path, daemons: list[Proc]):
    first = serve(data, daemons)
    # A terminal as rich sees it (so Markdown rendering is on), without colour codes.
    args = homeagent("chat", "--data", str(data), "--reconnect-timeout", "3")
    client = Proc(args, env(TTY_COMPATIBLE="1", COLUMNS="120"), stdin=True)
    client.wait_for("Connected.")
    client.send("/help")
    client.wait_for("/plugin info <name>")
    line = client.wait_for("/settings set <key> <value>")
    assert line.startswith("  /settings set"), line  # one command a line, placeholders kept
    client.send("/status")
    assert "model: local/qwen2.5:7b-instruct" in client.wait_for("model:")

    first.stop()
    second = Proc(homeagent("serve", "--data", str(data), "--port", "0"), env())
    daemons.append(second)
    second.wait_for("HomeAgent running")
    client.send("/status")
    client.wait_for("daemon restarted, reconnected")
    client.wait_for("uptime:")

    second.stop()  # gone for good this time: chat waits its bound, then says why it stops
    client.send("/status")
    client.wait_for("waiting for the daemon")
    out = client.rest()
    assert client.popen.returncode == 2, out
    assert "did not come back within 3 s" in out and "homeagent serve" in out
