"""End to end: a real ``homeagent serve`` with this plugin installed, a loopback Bot API and a
loopback OpenAI-compatible model.

The plugin is installed the way a user installs it (pip, into a directory on the daemon's
``PYTHONPATH``) unless the environment already has it (``make test`` installs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from telegram_fake import FakeBotAPI

from homeagent_sdk.testing import FakeModel, FakeModelServer, ToolCallReply

TOKEN = "424242:e2e-token"
PLUGIN_DIR = Path(__file__).resolve().parents[1]
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00"
    b"\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82"
)


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PYTHONPATH entry under which the ``telegram`` entry point is installed."""
    if any(ep.name == "telegram" for ep in importlib.metadata.entry_points(group="homeagent")):
        yield ""
        return
    source = tmp_path_factory.mktemp("src") / PLUGIN_DIR.name
    shutil.copytree(PLUGIN_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target",
         str(target), str(source)],
        check=True, timeout=300,
    )
    yield str(target)


def _env(plugin_path: str) -> dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in (plugin_path, env.get("PYTHONPATH", "")) if p]
    env.update(PYTHONPATH=os.pathsep.join(paths), HOMEAGENT_LOAD_PLUGINS="telegram", HOMEAGENT_LLM_API_KEY="test-key")
    return env


def _cli(env: dict[str, str], data: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "homeagent_core.cli", *args, "--data", str(data)],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _answer(request: dict[str, Any]) -> Any:
    message = request["messages"][-1]
    last = message.get("content")
    if message["role"] == "tool":
        return "ok, in 1 second"
    if isinstance(last, str) and last.endswith("remind me in 1s to stretch"):
        return ToolCallReply("timer_set", {"duration": "1s", "message": "remind Mia to stretch"})
    if isinstance(last, str) and "timer: remind Mia to stretch" in last:
        return "Mia, time to stretch!"
    if isinstance(last, list):
        return f"I see {', '.join(block['type'] for block in last)}"
    return f"got: {last}"


Daemon = tuple[FakeBotAPI, FakeModelServer, Path, dict[str, str]]


@pytest.fixture
async def daemon(tmp_path: Path, plugin_path: str) -> AsyncIterator[Daemon]:
    async with _serve(tmp_path, plugin_path) as running:
        yield running


@contextlib.asynccontextmanager
async def _serve(tmp_path: Path, plugin_path: str, *settings: tuple[str, str]) -> AsyncIterator[Daemon]:
    """``homeagent serve`` with the plugin against a loopback Bot API; ``settings`` are set first."""
    async with FakeBotAPI(TOKEN) as api, FakeModelServer(FakeModel(responder=_answer)) as model:
        data = tmp_path / "home"
        env = _env(plugin_path)
        for key, value in (
            ("core.llm.sources.deepseek.base_url", model.base_url),
            ("core.llm.sources.deepseek.vision", "true"),
            ("plugin.telegram.bot_token", TOKEN),
            ("plugin.telegram.api_base", api.base),
            ("plugin.telegram.poll_timeout", "2"),
            *settings,
        ):
            out = await asyncio.to_thread(_cli, env, data, "config", "set", key, value)
            assert TOKEN not in out  # the token is masked
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "homeagent_core.cli", "serve", "--data", str(data), "--port", "0",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        assert proc.stdout is not None
        lines: list[str] = []
        try:
            async with asyncio.timeout(90):
                while True:
                    line = (await proc.stdout.readline()).decode()
                    assert line, "homeagent serve exited:\n" + "".join(lines)
                    lines.append(line)
                    if "HomeAgent running" in line:
                        break
            drain = asyncio.get_running_loop().create_task(proc.stdout.read())
            yield api, model, data, env
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                async with asyncio.timeout(30):
                    await proc.wait()
    output = "".join(lines) + (await drain).decode(errors="replace")
    assert proc.returncode == 0, output
    assert TOKEN not in output


