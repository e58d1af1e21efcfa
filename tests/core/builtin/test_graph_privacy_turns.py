"""Private graph memory in real turns: "我" is the speaker, and one person's facts stay theirs.

A real App with real memory under ``tmp_path`` and a FakeModel recording every request.
"""

from __future__ import annotations

import json

from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.types import InjectOptions, Principal


def web(person: str) -> InjectOptions:
    return InjectOptions(principal=Principal(person=person, door="webui"))


async def test_i_is_the_speaker_and_her_private_facts_reach_no_other_turn(harness):
    model = FakeModel(default="好的")
    h = await harness([], model=model, memory=True)
    h.app.people.add("mum", "adult")
    h.app.people.add("kid", "child")
    memory = h.app.memory
    assert memory.owner_name == h.app.people.owner().name

    await h.kernel.ask("我叫李梅，我住在北京", options=web("mum"))
    graph = memory.graph
    rows = {(graph.cache.entities[r.source_id].name, r.type, graph.cache.entities[r.target_id].name,
             r.person, r.visibility) for r in graph.cache.relations.values()}
    assert ("mum", "叫", "李梅", "mum", "private") in rows and ("mum", "住在", "北京", "mum", "private") in rows
    assert "用户" not in graph.cache.ids_by_name

    await h.kernel.ask("北京和李梅", options=web("mum"))  # her own turn recalls her facts
    assert "北京" in json.dumps(model.requests[-1]["messages"][0], ensure_ascii=False)

    mark = len(model.requests)
    model.add(ToolCallReply("memory_recall", {"query_intent": "北京, 李梅, mum"}), "不知道")
    await h.kernel.ask("北京和李梅是谁？", options=web("kid"))
    for request in model.requests[mark:]:
        system = "\n".join(m["content"] for m in request["messages"]
                           if m["role"] == "system" and isinstance(m["content"], str))
        assert "【记忆索引】" not in system, system
        tools = [m for m in request["messages"] if m["role"] == "tool"]
        assert all("住在" not in m["content"] and "李梅\"" not in m["content"] for m in tools), tools
    answered = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    assert answered and "nothing in graph memory" in answered[-1], answered


async def test_a_graph_from_before_people_becomes_the_owners_at_start(harness, tmp_path):
    from homeagent_core.memory.graph.store import GraphStore
    from homeagent_sdk.types import Triple

    data = tmp_path / "data"
    old = GraphStore(data / "memory" / "graph.db")  # library use: no person known
    old.commit([Triple("用户", "住在", "杭州"), Triple("小王", "喜欢", "咖啡")])
    old.close()
    h = await harness([], data=data, memory=True)
    memory = h.app.memory
    owner = h.app.people.owner().name
    assert memory.graph_migrated == 2
    rows = {(memory.graph.cache.entities[r.source_id].name, r.person) for r in memory.graph.cache.relations.values()}
    assert rows == {(owner, owner), ("小王", owner)}
    await h.stop()
    again = await harness([], data=data, memory=True)
    assert again.app.memory.graph_migrated == 0  # counted once, at the first start with people
