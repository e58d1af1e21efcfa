"""The channel kit: conversations, splitting, backoff, rate limits, pairing, and a bridge on the real kernel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from homeagent_core.cli._app import app as cli_app
from homeagent_sdk import hookimpl
from homeagent_sdk.bridge import ChatBridge
from homeagent_sdk.channels import (
    Backoff,
    Conversation,
    IncomingMessage,
    OutgoingMedia,
    RateLimiter,
    Sender,
    SlidingWindow,
    mentions_name,
    reconnect_setting,
    split_text,
)
from homeagent_sdk.pairing import PairingStore
from homeagent_sdk.testing import AgentHarness


def test_split_text_keeps_parts_within_the_limit_and_breaks_at_sentences():
    text = "第一句话。" * 30 + "\n\n" + "second paragraph. " * 20
    parts = split_text(text, 50)
    assert all(len(p) <= 50 for p in parts)
    assert "".join(parts).replace(" ", "") == text.replace(" ", "").replace("\n", "")
    assert parts[0].endswith("。")
    assert split_text("", 10) == [] and split_text("short", 10) == ["short"]
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    with pytest.raises(ValueError, match="limit"):
        split_text("a", 0)


def test_conversation_keys_round_trip_and_bad_ones_are_refused():
    conv = Conversation.parse("group:678")
    assert (conv.kind, conv.id, conv.key, conv.is_group) == ("group", "678", "group:678", True)
    for bad in ("678", "room:1", "private:", "private:a b"):
        with pytest.raises(ValueError):
            Conversation.parse(bad)


def test_mentions_match_names_as_words_and_cjk_anywhere():
    assert mentions_name("hey @Bot what's up", ["bot"])
    assert not mentions_name("robots are here", ["bot"])
    assert mentions_name("小助手今天几号", ["小助手"])
    assert not mentions_name("nothing", ["", " "])


def test_backoff_doubles_to_the_maximum_and_resets():
    backoff = Backoff(1, 8, jitter=0)
    assert [backoff.delay() for _ in range(5)] == [1, 2, 4, 8, 8]
    backoff.reset()
    assert backoff.delay() == 1


def test_the_reconnect_setting_drives_the_backoff():
    setting = reconnect_setting(minimum=0.01, description="Seconds before the first retry.")
    assert (setting.key, setting.type, setting.default, setting.min, setting.max, setting.category) == (
        "reconnect_min", "float", 1.0, 0.01, 60, "connection")
    assert setting.description == "Seconds before the first retry." and not setting.restart_required
    assert reconnect_setting().min == 0.05 and "doubles up to 60 s" in reconnect_setting().description

    class Settings:
        def __init__(self, values: dict[str, Any]) -> None:
            self.values = values

        def get(self, key: str, default: Any = None) -> Any:
            return self.values.get(key, default)

    backoff = Backoff.from_settings(Settings({"reconnect_min": "0.25"}))  # type: ignore[arg-type]
    backoff.jitter = 0
    assert [backoff.delay() for _ in range(3)] == [0.25, 0.5, 1.0] and backoff.maximum == 60.0
    assert Backoff.from_settings(Settings({})).initial == 1.0  # type: ignore[arg-type]
    assert Backoff.from_settings(Settings({"reconnect_min": None})).initial == 1.0  # type: ignore[arg-type]


async def test_rate_limiter_waits_for_tokens_and_sliding_window_drops():
    now = [0.0]
    limiter = RateLimiter(2.0, burst=2, clock=lambda: now[0])
    assert limiter._take("a") == 0 and limiter._take("a") == 0
    assert limiter._take("a") == pytest.approx(0.5)
    now[0] += 0.5
    assert limiter._take("a") == 0
    window = SlidingWindow(2, 60, clock=lambda: now[0])
    assert window.allow("x") and window.allow("x") and not window.allow("x")
    now[0] += 60
    assert window.allow("x")


def test_pairing_store_issues_one_code_and_remembers_decisions(tmp_path: Path):
    store = PairingStore(tmp_path / "pairing.db", renotify=3600)
    first = store.check("qq", "12345", "小王")
    again = store.check("qq", "12345", "小王")
    assert first.action == "pair" and first.notify and len(first.code) == 6
    assert again.action == "pair" and again.code == first.code and not again.notify
    assert store.check("qq", "1", allowed=True).action == "allow"
    store.approve(first.code.lower(), person="小王")
    decision = store.check("qq", "12345")
    assert (decision.action, decision.person) == ("allow", "小王")
    other = store.check("qq", "999").code
    store.deny(other)
    assert store.check("qq", "999").action == "ignore"
    with pytest.raises(KeyError, match="pairing list"):
        store.approve("NOPE00")


def test_a_revoked_sender_is_forgotten_and_asks_again_with_a_new_code(tmp_path: Path):
    store = PairingStore(tmp_path / "pairing.db", renotify=3600)
    code = store.check("qq", "12345", "小王").code
    store.approve(code, person="小王")
    revoked = store.revoke(code.lower())
    assert (revoked.account, revoked.status) == ("12345", "approved")
    assert store.get("qq", "12345") is None
    again = store.check("qq", "12345", "小王")
    assert again.action == "pair" and again.notify and again.code != code
    with pytest.raises(KeyError, match="pairing list"):
        store.revoke(code)


# --------------------------------------------------------------------------- a bridge on the real kernel


class ListBridge(ChatBridge):
    """A bridge whose 'platform' is a queue of what it sent."""

    def __init__(self, sdk: Any, sent: asyncio.Queue[tuple[str, str]], platform: str = "qq") -> None:
        super().__init__(sdk, channel="chat", platform=platform, label=platform.upper(), default_text_limit=40)
        self.sent = sent

    async def send_text(self, conversation: Conversation, text: str) -> None:
        self.sent.put_nowait((conversation.key, text))

    async def send_media(self, conversation: Conversation, media: OutgoingMedia) -> None:
        self.sent.put_nowait((conversation.key, f"<{media.kind} {media.name} {len(media.data or b'')}>"))


class BridgePlugin:
    name = "chat"

    def __init__(self) -> None:
        self.sent: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.bridge: ListBridge | None = None
        self.platform = "qq"

    @hookimpl
    def register_settings(self, registry: Any) -> None:
        for definition in ChatBridge.config_defs(text_limit=40):
            registry.add(definition)

    @hookimpl
    def register_output_channels(self, registry: Any) -> None:
        registry.add(ListBridge.channel_def("chat", label="QQ", send=self.deliver))

    async def deliver(self, payload: str, meta: dict[str, Any], type: str = "text") -> str:
        assert self.bridge is not None
        return await self.bridge.deliver(payload, meta, type)

    @hookimpl
    def startup(self, sdk: Any) -> None:
        self.bridge = ListBridge(sdk, self.sent, self.platform)

    @hookimpl
    def shutdown(self) -> None:
        if self.bridge is not None:
            self.bridge.close()


async def _next(queue: asyncio.Queue[tuple[str, str]]) -> tuple[str, str]:
    async with asyncio.timeout(10):
        return await queue.get()


async def test_unknown_sender_gets_only_a_code_then_talks_after_approval(agent: AgentHarness):
    plugin = BridgePlugin()
    agent.register(plugin)
    agent.model.add("你好，小王！" + "这是一个很长的回答，需要拆成几条消息发送。" * 3)
    await agent.start()
    bridge = plugin.bridge
    assert bridge is not None
    wang = IncomingMessage(Conversation("private", "12345"), Sender("12345", "小王"), "你好")

    assert await bridge.handle(wang) == "pairing"
    conv, text = await _next(plugin.sent)
    assert conv == "private:12345" and "配对码：" in text  # in the language 小王 wrote in
    assert agent.model.requests == []
    code = text.split("配对码：")[1].split()[0]

    result = CliRunner().invoke(cli_app, ["pairing", "approve", code, "--data", str(agent.data_dir)])
    assert result.exit_code == 0, result.output
    assert "approved qq 12345" in result.output

    assert await bridge.handle(wang) == "injected"
    parts = [await _next(plugin.sent) for _ in range(3)]
    assert {c for c, _ in parts} == {"private:12345"}
    assert all(len(t) <= 40 for _, t in parts) and parts[0][1].startswith("你好，小王！")
    assert agent.model.requests[0]["messages"][-1]["content"] == "小王 (QQ 12345): 你好"
    assert await agent.app.services.social.person_for_account("qq", "12345") == "小王"

    result = CliRunner().invoke(cli_app, ["pairing", "revoke", code, "--data", str(agent.data_dir)])
    assert result.exit_code == 0, result.output
    assert "revoked qq 12345" in result.output
    assert await bridge.handle(wang) == "pairing"
    conv, text = await _next(plugin.sent)
    assert "配对码：" in text and code not in text
    assert len(agent.model.requests) == 1


async def test_groups_answer_only_when_mentioned_and_pair_as_a_whole(agent: AgentHarness):
    plugin = BridgePlugin()
    agent.register(plugin)
    agent.set("plugin.chat.mention_names", "小助手")
    agent.set("plugin.chat.allow_from", "group:678")
    agent.model.add("在")
    await agent.start()
    bridge = plugin.bridge
    assert bridge is not None
    group = Conversation("group", "678")

    assert await bridge.handle(IncomingMessage(group, Sender("1", "甲"), "随便聊聊")) == "remembered"
    assert agent.model.requests == []
    assert await bridge.handle(IncomingMessage(group, Sender("2", "乙"), "小助手在吗")) == "injected"
    assert await _next(plugin.sent) == ("group:678", "在")
    assert agent.model.requests[0]["messages"][-1]["content"].endswith("\n\n乙 (QQ 2): 小助手在吗")

    stranger = Conversation("group", "999")
    assert await bridge.handle(IncomingMessage(stranger, Sender("3", "丙"), "hi", mentioned=True)) == "pairing"
    assert (await _next(plugin.sent))[0] == "group:999"


async def test_group_chatter_without_a_mention_is_remembered_not_answered(agent: AgentHarness):
    plugin = BridgePlugin()
    agent.register(plugin)
    agent.set("plugin.chat.allow_from", "group:678,group:679")
    agent.set("plugin.chat.groups", {"679": {"remember": False}, "678": {"trusted": True}})
    agent.model.add("周六下午三点见", "好的")
    await agent.start()
    bridge = plugin.bridge
    assert bridge is not None
    home, quiet, stranger = Conversation("group", "678"), Conversation("group", "679"), Conversation("group", "999")

    assert await bridge.handle(IncomingMessage(home, Sender("1", "小张"), "周六去公园吧")) == "remembered"
    assert await bridge.handle(IncomingMessage(home, Sender("2", "小李"), "下午三点可以")) == "remembered"
    assert await bridge.handle(IncomingMessage(quiet, Sender("1", "小张"), "这里不记")) == "ignored: not mentioned"
    assert await bridge.handle(IncomingMessage(stranger, Sender("3", "丙"), "陌生群")) == "ignored: not mentioned"
    assert agent.model.requests == [] and plugin.sent.empty()
    logged = agent.app.services.conversation_log.tail(10)
    assert [(r["role"], r["channel"], r["content"]) for r in logged] == [
        ("user", "chat:group:678", "小张 (QQ 1): 周六去公园吧"),
        ("user", "chat:group:678", "小李 (QQ 2): 下午三点可以"),
    ]
    assert await agent.app.services.social.person_for_account("qq", "1") == "小张"

    mention = IncomingMessage(home, Sender("1", "小张"), "我们约的几点？", mentioned=True)
    assert await bridge.handle(mention) == "injected"
    assert await _next(plugin.sent) == ("group:678", "周六下午三点见")
    assert agent.model.requests[0]["messages"][-1]["content"] == (
        "Said in this group since you last spoke (not to you):\n"
        "小张 (QQ 1): 周六去公园吧\n小李 (QQ 2): 下午三点可以\n\n"
        "小张 (QQ 1): 我们约的几点？"
    )
    assert await bridge.handle(IncomingMessage(home, Sender("2", "小李"), "收到", mentioned=True)) == "injected"
    assert await _next(plugin.sent) == ("group:678", "好的")
    assert agent.model.requests[1]["messages"][-1]["content"] == "小李 (QQ 2): 收到"  # shown once


async def test_sends_to_unapproved_chats_and_bad_meta_are_refused(agent: AgentHarness):
    plugin = BridgePlugin()
    agent.register(plugin)
    await agent.start()
    bridge = plugin.bridge
    assert bridge is not None
    with pytest.raises(ValueError, match="conversation"):
        await bridge.deliver("hi", {}, "text")
    with pytest.raises(ValueError, match="not been approved"):
        await bridge.deliver("hi", {"conversation": "private:42"}, "text")
    with pytest.raises(ValueError, match="neither"):
        agent.set("plugin.chat.access", "open")
        await bridge.deliver("no-such-file.png", {"conversation": "private:42"}, "image")


async def test_floods_and_huge_messages(agent: AgentHarness):
    plugin = BridgePlugin()
    agent.register(plugin)
    agent.set("plugin.chat.access", "open")
    agent.set("plugin.chat.flood_limit", 2)
    agent.set("plugin.chat.max_input_chars", 100)
    agent.model.add("a")
    agent.model.add("b")
    await agent.start()
    bridge = plugin.bridge
    assert bridge is not None
    chat = Conversation("private", "7")
    huge = IncomingMessage(chat, Sender("7", "Ann"), "x" * 5000)
    assert await bridge.handle(huge) == "injected"
    assert await bridge.handle(IncomingMessage(chat, Sender("7", "Ann"), "again")) == "injected"
    assert await bridge.handle(IncomingMessage(chat, Sender("7", "Ann"), "flood")) == "ignored: flood"
    await _next(plugin.sent)
    assert "[…cut 4900 characters]" in agent.model.requests[0]["messages"][-1]["content"]


def test_pairing_routes_list_approve_and_deny_over_http(tmp_path: Path):
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from homeagent_sdk.bridge import pairing_routes

    store = PairingStore(tmp_path / "pairing.db")
    first = store.check("qq", "1", "甲").code
    second = store.check("qq", "2", "乙").code
    tables: list[PairingStore | None] = [None]
    app = Starlette(routes=[Route(p, e, methods=m) for p, e, m in pairing_routes(lambda: tables[0])])
    with TestClient(app) as client:
        assert client.get("/pairing").status_code == 503
        tables[0] = store
        assert {r["code"] for r in client.get("/pairing", params={"status": "pending"}).json()} == {first, second}
        approved = client.post("/pairing/approve", json={"code": first, "person": "小甲"}).json()
        assert (approved["status"], approved["person"]) == ("approved", "小甲")
        assert client.post("/pairing/deny", json={"code": second}).json()["status"] == "denied"
        assert client.post("/pairing/deny", json={"code": "NOPE00"}).status_code == 404
        assert client.post("/pairing/approve", content=b"junk").status_code == 400
        assert client.get("/pairing", params={"status": "odd"}).status_code == 400
        assert store.check("qq", "1").action == "allow" and store.check("qq", "2").action == "ignore"
        assert client.post("/pairing/revoke", json={"code": first}).json()["account"] == "1"
        assert client.post("/pairing/revoke", json={"code": first}).status_code == 404
    assert store.check("qq", "1").action == "pair"
    store.close()


async def test_the_same_person_on_two_apps_is_linked_by_the_owner(agent: AgentHarness):
    plugin = BridgePlugin()
    agent.register(plugin)
    agent.model.add("hi", "hi again")
    await agent.start()
    assert plugin.bridge is not None
    social = agent.app.services.social
    await social.link_account("小王", "qq", "12345")

    plugin.bridge.platform, plugin.bridge.label = "tg", "TG"  # the same bridge code speaking for a second app
    store = plugin.bridge.pairing
    code = store.check("tg", "999", "Wang").code
    store.approve(code, person="小王")
    chat = Conversation("private", "999")
    assert await plugin.bridge.handle(IncomingMessage(chat, Sender("999", "Wang"), "hello")) == "injected"
    await _next(plugin.sent)
    assert agent.model.requests[0]["messages"][-1]["content"] == "小王 (TG 999): hello"
    assert await social.person_for_account("tg", "999") == "小王"
    assert await social.person_for_account("qq", "12345") == "小王"
    assert (await social.person("小王"))["traits"] == {"account:qq": "12345", "account:tg": "999"}


class SlowFirstBridge(ListBridge):
    """A bridge whose first sender's lookup is held until the test releases it."""

    def __init__(self, sdk: Any, sent: asyncio.Queue[tuple[str, str]]) -> None:
        super().__init__(sdk, sent)
        self.release = asyncio.Event()

    async def person_for(self, sender: Sender, approved_as: str = "") -> str:
        if sender.account == "1":
            await self.release.wait()
        return await super().person_for(sender, approved_as)


