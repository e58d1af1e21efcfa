"""End to end: a real ``homeagent serve`` with this plugin installed, a loopback OneBot v11
implementation and a loopback OpenAI-compatible model.

The plugin is installed the way a user installs it (pip, into a directory on the daemon's
``PYTHONPATH``) unless the environment already has it (``make test`` installs it).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from onebot_fake import FakeOneBot, png_bytes, text_of

from homeagent_sdk.testing import (
    FakeModel,
    FakeModelServer,
    ServedDaemon,
    ToolCallReply,
    daemon_env,
    plugin_pythonpath,
    serve_daemon,
)

TOKEN = "e2e-token"
PLUGIN_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PYTHONPATH entry under which the ``onebot`` entry point is installed."""
    yield plugin_pythonpath(PLUGIN_DIR, "onebot", tmp_path_factory.mktemp("plugin"))


def _answer(request: dict[str, Any]) -> Any:
    message = request["messages"][-1]
    last = message.get("content")
    if message["role"] == "tool":
        return "好的，1 秒后提醒你"
    if isinstance(last, str) and last.endswith("1 秒后提醒我喝水"):
        return ToolCallReply("timer_set", {"duration": "1s", "message": "提醒小王喝水"})
    if isinstance(last, str) and "timer: 提醒小王喝水" in last:
        return "小王，该喝水了！"
    if isinstance(last, list):
        kinds = [block["type"] for block in last]
        return f"我看到了一张图片 ({', '.join(kinds)})"
    return f"收到：{last}"


Daemon = tuple[FakeOneBot, FakeModelServer, ServedDaemon]


@contextlib.asynccontextmanager
async def _serve(tmp_path: Path, plugin_path: str, token: str) -> AsyncIterator[Daemon]:
    """A daemon configured for the fake implementation (its plugin sends ``token``)."""
    fake = await FakeOneBot(access_token=TOKEN).start_server()
    try:
        async with FakeModelServer(FakeModel(responder=_answer)) as model:
            settings = (
                ("core.llm.sources.deepseek.base_url", model.base_url),
                ("core.llm.sources.deepseek.vision", "true"),
                ("plugin.onebot.ws_url", fake.ws_url),
                ("plugin.onebot.access_token", token),
                ("plugin.onebot.reconnect_min", "0.05"),
            )
            env = daemon_env("onebot", pythonpath=plugin_path)
            # secrets: the access token never reaches the log
            async with serve_daemon(tmp_path / "home", env, settings=settings, secrets=[token],
                                    start_timeout=90, stop_timeout=30) as daemon:
                yield fake, model, daemon
    finally:
        await fake.close()


@pytest.fixture
async def daemon(tmp_path: Path, plugin_path: str) -> AsyncIterator[Daemon]:
    async with _serve(tmp_path, plugin_path, TOKEN) as running:
        await running[0].wait_connected()
        yield running


async def test_a_wrong_access_token_is_reported_and_the_daemon_keeps_answering(tmp_path: Path, plugin_path: str):
    async with _serve(tmp_path, plugin_path, "not-the-token") as (fake, _model, daemon):
        # The connection is made in the background, after the daemon's doors opened.
        said = await daemon.printed("refused the access token (HTTP 403)")
        assert "onebot" in said and "plugin.onebot.access_token" in said
        answer = await daemon.cli("ask", "are you there?")
        assert answer.strip() == "收到：are you there?"
        assert fake.rejected and set(fake.rejected) == {403}


async def test_qq_end_to_end_pairing_reply_photo_and_timer(daemon: Daemon):
    fake, model, served = daemon
    transcript: list[str] = []

    await fake.private(12345, "小王", "你好")
    transcript.append("小王 (QQ 12345) -> bot: 你好")
    sent = await fake.next_sent()
    transcript.append(f"bot -> 小王: {text_of(sent)}")
    assert "配对码：" in text_of(sent)  # in the language 小王 wrote in
    assert not any("小王 (QQ 12345): 你好" in str(r["messages"]) for r in model.model.requests)
    code = text_of(sent).split("配对码：")[1].split()[0]
    listed = await served.cli("pairing", "list")
    assert code in listed and "pending" in listed
    await served.cli("pairing", "approve", code)
    # Approved, 小王 may talk; linked as a child, 小王 may also set timers (an unlinked sender is a guest).
    await served.cli("people", "add", "小王", "--role", "child")
    await served.cli("people", "link", "小王", "qq", "12345")

    await fake.private(12345, "小王", "今天吃什么")
    transcript.append("小王 (QQ 12345) -> bot: 今天吃什么")
    sent = await fake.next_sent()
    transcript.append(f"bot -> 小王: {text_of(sent)}")
    assert text_of(sent) == "收到：小王 (QQ 12345): 今天吃什么"

    fake.media["cat.png"] = png_bytes()
    photo = {"type": "image", "data": {"file": "cat.image", "url": fake.media_url("cat.png")}}
    await fake.private(12345, "小王", [photo, {"type": "text", "data": {"text": "这是什么"}}])
    transcript.append("小王 (QQ 12345) -> bot: [image cat.png] 这是什么")
    sent = await fake.next_sent()
    transcript.append(f"bot -> 小王: {text_of(sent)}")
    assert text_of(sent) == "我看到了一张图片 (text, image_url)"

    await fake.private(12345, "小王", "1 秒后提醒我喝水")
    transcript.append("小王 (QQ 12345) -> bot: 1 秒后提醒我喝水")
    for expected in ("好的，1 秒后提醒你", "小王，该喝水了！"):
        sent = await fake.next_sent()
        transcript.append(f"bot -> 小王: {text_of(sent)}")
        assert (sent["user_id"], text_of(sent)) == (12345, expected)
    print("\n".join(["", "QQ transcript (platform side):", *transcript]))
