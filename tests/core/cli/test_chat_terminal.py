"""``homeagent chat`` as a person uses it: a real daemon process, a real client process, a restart."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Bound on every wait for a process to print something (not a speed assertion).
WAIT_S = 60.0


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HOMEAGENT_LOAD_PLUGINS": "", "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", **extra}


def _homeagent(*args: str) -> list[str]:
    return [sys.executable, "-m", "homeagent_core.cli", *args]


class Proc:
    """A child process whose output is collected line by line on a thread."""

    def __init__(self, args: list[str], env: dict[str, str], stdin: bool = False) -> None:
        self.popen = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)
        self.lines.put("")

    def wait_for(self, text: str) -> str:
        """Read output until a line containing ``text``; fail with everything seen if it never comes."""
        while True:
            try:
                line = self.lines.get(timeout=WAIT_S)
            except queue.Empty:
                raise AssertionError(f"{text!r} not printed within {WAIT_S}s:\n{''.join(self.seen)}") from None
            self.seen.append(line)
            if text in line:
                return line
            if line == "":
                raise AssertionError(f"process ended before printing {text!r}:\n{''.join(self.seen)}")

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def rest(self) -> str:
        """Everything printed until the process ends."""
        self.popen.wait(timeout=WAIT_S)
        while True:
            line = self.lines.get(timeout=WAIT_S)
            if line == "":
                self.close()
                return "".join(self.seen)
            self.seen.append(line)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.close()

    def close(self) -> None:
        """Close the pipes once the process has ended and its output was read."""
        self.pump.join(timeout=WAIT_S)
        for pipe in (self.popen.stdin, self.popen.stdout):
            if pipe is not None:
                pipe.close()


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
        subprocess.run(_homeagent("config", "set", key, value, "--data", str(root)), check=True, env=_env(),
                       capture_output=True)
    return root


@pytest.fixture
def daemons(data: Path) -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.stop()


def _serve(data: Path, daemons: list[Proc]) -> Proc:
    proc = Proc(_homeagent("serve", "--data", str(data), "--port", "0"), _env())
    daemons.append(proc)
    proc.wait_for("HomeAgent running")
    return proc


def test_chat_survives_a_daemon_restart_and_shows_commands_as_written(data: Path, daemons: list[Proc]):
    first = _serve(data, daemons)
    # A terminal as rich sees it (so Markdown rendering is on), without colour codes.
    args = _homeagent("chat", "--data", str(data), "--reconnect-timeout", "3")
    client = Proc(args, _env(TTY_COMPATIBLE="1", COLUMNS="120"), stdin=True)
    client.wait_for("Connected.")
    client.send("/help")
    client.wait_for("/plugin info <name>")
    line = client.wait_for("/settings set <key> <value>")
    assert line.startswith("  /settings set"), line  # one command a line, placeholders kept
    client.send("/status")
    assert "model: local/qwen2.5:7b-instruct" in client.wait_for("model:")

    first.stop()
    second = Proc(_homeagent("serve", "--data", str(data), "--port", "0"), _env())
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
