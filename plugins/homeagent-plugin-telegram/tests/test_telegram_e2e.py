"""End to end: a real ``homeagent serve`` with this plugin installed, a loopback Bot API and a
loopback OpenAI-compatible model.

The plugin is installed the way a user installs it (pip, into a directory on the daemon's
``PYTHONPATH``) unless the environment already has it (``make test`` installs it).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from telegram_fake import FakeBotAPI

from homeagent_sdk.testing import (
    FakeModel,
    FakeModelServer,
    ServedDaemon,
    ToolCallReply,
    daemon_env,
    free_port,
    plugin_pythonpath,
    serve_daemon,
)

TOKEN = "424242:e2e-token"
PLUGIN_DIR = Path(__file__).resolve().parents[1]
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00"
    b"\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82"
)


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PYTHONPATH entry under which the ``telegram`` entry point is installed."""
    yield plugin_pythonpath(PLUGIN_DIR, "telegram", tmp_path_factory.mktemp("plugin"))


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


Daemon = tuple[FakeBotAPI, FakeModelServer, ServedDaemon]


@pytest.fixture
async def daemon(tmp_path: Path, plugin_path: str) -> AsyncIterator[Daemon]:
    async with _serve(tmp_path, plugin_path) as running:
        yield running


@contextlib.asynccontextmanager
async def _serve(tmp_path: Path, plugin_path: str, *settings: tuple[str, str]) -> AsyncIterator[Daemon]:
    """``homeagent serve`` with the plugin against a loopback Bot API; ``settings`` are set first."""
    async with FakeBotAPI(TOKEN) as api, FakeModelServer(FakeModel(responder=_answer)) as model:
        everything = (
            ("core.llm.sources.deepseek.base_url", model.base_url),
            ("core.llm.sources.deepseek.vision", "true"),
            ("plugin.telegram.bot_token", TOKEN),
            ("plugin.telegram.api_base", api.base),
            ("plugin.telegram.poll_timeout", "2"),
            *settings,
        )
        # secrets: the token is masked by `config set` and never reaches the log
        async with serve_daemon(tmp_path / "home", daemon_env("telegram", pythonpath=plugin_path),
                                settings=everything, secrets=[TOKEN], start_timeout=90, stop_timeout=30) as daemon:
            yield api, model, daemon


async def test_telegram_end_to_end_pairing_reply_photo_and_timer(daemon: Daemon):
    api, model, served = daemon
    transcript: list[str] = []

    api.private(5551, "Mia", text="hi there")
    transcript.append("Mia (Telegram 5551) -> bot: hi there")
    sent = await api.next_sent(timeout=30)
    transcript.append(f"bot -> Mia: {sent['text']}")
    assert "Pairing code" in sent["text"]
    assert not any("Mia (Telegram 5551)" in str(r["messages"]) for r in model.model.requests)
    code = sent["text"].split("Pairing code: ")[1].split()[0]
    await served.cli("pairing", "approve", code, "--person", "Mia")
    # Linked as a child, Mia may also set timers (an approved but unlinked sender is a guest).
    await served.cli("people", "add", "Mia", "--role", "child")
    await served.cli("people", "link", "Mia", "telegram", "5551")

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


async def test_telegram_webhook_end_to_end(tmp_path: Path, plugin_path: str):
    port = free_port()
    hook = "https://home.example.com/tg/hook"
    listener = f"http://127.0.0.1:{port}/tg/hook"  # where the TLS reverse proxy forwards ``hook``
    transcript: list[str] = []
    async with _serve(tmp_path, plugin_path, ("plugin.telegram.mode", "webhook"),
                      ("plugin.telegram.webhook_url", hook), ("plugin.telegram.webhook_port", str(port))) as daemon:
        api, _model, served = daemon
        assert api.webhook["url"] == hook and api.webhook["secret_token"]
        api.private(5551, "Mia", text="hi there")
        transcript.append("Mia (Telegram 5551) -> bot: hi there   [POSTed to the webhook]")
        assert await api.post_updates(listener, secret="guessed") == [403]
        assert await api.post_updates(listener) == [200]
        sent = await api.next_sent(timeout=30)
        transcript.append(f"bot -> Mia: {sent['text']}")
        code = sent["text"].split("Pairing code: ")[1].split()[0]
        await served.cli("pairing", "approve", code)

        api.private(5551, "Mia", text="what's for dinner?")
        transcript.append("Mia (Telegram 5551) -> bot: what's for dinner?   [POSTed to the webhook]")
        assert await api.post_updates(listener) == [200]
        sent = await api.next_sent()
        transcript.append(f"bot -> Mia: {sent['text']}")
        assert sent["text"] == "got: Mia (Telegram 5551): what's for dinner?"
        assert "getUpdates" not in api.calls
    assert api.webhook["url"] == hook  # left set while the daemon is down: Telegram keeps the updates
    print("\n".join(["", "Telegram webhook transcript (platform side):", *transcript]))