async def test_messages_of_one_conversation_are_handled_in_the_order_they_arrived(agent: AgentHarness):
    plugin = BridgePlugin()
    agent.register(plugin)
    agent.set("plugin.chat.allow_from", "group:678")
    agent.set("plugin.chat.groups", {"678": {"trusted": True}})
    agent.model.add("在")
    await agent.start()
    assert plugin.bridge is not None
    bridge = SlowFirstBridge(plugin.bridge.sdk, plugin.sent)
    plugin.bridge = bridge
    group = Conversation("group", "678")

    # A platform link delivers each frame in its own task: the chatter arrives first, the mention second.
    chatter = asyncio.ensure_future(bridge.handle(IncomingMessage(group, Sender("1", "甲"), "周六去公园吧")))
    mention = asyncio.ensure_future(bridge.handle(IncomingMessage(group, Sender("2", "乙"), "在吗", mentioned=True)))
    await asyncio.wait({mention}, timeout=0.5)  # the mention must not overtake the chatter meanwhile
    assert not mention.done()
    bridge.release.set()
    assert await asyncio.gather(chatter, mention) == ["remembered", "injected"]

    assert await _next(plugin.sent) == ("group:678", "在")
    assert agent.model.requests[0]["messages"][-1]["content"] == (
        "Said in this group since you last spoke (not to you):\n甲 (QQ 1): 周六去公园吧\n\n乙 (QQ 2): 在吗"
    )
    logged = agent.app.services.conversation_log.tail(5, accept=lambda r: r["channel"] == "chat:group:678")
    assert logged[0]["content"] == "甲 (QQ 1): 周六去公园吧"


