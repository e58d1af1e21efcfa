"""The telegram plugin on the real kernel, against a loopback Bot API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from homeagent_plugin_telegram import make_plugin
from telegram_fake import BOT_ID, USERNAME, FakeBotAPI

from homeagent_sdk.errors import PluginError
from homeagent_sdk.pairing import PairingStore
from homeagent_sdk.testing import AgentHarness, ToolCallReply

TOKEN = "123456:ABC-test-token"
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00"
    b"\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82"
)


@pytest.fixture
async def api() -> AsyncIterator[FakeBotAPI]:
    async with FakeBotAPI(TOKEN) as fake:
        yield fake


def _plugin(agent: AgentHarness, api: FakeBotAPI, **settings: Any) -> Any:
    plugin = make_plugin()
    agent.register(plugin)
    agent.set("plugin.telegram.bot_token", TOKEN)
    agent.set("plugin.telegram.api_base", api.base)
    agent.set("plugin.telegram.poll_timeout", 2)
    agent.set("plugin.telegram.reconnect_min", 0.05)
    for key, value in settings.items():
        agent.set(f"plugin.telegram.{key}", value)
    return plugin


async def test_stranger_gets_a_code_then_replies_come_with_a_typing_indicator(agent: AgentHarness, api: FakeBotAPI):
    _plugin(agent, api)
    agent.model.add("你好 *Ann* _[x](y)")
    await agent.start()

    api.private(42, "Ann", text="hello")
    sent = await api.next_sent()
    assert sent["chat_id"] == 42 and "Pairing code" in sent["text"] and agent.model.requests == []
    code = sent["text"].split("Pairing code: ")[1].split()[0]
    store = PairingStore(agent.data_dir / "plugin_data" / "telegram" / "pairing.db")
    store.approve(code)

    api.private(42, "Ann", text="hello again")
    sent = await api.next_sent()
    assert sent == {"method": "sendMessage", "chat_id": 42, "text": "你好 *Ann* _[x](y)"}  # plain text, no parse_mode
    assert {"chat_id": 42, "action": "typing"} in api.actions
    assert agent.model.requests[0]["messages"][-1]["content"] == "Ann (Telegram 42): hello again"


async def test_groups_need_an_at_mention_or_a_reply_to_the_bot(agent: AgentHarness, api: FakeBotAPI):
    _plugin(agent, api, allow_from="group:-100200")
    agent.model.add("one", "two")
    await agent.start()

    api.group(-100200, 5, "Bo", text="just chatting")
    api.group(-100200, 5, "Bo", text=f"@{USERNAME} what time is it",
              entities=[{"type": "mention", "offset": 0, "length": len(USERNAME) + 1}])
    sent = await api.next_sent()
    assert (sent["chat_id"], sent["text"]) == (-100200, "one")
    assert agent.model.requests[0]["messages"][-1]["content"] == (  # the chatter before was remembered
        "Said in this group since you last spoke (not to you):\nBo (Telegram 5): just chatting\n\n"
        "Bo (Telegram 5): what time is it"
    )

    bot_message = {"message_id": 1, "date": 0, "chat": {"id": -100200, "type": "supergroup"},
                   "from": {"id": BOT_ID, "is_bot": True, "first_name": "Home"}, "text": "one"}
    api.group(-100200, 6, "Cy", text="and tomorrow?", reply_to_message=bot_message)
    assert (await api.next_sent())["text"] == "two"
    assert len(agent.model.requests) == 2


async def test_photo_and_voice_reach_the_model(agent: AgentHarness, api: FakeBotAPI):
    _plugin(agent, api, access="open")
    agent.model.add("a cat", "heard you")
    await agent.start()
    api.add_file("big", PNG, "photos/file_1.png")
    api.private(7, "Di", caption="what is it", photo=[
        {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 10},
        {"file_id": "big", "file_unique_id": "b", "width": 800, "height": 800, "file_size": len(PNG)},
    ])
    assert (await api.next_sent())["text"] == "a cat"
    content = agent.model.requests[0]["messages"][-1]["content"]
    assert content[0]["text"] == "Di (Telegram 7): what is it"
    assert content[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")

    api.add_file("v1", b"OggS fake voice", "voice/file_2.oga")
    api.private(7, "Di", voice={"file_id": "v1", "file_unique_id": "v", "duration": 2, "mime_type": "audio/ogg"})
    assert (await api.next_sent())["text"] == "heard you"
    assert agent.model.requests[1]["messages"][-1]["content"][1]["type"] == "audio_url"


async def test_flood_control_and_conflicts_are_waited_out(agent: AgentHarness, api: FakeBotAPI):
    plugin = _plugin(agent, api, access="open")
    agent.model.add("after the flood")
    api.conflict_next()
    await agent.start()
    api.fail_next("sendMessage", 429, retry_after=1)
    api.private(8, "Ed", text="hi")
    sent = await api.next_sent()
    assert sent["text"] == "after the flood"
    assert api.calls.count("sendMessage") == 2
    assert plugin.bridge.conflicts == 1


async def test_a_wrong_token_fails_the_plugin_clearly_and_the_agent_keeps_running(agent: AgentHarness, api: FakeBotAPI):
    _plugin(agent, api)
    agent.set("plugin.telegram.bot_token", "123:wrong")
    with pytest.raises(PluginError, match=r"Telegram refused plugin\.telegram\.bot_token"):
        await agent.start()
    assert api.unauthorized >= 1
    assert str(await agent.ask("still here?")) == "ok"


async def test_long_replies_split_and_the_agent_sends_files(agent: AgentHarness, api: FakeBotAPI, tmp_path: Path):
    _plugin(agent, api, access="open", text_limit=100)
    report = tmp_path / "report.txt"
    report.write_text("quarterly numbers")
    agent.model.add(
        ToolCallReply("output_send__telegram", {"payload": str(report), "type": "file",
                                                "meta": json.dumps({"conversation": "private:9"})}),
        "word " * 50,
    )
    await agent.start()
    # Sending a file is a tool: Flo needs rights (an unlinked sender is a guest, answers only).
    agent.app.people.add("Flo", "adult")
    agent.app.people.link("Flo", "telegram", "9")
    api.private(9, "Flo", text="send me the report")
    document = await api.next_sent()
    assert document["method"] == "sendDocument"
    assert document["document"] == {"filename": "report.txt", "data": b"quarterly numbers"}
    parts = [await api.next_sent() for _ in range(3)]
    assert [len(p["text"]) for p in parts] == [99, 99, 49]


# --------------------------------------------------------------------------- webhook mode

HOOK_URL = "https://home.example.com/telegram/hook"


def _listener(plugin: Any) -> str:
    """Where a reverse proxy in front of ``HOOK_URL`` would forward Telegram's POSTs."""
    hook = plugin.bridge.webhook
    return f"http://127.0.0.1:{hook.port}{hook.path}"


