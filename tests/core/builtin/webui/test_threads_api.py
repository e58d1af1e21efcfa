"""Each person's own conversations through the web UI's API and /v1, over real HTTP.

Two people with their own API keys (``homeagent people key``) stand for two web logins; the
daemon's FakeModel records every request, so "not in the child's prompt" is read off the bytes
the kernel really sent.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)

SECRET = "下周三我要去医院复查，别跟孩子说"


def as_key(daemon: WebDaemon, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=daemon.url, headers={"Authorization": f"Bearer {key}"}, timeout=10)


def family(daemon: WebDaemon) -> tuple[str, str]:
    people = daemon.app.people
    people.add("mum", "adult")
    people.add("kid", "child")
    return people.new_key("mum"), people.new_key("kid")


async def test_each_person_sees_and_continues_only_their_own_threads(daemon: WebDaemon):
    mum_key, kid_key = family(daemon)
    async with as_key(daemon, mum_key) as mum, as_key(daemon, kid_key) as kid, daemon.client() as owner:
        said = await mum.post("/api/v1/chat", json={"message": SECRET})
        assert said.status_code == 200, said.text
        mums_thread = said.json()["thread"]
        assert mums_thread == "person:mum"
        assert SECRET in json.dumps(daemon.model.requests[-1], ensure_ascii=False)

        asked = await kid.post("/api/v1/chat", json={"message": "妈妈下周三要去哪里？"})
        assert asked.status_code == 200, asked.text
        assert SECRET not in json.dumps(daemon.model.requests[-1], ensure_ascii=False)

        new = (await kid.post("/api/v1/threads", json={"title": "homework"})).json()["thread"]
        assert new["id"].startswith("web:kid:") and new["person"] == "kid"
        sent = await kid.post("/api/v1/chat", json={"message": "2+2?", "thread": new["id"]})
        assert sent.json()["thread"] == new["id"]
        request = json.dumps(daemon.model.requests[-1], ensure_ascii=False)
        assert "妈妈下周三" not in request and SECRET not in request  # a new chat starts empty

        kids = (await kid.get("/api/v1/threads")).json()
        assert {t["id"] for t in kids["threads"]} == {"person:kid", new["id"]}
        assert kids["default"] == "person:kid"
        assert {t["id"] for t in (await mum.get("/api/v1/threads")).json()["threads"]} == {"person:mum"}
        owners = (await owner.get("/api/v1/threads")).json()
        assert {t["id"] for t in owners["threads"]} == {"main"}

        # Someone else's thread is not there for them, whichever way they ask.
        for path in ("/api/v1/threads/person:mum/history", "/api/v1/chat/history?thread=person:mum"):
            refused = await kid.get(path)
            assert refused.status_code == 404 and "GET /api/v1/threads" in refused.json()["error"]
        posted = await kid.post("/api/v1/chat", json={"message": "hi", "thread": "person:mum"})
        assert posted.status_code == 404
        assert (await owner.get("/api/v1/threads/person:kid/history")).status_code == 404

        history = (await mum.get(f"/api/v1/threads/{mums_thread}/history")).json()
        assert [(m["role"], m.get("speaker")) for m in history["messages"]] == [("user", "mum"), ("assistant", None)]
        assert history["messages"][0]["content"] == SECRET
        kid_history = (await kid.get("/api/v1/chat/history")).json()["messages"]
        assert [m["content"] for m in kid_history] == ["妈妈下周三要去哪里？", "好的"]
        owner_history = json.dumps((await owner.get("/api/v1/chat/history")).json(), ensure_ascii=False)
        assert SECRET not in owner_history and "妈妈下周三" not in owner_history


async def read_until(stream: Any, done: str, timeout: float = 10.0) -> str:
    """The SSE text of ``stream`` up to and including the first line containing ``done``."""
    seen = ""
    async with asyncio.timeout(timeout):
        async for line in stream.aiter_lines():
            seen += line + "\n"
            if done in line:
                return seen
    return seen


async def test_the_live_event_stream_shows_a_person_only_their_own_turns(daemon: WebDaemon):
    mum_key, kid_key = family(daemon)
    daemon.model.add("mum's answer", "kid's answer")
    async with (
        as_key(daemon, mum_key) as mum,
        as_key(daemon, kid_key) as kid,
        daemon.client() as owner,
        kid.stream("GET", "/api/v1/events") as kid_events,
        owner.stream("GET", "/api/v1/events") as owner_events,
    ):
        assert kid_events.status_code == 200 and owner_events.status_code == 200
        assert (await mum.post("/api/v1/chat", json={"message": SECRET})).status_code == 200
        assert (await kid.post("/api/v1/chat", json={"message": "is it sunny?"})).status_code == 200
        assert (await owner.post("/api/v1/chat", json={"message": "owner here"})).status_code == 200
        kids = await read_until(kid_events, "kid's answer")
        owners = await read_until(owner_events, "owner here")
    assert "is it sunny?" in kids and "kid's answer" in kids
    assert SECRET not in kids and "mum's answer" not in kids
    assert SECRET not in owners and "is it sunny?" not in owners


async def test_two_v1_keys_have_separate_threads(daemon: WebDaemon):
    mum_key, kid_key = family(daemon)
    threads: list[tuple[str, str]] = []

    async def record(event: Any) -> None:
        if event.name == "raw_input":
            threads.append((event.data["text"], event.data["thread"]))

    daemon.app.bus.subscribe(record, label="thread-recorder")
    async with daemon.client() as owner:
        assert (await owner.post("/api/v1/chat", json={"message": "the owner's plans"})).status_code == 200
    async with as_key(daemon, mum_key) as mum:
        assert (await mum.post("/api/v1/chat", json={"message": SECRET})).status_code == 200
    for key, text, user in ((mum_key, "mum via v1", "ide"), (kid_key, "kid via v1", "")):
        client = openai.AsyncOpenAI(base_url=daemon.url + "/v1", api_key=key, max_retries=0, timeout=10)
        async with client:
            extra = {"user": user} if user else {}
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}], **extra)
        request = json.dumps(daemon.model.requests[-1], ensure_ascii=False)
        assert "the owner's plans" not in request and SECRET not in request
    async with asyncio.timeout(10):
        while len(threads) < 4:
            await asyncio.sleep(0.01)
    assert dict(threads) == {
        "the owner's plans": "main",
        SECRET: "person:mum",
        "mum via v1": "v1:mum:ide",
        "kid via v1": "v1:kid:default",
    }
    async with as_key(daemon, kid_key) as kid:
        bad = await kid.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "user": "a/b"}
        )
    assert bad.status_code == 400 and "user must be" in bad.text


async def test_an_upload_goes_to_the_conversation_it_was_sent_in(daemon: WebDaemon):
    async with daemon.client() as owner:
        new = (await owner.post("/api/v1/threads", json={})).json()["thread"]["id"]
        sent = await owner.post(
            "/api/v1/chat/file",
            data={"message": "read this note", "thread": new},
            files={"file": ("note.txt", b"a shopping list", "text/plain")},
        )
        assert sent.status_code == 200, sent.text
        assert sent.json()["thread"] == new
        in_thread = (await owner.get(f"/api/v1/threads/{new}/history")).json()["messages"]
        main = (await owner.get("/api/v1/threads/main/history")).json()["messages"]
    assert [m["content"] for m in in_thread if m["role"] == "user"] == ["read this note"]
    assert not any(m["content"] == "read this note" for m in main)