async def test_a_display_name_never_links_a_sender_into_an_existing_person(agent: AgentHarness):
    """A stranger calling themselves "Mum", approved without a person, is not the owner's Mum."""
    plugin = BridgePlugin()
    agent.register(plugin)
    agent.model.add("hello")
    await agent.start()
    assert plugin.bridge is not None
    social = agent.app.services.social
    await social.link_account("Mum", "tg", "555")  # the real Mum, known from another app

    store = plugin.bridge.pairing
    store.approve(store.check("qq", "42", "Mum").code)  # approved without --person
    chat = Conversation("private", "42")
    assert await plugin.bridge.handle(IncomingMessage(chat, Sender("42", "Mum"), "it's me")) == "injected"
    await _next(plugin.sent)
    assert agent.model.requests[0]["messages"][-1]["content"] == "Mum (QQ 42): it's me"
    assert await social.person_for_account("qq", "42") == "Mum (QQ 42)"
    assert (await social.person("Mum"))["traits"] == {"account:tg": "555"}


def test_pairing_codes_are_capped_rate_limited_and_expire_per_platform(tmp_path: Path):
    now = [1000.0]
    store = PairingStore(
        tmp_path / "pairing.db", max_pending=5, new_per_minute=3, expire_after=3600, clock=lambda: now[0]
    )
    issued = [store.check("qq", str(n), f"stranger {n}") for n in range(4)]
    assert [d.action for d in issued] == ["pair", "pair", "pair", "ignore"]
    assert issued[3].reason == "rate limited" and store.get("qq", "3") is None
    assert store.check("tg", "1").action == "pair"  # another platform has its own limits
    now[0] += 61
    more = [store.check("qq", str(n)) for n in range(10, 14)]
    assert [d.action for d in more] == ["pair", "pair", "ignore", "ignore"]
    assert more[2].reason == "too many pending" and len(store.list("pending")) == 6
    store.approve(issued[0].code)  # a decision frees a place
    assert store.check("qq", "12").action == "pair"
    now[0] += 3600
    assert store.get("qq", "1") is not None
    again = store.check("qq", "1")  # the code expired: forgotten, a new one is issued
    assert again.action == "pair" and again.code != issued[1].code and again.notify
    with pytest.raises(KeyError):
        store.approve(issued[2].code)
    assert store.check("qq", "0").action == "allow"  # approved senders never expire