async def test_webhook_mode_sets_a_secret_webhook_and_answers_posted_updates(agent: AgentHarness, api: FakeBotAPI):
    import httpx

    plugin = _plugin(agent, api, access="open", mode="webhook", webhook_url=HOOK_URL, webhook_port=0)
    agent.model.add("hello from the webhook")
    await agent.start()
    secret = api.webhook["secret_token"]
    assert api.webhook["url"] == HOOK_URL and api.webhook["allowed_updates"] == ["message"]
    assert 32 <= len(secret) <= 256  # a random one: webhook_secret was not set
    assert "getUpdates" not in api.calls

    api.private(42, "Ann", text="hi")
    pending = list(api.updates)
    assert await api.post_updates(_listener(plugin), secret="wrong") == [403]
    assert await api.post_updates(_listener(plugin), secret="") == [403]
    assert agent.model.requests == [] and plugin.bridge.webhook.refused == 2
    assert await api.post_updates(_listener(plugin)) == [200]
    sent = await api.next_sent()
    assert (sent["chat_id"], sent["text"]) == (42, "hello from the webhook")
    assert agent.model.requests[0]["messages"][-1]["content"] == "Ann (Telegram 42): hi"

    api.updates.extend(pending)  # Telegram sends it again (it did not see our answer in time)
    assert await api.post_updates(_listener(plugin)) == [200]
    async with httpx.AsyncClient(timeout=10) as client:
        junk = await client.post(_listener(plugin), content=b"not json", headers={"X-Telegram-Bot-Api-Secret-Token":
                                                                                  secret})
        assert junk.status_code == 400
        assert (await client.get(_listener(plugin))).status_code == 405
    assert plugin.bridge.webhook.received == 1 and len(agent.model.requests) == 1
    assert "getUpdates" not in api.calls


async def test_a_configured_webhook_secret_is_the_one_telegram_must_send(agent: AgentHarness, api: FakeBotAPI):
    plugin = _plugin(agent, api, access="open", mode="webhook", webhook_url=HOOK_URL, webhook_port=0,
                     webhook_secret="kitchen_Door-42")
    agent.model.add("secret checked")
    await agent.start()
    assert api.webhook["secret_token"] == "kitchen_Door-42"
    api.group(-100200, 5, "Bo", text=f"@{USERNAME} hi")
    assert await api.post_updates(_listener(plugin)) == [200]
    assert (await api.next_sent())["text"] == "secret checked"


async def test_polling_mode_deletes_a_webhook_left_from_webhook_mode(
    agent: AgentHarness, api: FakeBotAPI
):
    api.webhook = {"url": HOOK_URL, "secret_token": "left-from-webhook-mode", "allowed_updates": ["message"]}
    _plugin(agent, api, access="open", mode="polling")
    agent.model.add("polling again")
    await agent.start()
    api.private(7, "Di", text="are you polling?")
    assert (await api.next_sent())["text"] == "polling again"
    assert api.webhook["url"] == "" and api.calls.index("deleteWebhook") < api.calls.index("getUpdates")


@pytest.mark.parametrize(("url", "secret", "error"), [
    ("", "", r"plugin\.telegram\.webhook_url is not set"),
    ("http://home.example.com/hook", "", r"webhook_url is http://home\.example\.com/hook: set the public HTTPS URL"),
    ("https://home.example.com:8080/hook", "", r"Telegram refused plugin\.telegram\.webhook_url .*80, 88, 443 or 8443"),
    (HOOK_URL, "no spaces allowed", r"webhook_secret must be 1-256 characters"),
])
async def test_webhook_settings_are_checked_and_a_refused_url_fails_the_plugin_clearly(
    agent: AgentHarness, api: FakeBotAPI, url: str, secret: str, error: str
):
    _plugin(agent, api, mode="webhook", webhook_port=0, webhook_url=url, webhook_secret=secret)
    with pytest.raises(PluginError, match=error):
        await agent.start()
    assert api.webhook["url"] == ""
    assert str(await agent.ask("still here?")) == "ok"


async def test_a_webhook_port_in_use_fails_the_plugin_naming_the_setting(agent: AgentHarness, api: FakeBotAPI):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        _plugin(agent, api, mode="webhook", webhook_url=HOOK_URL, webhook_port=taken.getsockname()[1])
        with pytest.raises(PluginError, match=r"cannot listen for the webhook on 127\.0\.0\.1:\d+ .*webhook_port"):
            await agent.start()
    assert api.webhook["url"] == ""  # Telegram was not pointed at a listener that is not there
