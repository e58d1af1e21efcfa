"""End to end: a real Home Assistant (``hass`` with the demo integration, onboarded through its
own API), a real ``homeagent serve`` with this plugin, and the loopback model in tool mode.

The person speaks through the daemon's OpenAI-compatible ``/v1/chat/completions`` (the owner
with the admin key, a child with their own key); the scripted model calls the home tools the
way a real one would, and the test checks Home Assistant's own state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from ha_server import PLUGIN_ALIASES, HomeAssistant, running_home_assistant

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "homeagent-plugin-telegram" / "tests"))
from telegram_fake import FakeBotAPI

from homeagent_sdk.testing import FakeModel, FakeModelServer, ServedDaemon, ToolCallReply, daemon_env, serve_daemon

pytestmark = pytest.mark.timeout(300)

ADMIN_KEY = "home-e2e-admin-key-0123456789"
TELEGRAM_TOKEN = "424242:home-e2e-token"

#: What the scripted model does with what people say: (words in the message, tool, arguments).
SCRIPT: list[tuple[str, str, dict[str, Any]]] = [
    ("把客厅的灯关掉", "home_call", {"domain": "light", "service": "turn_off", "target": "客厅的灯"}),
    ("把厨房的灯关掉", "home_call", {"domain": "light", "service": "turn_off", "target": "厨房的灯"}),
    ("现在客厅几度", "home_state", {"target": "现在客厅几度"}),
    ("地下室漏水就告诉我", "home_watch_set", {"target": "地下室漏水", "state": "on", "notify": "Owner"}),
    ("有哪些提醒", "home_watch_list", {}),
    ("把前门锁打开", "home_secure_call", {"domain": "lock", "service": "unlock", "target": "前门"}),
    ("开前门", "home_call", {"domain": "lock", "service": "unlock", "target": "前门"}),
]


def _answer(request: dict[str, Any]) -> Any:
    message = request["messages"][-1]
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    notice = next((str(m["content"]) for m in request["messages"]
                   if m["role"] == "user" and "[家居提醒]" in str(m.get("content"))), "")
    if message["role"] == "tool":
        return f"已通知：{notice}" if notice else f"工具结果：{text}"
    if notice:  # pass the watch's news on to the owner's Telegram chat
        return ToolCallReply("output_send__telegram", {"payload": notice, "type": "text",
                                                       "meta": json.dumps({"conversation": "private:5551"})})
    for words, tool, arguments in SCRIPT:
        if words in text:
            return ToolCallReply(tool, arguments)
    return f"got: {text}"


@dataclass
class Daemon:
    served: ServedDaemon
    model: FakeModel
    telegram: FakeBotAPI

    @property
    def url(self) -> str:
        return self.served.url

    @property
    def output(self) -> list[str]:
        return self.served.output

    async def say(self, text: str, *, key: str = ADMIN_KEY) -> str:
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as http:
            answer = await http.post("/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                                      json={"model": "homeagent", "messages": [{"role": "user", "content": text}]})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["choices"][0]["message"]["content"])

    async def web_event(self, kind: str, words: str, timeout: float = 60.0) -> str:
        """The data of the first web UI event ``kind`` (replayed or live) whose data has ``words``."""
        async with (
            httpx.AsyncClient(base_url=self.url, timeout=timeout) as http,
            asyncio.timeout(timeout),
            http.stream("GET", "/api/v1/events", headers={"X-API-Key": ADMIN_KEY}) as stream,
        ):
            event = ""
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == kind and words in line:
                    return line[6:]
        raise AssertionError(f"no {kind} event with {words!r}")

    def dump(self) -> str:
        asked = [json.dumps(r["messages"][-1], ensure_ascii=False)[:300] for r in self.model.requests[-4:]]
        return "\n".join(asked) + "\n" + "".join(self.output)[-3000:]

    async def cli(self, *args: str) -> str:
        return await self.served.cli(*args)


@contextlib.asynccontextmanager
async def serve(tmp_path: Path, ha_url: str, token: str, *settings: tuple[str, str]) -> AsyncIterator[Daemon]:
    """``homeagent serve`` with the plugin pointed at ``ha_url`` (and the Telegram door on a loopback
    Bot API); stopped (SIGTERM) at the end."""
    async with FakeModelServer(FakeModel(responder=_answer)) as model, FakeBotAPI(TELEGRAM_TOKEN) as telegram:
        env = daemon_env("homeassistant,telegram", HOMEAGENT_WEBUI_API_KEY=ADMIN_KEY, HF_HUB_OFFLINE="1",
                         TRANSFORMERS_OFFLINE="1")
        everything = (
            ("plugin.telegram.bot_token", TELEGRAM_TOKEN),
            ("plugin.telegram.api_base", telegram.base),
            ("plugin.telegram.poll_timeout", "2"),
            ("core.llm.sources.deepseek.base_url", model.base_url),
            ("plugin.homeassistant.url", ha_url),
            ("plugin.homeassistant.token", token),
            ("plugin.homeassistant.reconnect_min", "0.2"),
            ("plugin.homeassistant.expose_entities", "lock.front_door,lock.kitchen_door"),
            ("plugin.homeassistant.aliases", json.dumps(PLUGIN_ALIASES, ensure_ascii=False)),
            *settings,
        )
        # secrets: the token is masked by `config set` and never reaches the log
        async with serve_daemon(tmp_path / "home", env, settings=everything, secrets=[token]) as served:
            assert served.url, served.text
            yield Daemon(served, model.model, telegram)


@pytest.fixture
async def home(tmp_path: Path) -> AsyncIterator[HomeAssistant]:
    async with running_home_assistant(tmp_path / "ha") as ha:
        yield ha


async def _wait_for(predicate: Any, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


async def test_an_evening_at_home(home: HomeAssistant, tmp_path: Path) -> None:
    transcript: list[str] = []

    async def say(text: str, *, who: str = "Owner", key: str = ADMIN_KEY) -> str:
        reply = await daemon.say(text, key=key)
        transcript.extend([f"{who}: {text}", f"HomeAgent: {reply}"])
        return reply

    async with serve(tmp_path, home.url, home.token) as daemon:
        assert (await home.state("light.living_room_rgbww_lights"))["state"] == "on"
        reply = await say("把客厅的灯关掉")
        assert (await home.state("light.living_room_rgbww_lights"))["state"] == "off", reply
        assert "light.living_room_rgbww_lights" in reply and '"state_changed"' in reply
        assert (await home.state("light.ceiling_lights"))["state"] == "on"  # only the one meant

        reply = await say("现在客厅几度")
        heat = await home.state("climate.heatpump")
        assert f'"current_temperature": {heat["attributes"]["current_temperature"]}' in reply

        # The owner lets the plugin's inputs (watches firing) speak for them: their web UI shows those turns.
        owner = json.loads(await daemon.cli("people", "list", "--json"))
        owner_name = next(p["name"] for p in owner if p["role"] == "owner")
        await daemon.cli("people", "link", owner_name, "door", "homeassistant")
        # ... and has paired their Telegram chat, where the news is passed on.
        daemon.telegram.private(5551, "Owner", text="hi")
        code = (await daemon.telegram.next_sent(timeout=60))["text"].split("Pairing code: ")[1].split()[0]
        await daemon.cli("pairing", "approve", code, "--person", owner_name)
        reply = await say("地下室漏水就告诉我")
        assert "watch_1 set" in reply
        await home.rest("POST", "/api/states/binary_sensor.basement_floor_wet", {"state": "on", "attributes": {
            "friendly_name": "Basement Floor Wet", "device_class": "moisture"}})
        transcript.append("(Home Assistant: binary_sensor.basement_floor_wet → on)")
        await _wait_for(lambda: any("[家居提醒]" in json.dumps(r["messages"], ensure_ascii=False)
                                    for r in daemon.model.requests))
        notice = next(json.dumps(r["messages"][-1], ensure_ascii=False) for r in daemon.model.requests
                      if "[家居提醒]" in json.dumps(r["messages"][-1], ensure_ascii=False))
        assert "Basement Floor Wet" in notice and "Owner" in notice
        try:
            shown = await daemon.web_event("agent_output", "已通知")  # the owner's web UI shows the turn's answer
        except TimeoutError:
            raise AssertionError(daemon.dump()) from None
        transcript.append(f"HomeAgent (web UI, from the home channel): {json.loads(shown)['payload']['content'][:90]}…")
        try:
            sent = await daemon.telegram.next_sent(timeout=60)
        except TimeoutError:
            raise AssertionError(daemon.dump()) from None
        assert sent["chat_id"] == 5551 and "Basement Floor Wet" in sent["text"], sent
        transcript.append(f"HomeAgent → Owner on Telegram: {sent['text'][:80]}…")
        reply = await say("有哪些提醒")
        assert '"watches": []' in reply  # a one-off watch is gone once it fired

        await daemon.cli("people", "add", "Kid", "--role", "child")
        kid = (await daemon.cli("people", "key", "Kid")).split()[-1]
        reply = await say("把前门锁打开", who="Kid", key=kid)
        assert "home_secure_call is not allowed for Kid" in reply, reply
        reply = await say("开前门", who="Kid", key=kid)
        assert "sensitive device" in reply, reply
        assert (await home.state("lock.front_door"))["state"] == "locked"

        await home.stop()
        transcript.append("(Home Assistant stops)")
        reply = await say("把厨房的灯关掉")
        assert "not connected" in reply or "went away" in reply, reply
        await home.start()
        transcript.append("(Home Assistant is back)")
        await home._wait_entities(asyncio.get_running_loop().time() + 60)
        await daemon.served.printed("connected again", timeout=60)
        # the reload after the reconnect runs in the background: wait until a call goes through
        reply = ""
        try:
            async with asyncio.timeout(120):
                while "工具结果：{" not in (reply := await say("把厨房的灯关掉")):
                    await asyncio.sleep(0.5)
        except TimeoutError:
            raise AssertionError(f"no call went through after the reconnect; last: {reply}\n{daemon.dump()}") from None
        await home.wait_state("light.kitchen_lights", "off")
    print("\n".join(["", "An evening at home (transcript):", *transcript]))


async def test_wrong_token_and_unreachable_server_are_plugin_errors(home: HomeAssistant, tmp_path: Path) -> None:
    async with serve(tmp_path / "a", home.url, "not-a-token") as daemon:
        doctor = await daemon.served.cli_output("doctor")
        assert "plugin homeassistant" in doctor and "refused the access token" in doctor, doctor
        async with httpx.AsyncClient(base_url=daemon.url, headers={"X-API-Key": ADMIN_KEY}) as http:
            listed = (await http.get("/api/v1/plugins")).text  # what the web UI's plugins page shows
        assert "refused the access token" in listed, listed
        assert (await daemon.say("hello")) == "got: hello"  # the daemon runs on
    async with serve(tmp_path / "b", "http://127.0.0.1:9", "some-token") as daemon:
        doctor = await daemon.served.cli_output("doctor")
        assert "cannot reach Home Assistant at ws://127.0.0.1:9/api/websocket" in doctor, doctor