async def test_a_crowd_of_strangers_gets_a_few_codes_not_one_each(agent: AgentHarness):
    plugin = BridgePlugin()
    agent.register(plugin)
    await agent.start()
    bridge = plugin.bridge
    assert bridge is not None
    results = [
        await bridge.handle(IncomingMessage(Conversation("private", str(n)), Sender(str(n), f"s{n}"), "hi"))
        for n in range(300)
    ]
    assert results.count("pairing") == 10 and results.count("ignored: rate limited") == 290
    assert plugin.sent.qsize() == 10 and len(bridge.pairing.list("pending")) == 10
    assert agent.model.requests == []


async def test_a_message_the_platform_delivers_twice_is_answered_once(agent: AgentHarness):
    plugin = BridgePlugin()
    agent.register(plugin)
    agent.set("plugin.chat.allow_from", "5")
    agent.model.add("one", "two")
    await agent.start()
    bridge = plugin.bridge
    assert bridge is not None
    chat, ann = Conversation("private", "5"), Sender("5", "Ann")
    assert await bridge.handle(IncomingMessage(chat, ann, "继续", message_id="101")) == "injected"
    await agent.model.wait_started(1)
    assert await bridge.handle(IncomingMessage(chat, ann, "继续", message_id="101")) == "injected"  # re-delivered
    assert await bridge.handle(IncomingMessage(chat, ann, "再说一遍", message_id="102")) == "injected"
    await agent.model.wait_started(2)  # the second model call is the next message, not the re-delivery
    assert [r["messages"][-1]["content"] for r in agent.model.requests] == ["Ann (QQ 5): 继续", "Ann (QQ 5): 再说一遍"]
    assert [await _next(plugin.sent) for _ in range(2)] == [("private:5", "one"), ("private:5", "two")]


