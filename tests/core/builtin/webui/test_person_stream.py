"""What a person's web chat streams and may stop, over real HTTP against a running daemon.

A message the agent sends to the web UI in someone's turn (``output_send__webui``) goes to that
person's stream and thread only; approval requests go to the owner's stream only, even the
asker's own; a person's Stop ends only a turn of their own.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from homeagent_sdk._fake_model import FakeReply, ToolCallReply

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)


def as_key(daemon: WebDaemon, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=daemon.url, headers={"Authorization": f"Bearer {key}"}, timeout=10)


async def read_until(stream: Any, done: str, timeout: float = 10.0) -> str:
    """The SSE text of ``stream`` up to and including the first line containing ``done``."""
    seen = ""
    async with asyncio.timeout(timeout):
        async for line in stream.aiter_lines():
            seen += line + "\n"
            if done in line:
                return seen
    return seen


async def test_a_message_sent_to_the_web_ui_in_a_persons_turn_reaches_only_that_person(daemon: WebDaemon):
    people = daemon.app.people
    people.add("mum", "adult")
    people.add("kid", "child")
    mum_key, kid_key = people.new_key("mum"), people.new_key("kid")
    daemon.model.add(
        ToolCallReply("output_send__webui", {"payload": "体检在周三 the check-up is on Wednesday", "type": "text",
                                             "meta": '{"proactive": true}'}),
        "sent",
        "kid's answer",
    )
    async with (
        as_key(daemon, mum_key) as mum,
        as_key(daemon, kid_key) as kid,
        daemon.client() as owner,
        kid.stream("GET", "/api/v1/events") as kid_events,
        owner.stream("GET", "/api/v1/events") as owner_events,
        mum.stream("GET", "/api/v1/events") as mum_events,
    ):
        said = await mum.post("/api/v1/chat", json={"message": "tell me on the page"})
        assert said.status_code == 200, said.text
        assert (await kid.post("/api/v1/chat", json={"message": "hi"})).status_code == 200
        assert (await owner.post("/api/v1/chat", json={"message": "owner here"})).status_code == 200
        mums = await read_until(mum_events, "channel_output")
        kids = await read_until(kid_events, "kid's answer")
        owners = await read_until(owner_events, "owner here")
    assert '"kind":"channel_output"' in mums and '"thread":"person:mum"' in mums
    assert "check-up" not in kids and "check-up" not in owners
    async with as_key(daemon, mum_key) as mum, daemon.client() as owner:
        history = json.dumps((await mum.get("/api/v1/chat/history")).json(), ensure_ascii=False)
        assert "the check-up is on Wednesday" in history
        assert "check-up" not in json.dumps((await owner.get("/api/v1/chat/history")).json(), ensure_ascii=False)


async def test_approval_requests_stream_to_the_owner_only(daemon: WebDaemon):
    people = daemon.app.people
    people.add("mum", "adult")
    mum_key = people.new_key("mum")
    daemon.model.add("mum's answer")
    async with (
        as_key(daemon, mum_key) as mum,
        daemon.client() as owner,
        mum.stream("GET", "/api/v1/events") as mum_events,
        owner.stream("GET", "/api/v1/events") as owner_events,
    ):
        # An approval event that names her turn's thread: hers, but still the owner's to see.
        daemon.app.bus.publish("approval_requested", {"id": 7, "person": "mum", "tool": "cmd_run",
                                                      "arguments": {"command": "id"}, "thread": "person:mum"})
        assert (await mum.post("/api/v1/chat", json={"message": "after the approval"})).status_code == 200
        owners = await read_until(owner_events, '"id":7')
        mums = await read_until(mum_events, "mum's answer")
    assert '"id":7' in owners
    assert "approval_requested" not in mums and "after the approval" in mums


async def test_a_persons_stop_ends_only_their_own_turn(daemon: WebDaemon):
    people = daemon.app.people
    people.add("mum", "adult")
    people.add("kid", "child")
    mum_key, kid_key = people.new_key("mum"), people.new_key("kid")
    daemon.model.add(FakeReply(hang=True))
    async with as_key(daemon, mum_key) as mum, as_key(daemon, kid_key) as kid:
        turn = asyncio.create_task(mum.post("/api/v1/chat", json={"message": "a long question"}))
        await daemon.model.wait_started()
        refused = await kid.post("/api/v1/chat/stop")
        assert refused.status_code == 200 and refused.json()["status"] == "idle"
        assert not turn.done() and daemon.app.kernel.turn is not None  # the mother's turn goes on
        stopped = await mum.post("/api/v1/chat/stop")
        assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
        async with asyncio.timeout(10):
            answer = await turn
        assert answer.status_code == 200, answer.text
