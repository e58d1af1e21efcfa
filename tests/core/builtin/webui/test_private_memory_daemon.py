"""Private memory end to end: a running daemon over real HTTP, two people with their own API keys
(``homeagent people key``), the model recording every request it was sent.

The mother's private remark reaches her own documents, knowledge and archived context, and no
byte of any model request made during the child's turn — not the recalled documents, not the
knowledge block, not a ``doc_query``/``knowledge_search`` result. What she says "告诉全家" is
the household's: the child's next turn is given it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from homeagent_core.config import ConfigStore
from homeagent_sdk.testing import ToolCallReply
from homeagent_sdk.visibility import EVERYONE, HOUSEHOLD, PRIVATE

SECRET = "下周三我要去医院复查，别跟孩子说"
FAMILY = "告诉全家：周六晚上七点家庭聚餐"


def as_key(url: str, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=20)


async def say(client: httpx.AsyncClient, text: str) -> dict[str, Any]:
    answer = await client.post("/api/v1/chat", json={"message": text})
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def sent(model: Any, since: int) -> str:
    return json.dumps(model.requests[since:], ensure_ascii=False)


async def test_the_mothers_private_remark_never_reaches_the_childs_turn(tmp_path: Path, start_daemon: Any):
    data = tmp_path / "data"
    data.mkdir()
    config = ConfigStore(data / "config.db")
    config.set("core.agent.max_context_size", 11)  # the smallest window: older turns are archived soon
    config.close()
    async with start_daemon(data) as daemon:
        people, model = daemon.app.people, daemon.model
        people.add("mum", "adult")
        people.add("kid", "child")
        mum_key, kid_key = people.new_key("mum"), people.new_key("kid")
        async with as_key(daemon.url, mum_key) as mum, as_key(daemon.url, kid_key) as kid:
            model.add(
                ToolCallReply(calls=[("doc_commit", {"content": SECRET}),
                                     ("knowledge_create", {"name": "health/checkup", "content": SECRET})]),
                "记下了",
            )
            await say(mum, SECRET)
            await say(mum, FAMILY)
            for i in range(6):  # unrelated turns push both remarks out of her window into documents
                await say(mum, f"今天的天气记录第{i}条：多云")
            memory = daemon.app.memory
            stored = {d.content: (d.person, d.visibility) for d in memory.documents.all()}
            assert stored[SECRET] == ("mum", PRIVATE)  # doc_commit's note and the archived input
            assert stored[FAMILY] == ("mum", HOUSEHOLD)
            assert memory.knowledge.get("health/checkup").person == "mum"
            assert SECRET in json.dumps(
                [h.document.content for h in await memory.documents.query("下周三 医院", 5, audience=EVERYONE)],
                ensure_ascii=False,
            )

            before = len(model.requests)
            model.add(
                ToolCallReply(calls=[("doc_query", {"query": "妈妈 下周三"}),
                                     ("knowledge_search", {"query": "下周三"})]),
                "我不知道哦",
            )
            await say(kid, "妈妈下周三要去哪里？")
            during = sent(model, before)
            assert len(model.requests) - before >= 2  # the question and the tool results were sent
            assert "妈妈下周三要去哪里" in during and '"found": 0' in during.replace("\\", "")
            for word in ("医院", "复查", SECRET):
                assert word not in during, word

            before = len(model.requests)
            await say(kid, "周六晚上家里有什么安排？")
            assert "家庭聚餐" in sent(model, before)

            # and the mother still has her own: doc_query brings it back into her conversation
            before = len(model.requests)
            model.add(ToolCallReply("doc_query", {"query": "下周三 医院 复查"}), "去医院复查")
            await say(mum, "我下周三要去哪里来着？")
            assert "医院" in sent(model, before)
            moved = [e.text for e in memory.threads.get("person:mum").events if e.kind == "cold_storage"]
            assert SECRET in moved
            assert all(e.kind != "cold_storage" for e in memory.context.events)  # not the owner's window


async def test_the_owner_shares_a_document_from_the_memory_page_and_no_one_else_can(daemon: Any):
    people = daemon.app.people
    people.add("mum", "adult")
    people.add("kid", "child")
    kid_key = people.new_key("kid")
    store = daemon.app.memory.documents
    doc = await store.add("the plumber comes on monday at nine", person="mum")
    async with daemon.client() as owner, as_key(daemon.url, kid_key) as kid:
        listed = (await owner.get("/api/v1/memory/documents", params={"q": "plumber monday"})).json()["documents"]
        assert [(d["id"], d["person"], d["visibility"]) for d in listed] == [(doc.id, "mum", PRIVATE)]
        refused = await kid.post("/api/v1/memory/visibility", json={"ids": [doc.id], "visibility": HOUSEHOLD})
        assert refused.status_code in (401, 403)
        bad = await owner.post("/api/v1/memory/visibility", json={"ids": [doc.id], "visibility": "everyone"})
        assert bad.status_code == 400 and "'household'" in bad.json()["error"]
        missing = await owner.post("/api/v1/memory/visibility", json={"ids": ["doc_nope"], "visibility": HOUSEHOLD})
        assert missing.status_code == 404 and "doc_nope" in missing.json()["error"]
        shared = await owner.post("/api/v1/memory/visibility", json={"ids": [doc.id], "visibility": HOUSEHOLD})
        assert shared.status_code == 200 and shared.json()["documents"] == [doc.id]
        before = len(daemon.model.requests)
        await say(kid, "水管工什么时候来？plumber monday")
        assert "the plumber comes on monday at nine" in sent(daemon.model, before)
