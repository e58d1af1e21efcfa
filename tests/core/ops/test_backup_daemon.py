"""``homeagent backup create`` next to a real ``homeagent serve`` answering ``homeagent ask`` traffic,
then ``backup restore``: the restored directory answers memory queries like the original."""

from __future__ import annotations

import asyncio
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from backup_data import answers, fill
from openai_loopback import openai_loopback

from homeagent_core.library import Agent
from homeagent_sdk.testing import FakeModel

#: Bound on every wait for a child process (not a speed assertion).
WAIT_S = 120.0


def env() -> dict[str, str]:
    return {**os.environ, "HOMEAGENT_LOAD_PLUGINS": "", "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}


def homeagent(*args: str) -> list[str]:
    return [sys.executable, "-m", "homeagent_core.cli", *args]


async def seed(data: Path, base_url: str) -> None:
    async with Agent(data, provider=FakeModel(default="好的"), load_entrypoints=False) as agent:
        await fill(agent)
        for key, value in {
            "core.llm.sources.box.adapter": "openai",
            "core.llm.sources.box.base_url": base_url,
            "core.llm.sources.box.model": "loopback-model",
            "core.llm.provider": "box",
        }.items():
            agent.config.set(key, value)


async def ask_both(original: Path, restored: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    async with Agent(original, provider=FakeModel(default="x"), load_entrypoints=False) as agent:
        first = await answers(agent)
    async with Agent(restored, provider=FakeModel(default="x"), load_entrypoints=False) as agent:
        second = await answers(agent)
    return first, second


def test_a_backup_of_a_serving_daemon_under_traffic_restores_to_the_same_answers(tmp_path: Path):
    data, restored = tmp_path / "data", tmp_path / "restored"
    with openai_loopback() as server:
        asyncio.run(seed(data, server.base_url))
        daemon = subprocess.Popen(
            homeagent("serve", "--data", str(data), "--port", "0"),
            env=env(),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in daemon.stdout or ()], daemon=True).start()
        stop, asked = threading.Event(), []
        try:
            seen = []
            while not any("HomeAgent running" in line for line in seen):
                seen.append(lines.get(timeout=WAIT_S))
                assert daemon.poll() is None, "".join(seen)

            def traffic() -> None:
                while not stop.is_set():
                    run = subprocess.run(
                        homeagent("ask", f"message {len(asked)}", "--data", str(data)),
                        env=env(),
                        capture_output=True,
                        text=True,
                        timeout=WAIT_S,
                    )
                    asked.append(run.returncode)

            talker = threading.Thread(target=traffic)
            talker.start()
            try:
                while not asked:
                    stop.wait(0.05)
                backup = subprocess.run(
                    homeagent("backup", "create", "--data", str(data), "--out", str(tmp_path / "live.tar")),
                    env=env(),
                    capture_output=True,
                    text=True,
                    timeout=WAIT_S,
                )
            finally:
                stop.set()
                talker.join(timeout=WAIT_S)
            assert backup.returncode == 0, backup.stdout + backup.stderr
            assert set(asked) == {0}, asked
        finally:
            daemon.terminate()
            daemon.wait(timeout=WAIT_S)
            if daemon.stdout is not None:
                daemon.stdout.close()

    done = subprocess.run(
        homeagent("backup", "restore", str(tmp_path / "live.tar"), "--data", str(restored)),
        env=env(),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 0, done.stderr
    before, after = asyncio.run(ask_both(data, restored))
    log_before, log_after = before.pop("log"), after.pop("log")
    assert after == before
    assert log_after == log_before[: len(log_after)]  # the log as of the backup: a prefix, whole records
    assert ("user", "message 0") in log_after and ("assistant", "Hello from the loopback model.") in log_after