async def test_telegram_end_to_end_pairing_reply_photo_and_timer(daemon: Daemon):
    api, model, data, env = daemon
    transcript: list[str] = []

    api.private(5551, "Mia", text="hi there")
    transcript.append("Mia (Telegram 5551) -> bot: hi there")
    sent = await api.next_sent(timeout=30)
    transcript.append(f"bot -> Mia: {sent['text']}")
    assert "Pairing code" in sent["text"]
    assert not any("Mia (Telegram 5551)" in str(r["messages"]) for r in model.model.requests)
    code = sent["text"].split("Pairing code: ")[1].split()[0]
    await asyncio.to_thread(_cli, env, data, "pairing", "approve", code, "--person", "Mia")
    # Linked as a child, Mia may also set timers (an approved but unlinked sender is a guest).
    await asyncio.to_thread(_cli, env, data, "people", "add", "Mia", "--role", "child")
    await asyncio.to_thread(_cli, env, data, "people", "link", "Mia", "telegram", "5551")

    api.private(5551, "Mia", text="what's for dinner?")
    transcript.append("Mia (Telegram 5551) -> bot: what's for dinner?")
    sent = await api.next_sent()
    transcript.append(f"bot -> Mia: {sent['text']}")
    assert sent["text"] == "got: Mia (Telegram 5551): what's for dinner?"
    assert any(a["chat_id"] == 5551 and a["action"] == "typing" for a in api.actions)

    api.add_file("ph1", PNG, "photos/file_9.png")
    api.private(5551, "Mia", caption="and this?",
                photo=[{"file_id": "ph1", "file_unique_id": "p", "width": 1, "height": 1, "file_size": len(PNG)}])
    transcript.append("Mia (Telegram 5551) -> bot: [photo] and this?")
    sent = await api.next_sent()
    transcript.append(f"bot -> Mia: {sent['text']}")
    assert sent["text"] == "I see text, image_url"

    api.private(5551, "Mia", text="remind me in 1s to stretch")
    transcript.append("Mia (Telegram 5551) -> bot: remind me in 1s to stretch")
    for expected in ("ok, in 1 second", "Mia, time to stretch!"):
        sent = await api.next_sent()
        transcript.append(f"bot -> Mia: {sent['text']}")
        assert (sent["chat_id"], sent["text"]) == (5551, expected)
    print("\n".join(["", "Telegram transcript (platform side):", *transcript]))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_telegram_webhook_end_to_end(tmp_path: Path, plugin_path: str):
    port = _free_port()
    hook = "https://home.example.com/tg/hook"
    listener = f"http://127.0.0.1:{port}/tg/hook"  # where the TLS reverse proxy forwards ``hook``
    transcript: list[str] = []
    async with _serve(tmp_path, plugin_path, ("plugin.telegram.mode", "webhook"),
                      ("plugin.telegram.webhook_url", hook), ("plugin.telegram.webhook_port", str(port))) as daemon:
        api, _model, data, env = daemon
        assert api.webhook["url"] == hook and api.webhook["secret_token"]
        api.private(5551, "Mia", text="hi there")
        transcript.append("Mia (Telegram 5551) -> bot: hi there   [POSTed to the webhook]")
        assert await api.post_updates(listener, secret="guessed") == [403]
        assert await api.post_updates(listener) == [200]
        sent = await api.next_sent(timeout=30)
        transcript.append(f"bot -> Mia: {sent['text']}")
        code = sent["text"].split("Pairing code: ")[1].split()[0]
        await asyncio.to_thread(_cli, env, data, "pairing", "approve", code)

        api.private(5551, "Mia", text="what's for dinner?")
        transcript.append("Mia (Telegram 5551) -> bot: what's for dinner?   [POSTed to the webhook]")
        assert await api.post_updates(listener) == [200]
        sent = await api.next_sent()
        transcript.append(f"bot -> Mia: {sent['text']}")
        assert sent["text"] == "got: Mia (Telegram 5551): what's for dinner?"
        assert "getUpdates" not in api.calls
    assert api.webhook["url"] == hook  # left set while the daemon is down: Telegram keeps the updates
    print("\n".join(["", "Telegram webhook transcript (platform side):", *transcript]))