async def test_each_chat_is_its_own_conversation_and_no_one_reads_anothers(agent: AgentHarness):
    secret = "下周三我要去医院复查，别跟孩子说"
    plugin = BridgePlugin()
    agent.register(plugin)
    agent.set("plugin.chat.allow_from", "1,2,group:678")
    agent.set("plugin.chat.mention_names", "小助手")
    await agent.start()
    bridge = plugin.bridge
    assert bridge is not None
    mum, aunt = Conversation("private", "1"), Conversation("private", "2")

    assert await bridge.handle(IncomingMessage(mum, Sender("1", "妈妈"), secret)) == "injected"
    await _next(plugin.sent)
    assert secret in str(agent.model.requests[-1])
    assert await bridge.handle(IncomingMessage(aunt, Sender("2", "姨妈"), "妈妈下周三要去哪里？")) == "injected"
    await _next(plugin.sent)
    group = IncomingMessage(Conversation("group", "678"), Sender("2", "姨妈"), "小助手，妈妈下周三在哪？")
    assert await bridge.handle(group) == "injected"
    await _next(plugin.sent)
    for request in agent.model.requests[1:]:
        assert secret not in str(request) and "医院" not in str(request)
    assert await bridge.handle(IncomingMessage(mum, Sender("1", "妈妈"), "提醒我带病历")) == "injected"
    await _next(plugin.sent)
    assert secret in str(agent.model.requests[-1])  # her own conversation goes on
    logged = [
        json.loads(line)
        for path in sorted((agent.data_dir / "memory" / "text").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    threads = {r["thread"] for r in logged if r["role"] == "user"}
    assert threads == {"qq:private:1", "qq:private:2", "qq:group:678"}
