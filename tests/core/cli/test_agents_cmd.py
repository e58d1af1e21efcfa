"""``homeagent agents``: residents made by the library survive into a real `homeagent serve` daemon."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from homeagent_core.library import Agent
from homeagent_sdk._fake_model import FakeModel

HOMEAGENT = [sys.executable, "-m", "homeagent_core.cli"]


def _agents(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HOMEAGENT, "agents", *args, "--data", str(data)], capture_output=True, text=True, timeout=60
    )


async def _make_resident(data: Path) -> None:
    hold = asyncio.Event()

    async def responder(request: dict[str, Any]) -> Any:
        await hold.wait()  # still working on it when this process stops
        return "never"

    agent = Agent(data, provider=FakeModel(responder=responder), load_entrypoints=False, builtins=())
    await agent.start()
    await agent.residents.create("shop", "维护购物清单")
    await agent.residents.send("shop", "加牛奶")
    await agent.aclose()


def test_agents_list_send_stop_destroy_against_a_restarted_daemon(tmp_path: Path) -> None:
    data = tmp_path / "ha"
    asyncio.run(_make_resident(data))
    proc = subprocess.Popen(
        [*HOMEAGENT, "serve", "--data", str(data), "--port", "0"],
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
        assert any("resident shop restored (1 queued)" in line for line in lines), "".join(lines)
        listed = _agents(data, "list")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.startswith("resident shop"), listed.stdout
        sent = _agents(data, "send", "shop", "加鸡蛋")
        assert sent.returncode == 0 and sent.stdout.startswith("queued for resident shop (position"), sent
        unknown = _agents(data, "send", "ghost", "x")
        assert unknown.returncode == 1 and "no resident named 'ghost' (residents: shop)" in unknown.stderr
        stopped = _agents(data, "stop", "shop")
        assert stopped.returncode == 0 and stopped.stdout.startswith("stopped resident shop"), stopped
        destroyed = _agents(data, "destroy", "shop", "--drop")
        assert destroyed.returncode == 0 and destroyed.stdout.startswith("destroyed resident shop"), destroyed
        assert _agents(data, "list").stdout.startswith("no sub-agents have been started")
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, "".join(lines) + rest
    assert not (data / "residents" / "shop").exists()


def test_agents_without_a_daemon_says_how_to_start_one(tmp_path: Path) -> None:
    result = _agents(tmp_path, "list")
    assert result.returncode == 2 and "start the daemon with `homeagent serve`" in result.stderr
