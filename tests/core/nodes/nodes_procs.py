"""Real processes for the nodes tests: a home daemon on a fixed port, node processes, CLI calls.

The daemon's web UI listens on a port chosen once per test, so a restarted daemon is found at
the same address by the node that keeps reconnecting. Every wait is bounded (``WAIT_S``).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

API_KEY = "nodes-test-key-0123456789abcdef"
WAIT_S = 60.0


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HOMEAGENT_LOAD_PLUGINS": "", "PYTHONUNBUFFERED": "1", "NO_COLOR": "1",
            "HOMEAGENT_WEBUI_API_KEY": API_KEY, "PYTHONPATH": os.getcwd(), **extra}


def homeagent(*args: str) -> list[str]:
    return [sys.executable, "-m", "homeagent_core.cli", *args]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(homeagent(*args), env=env(), capture_output=True, text=True, timeout=120)
    if check and run.returncode != 0:
        raise AssertionError(f"homeagent {' '.join(args)} failed ({run.returncode}):\n{run.stdout}{run.stderr}")
    return run


def configure(data: Path, model_url: str) -> None:
    """The daemon's only LLM source is the loopback model (``model_url`` ends in /v1)."""
    for key, value in {
        "core.llm.provider": "loopback",
        "core.llm.sources.loopback.base_url": model_url,
        "core.llm.sources.loopback.model": "loopback-model",
        "core.llm.sources.loopback.adapter": "openai",
        "core.llm.sources.loopback.api_key": "sk-loopback",
    }.items():
        cli("config", "set", key, value, "--data", str(data))


class Proc:
    """A child process whose output is collected line by line on a thread."""

    def __init__(self, args: list[str], **extra_env: str) -> None:
        self.popen = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      env=env(**extra_env), stdin=subprocess.DEVNULL)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)
        self.lines.put("")

    def wait_for(self, text: str, timeout: float = WAIT_S) -> str:
        """Read output until a line containing ``text``; fail with everything seen if it never comes."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{text!r} not printed within {timeout}s:\n{''.join(self.seen)}") from None
            self.seen.append(line)
            if text in line:
                return line
            if line == "":
                raise AssertionError(f"process ended before printing {text!r}:\n{''.join(self.seen)}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        if self.popen.stdout is not None:
            self.popen.stdout.close()


def serve(data: Path, port: int) -> Proc:
    proc = Proc(homeagent("serve", "--data", str(data), "--port", str(port)))
    proc.wait_for("HomeAgent running", timeout=120)
    return proc


def node_serve(folder: Path) -> Proc:
    """``homeagent node serve``; the capabilities of ``node_plugin_caps.py`` can be enabled in its node.json."""
    return Proc(homeagent("node", "serve", "--data", str(folder)),
                PYTHONPATH=f"{os.getcwd()}{os.pathsep}{Path(__file__).parent}")


def until(check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Poll ``check`` (every 0.2 s) until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        threading.Event().wait(0.2)


def nodes_list(data: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(cli("nodes", "list", "--json", "--data", str(data)).stdout)
    return rows


def ask(base: str, text: str) -> str:
    """One /v1 turn as the owner (the admin API key); the reply's text."""
    response = httpx.post(f"{base}/v1/chat/completions", headers={"Authorization": f"Bearer {API_KEY}"},
                          json={"model": "homeagent", "messages": [{"role": "user", "content": text}]}, timeout=120)
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])
