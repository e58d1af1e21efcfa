"""Lua plugins' data functions against the real memory, documents, knowledge, people, log and model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.app import App
from homeagent_sdk.testing import FakeEmbedder, FakeModel
from homeagent_sdk.types import ToolCall

EVERYTHING = """
sdk.register_tool("svc_run", { description = "use every data function" }, function()
  local out, errs = {}, {}
  local function keep(name, value, err)
    out[name] = value
    if err ~= nil then errs[name] = err end
  end
  keep("commit", sdk.memory.commit({ triples = {
    { subject = "小王", relation = "住在", object = "杭州" },
    { subject = "小王", relation = "喜欢", object = "龙井茶" } } }))
  keep("recall", sdk.memory.recall({ "小王" }, 2))
  keep("recall_text", sdk.memory.recall("小王"))
  keep("entities", sdk.memory.entities("小"))
  keep("relations", sdk.memory.relations("杭州"))
  keep("introspect", sdk.memory.introspect())
  keep("doc_id", sdk.doc.insert({ title = "笔记", content = "小王喜欢喝龙井茶" }))
  keep("docs", sdk.doc.query("龙井茶", 3))
  keep("doc_stats", sdk.doc.stats())
  keep("kb_name", sdk.knowledge.add("饮品/龙井", "杭州的绿茶"))
  keep("kb_hits", sdk.knowledge.search("绿茶", 3))
  keep("kb_list", sdk.knowledge.list())
  keep("person", sdk.social.get_person("小李"))
  keep("trait", sdk.social.get_trait("小李", "生日"))
  keep("no_trait", sdk.social.get_trait("小李", "血型"))
  keep("persons", sdk.social.list_persons())
  keep("person_relations", sdk.social.get_relations("小李"))
  keep("network", sdk.social.get_network("小李", 1))
  keep("log_id", sdk.text_memory.append({ role = "user", content = "Lua 写进对话记录", channel = "svc" }))
  keep("chat", sdk.llm.chat("你好"))
  keep("chat_messages", sdk.llm.chat({ { role = "user", content = "第二个问题" } }, { temperature = 0.2 }))
  keep("source", sdk.llm.current_source())
  keep("sources", sdk.llm.list_sources())
  return { out = out, errs = errs }
end)
sdk.register_tool("svc_cleanup", { description = "merge, purge and remove" }, function(args)
  local merged, merr = sdk.memory.merge("王小明", "小王")
  local purged, perr = sdk.memory.purge({ relation_type = "喜欢" }, true)
  local removed, rerr = sdk.doc.remove(args.doc_id)
  local bad, berr = sdk.text_memory.append({ content = "no role" })
  return { merged = merged, merr = merr, purged = purged, perr = perr, removed = removed, rerr = rerr,
           berr = berr }
end)
return { name = "svc" }
"""

LIMITED = """
sdk.register_tool("limited_run", { description = "what a memory-only plugin may do" }, function()
  local out = {}
  local _, e1 = sdk.doc.query("龙井茶", 3)
  local _, e2 = sdk.text_memory.append({ role = "user", content = "refused" })
  local _, e3 = sdk.social.get_person("小李")
  local _, e4 = sdk.llm.chat("hi")
  local _, e5 = sdk.knowledge.add("x/y", "z")
  local recalled, e6 = sdk.memory.recall({ "小王" })
  return { doc = e1, text = e2, social = e3, llm = e4, knowledge = e5, recall_err = e6,
           recalled = #recalled.relations }
end)
return { name = "limited" }
"""


def install(data: Path, name: str, script: str, caps: list[str]) -> None:
    folder = data / "plugins" / name
    folder.mkdir(parents=True)
    (folder / "plugin.json").write_text(json.dumps({"name": name, "version": "1.0.0", "capabilities": caps}))
    (folder / "main.lua").write_text(script, encoding="utf-8")


def answer(request: dict[str, Any]) -> str:
    return f"模型回答：{request['messages'][-1]['content']}"


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    data = tmp_path / "data"
    install(data, "svc", EVERYTHING,
            ["memory", "doc_memory", "knowledge", "social", "text_memory", "llm"])
    install(data, "limited", LIMITED, ["memory"])
    running = App(data, load_entrypoints=False, builtins=(), provider=FakeModel(responder=answer), memory=True,
                  embedder=FakeEmbedder(dimension=32))
    await running.start()
    yield running
    await running.stop()


async def run(app: App, tool: str, **arguments: Any) -> dict[str, Any]:
    assert app.kernel is not None
    result = await app.kernel.tools.execute(ToolCall("c1", tool, arguments))
    assert result.success, result.result
    return json.loads(result.result)  # type: ignore[no-any-return]


async def test_every_data_function_reaches_the_real_services(app: App) -> None:
    app.memory.social.set_trait("小李", "生日", "3月5日")
    app.memory.social.relate("小李", "朋友", "老张")
    got = await run(app, "svc_run")
    out, errs = got["out"], got["errs"]
    assert errs == [] or errs == {}, errs
    assert out["commit"]["added"] == 2
    relations = {(r["source_name"], r["relation_type"], r["target_name"]) for r in out["recall"]["relations"]}
    assert relations == {("小王", "住在", "杭州"), ("小王", "喜欢", "龙井茶")}
    assert "小王" in out["recall_text"]["seeds"]
    assert {e["name"] for e in out["entities"]} >= {"小王", "小李"}
    assert out["relations"] == [{"source_name": "小王", "target_name": "杭州", "relation_type": "住在",
                                 "confidence": 1.0}]
    assert out["introspect"]["relations_active"] == 3
    assert out["docs"][0]["id"] == out["doc_id"] and out["docs"][0]["title"] == "笔记"
    assert out["doc_stats"]["documents"] == 1
    assert out["kb_name"] == "饮品/龙井"
    assert out["kb_hits"][0]["title"] == "饮品/龙井" and out["kb_hits"][0]["content"] == "杭州的绿茶"
    assert out["kb_list"] == ["饮品/龙井"]
    assert out["person"]["traits"] == {"生日": "3月5日"}
    assert out["trait"] == {"value": "3月5日", "found": True}
    assert out["no_trait"] == {"found": False}  # nil value: absent in Lua
    assert out["persons"] == ["小李", "老张"]
    assert out["person_relations"] == [{"person": "老张", "relation": "朋友", "direction": "out"}]
    assert out["network"]["people"] == [{"name": "老张", "distance": 1}]
    assert out["chat"]["content"] == "模型回答：你好"
    assert out["chat_messages"]["content"] == "模型回答：第二个问题"
    assert out["source"] == "fake" and out["sources"][0]["name"] == "fake"
    # what the script wrote is really stored
    records = list(app.memory.textlog.iter_records())
    assert [(r["role"], r["content"], r["channel"], r["source"]) for r in records] == [
        ("user", "Lua 写进对话记录", "svc", "svc")]
    assert records[0]["id"] == out["log_id"]
    assert app.memory.documents.get(out["doc_id"]).content == "小王喜欢喝龙井茶"
    assert app.memory.knowledge.get("饮品/龙井").content == "杭州的绿茶"
    model = app.provider
    assert model.requests[-1]["temperature"] == 0.2


async def test_merge_purge_and_remove_change_the_stores(app: App) -> None:
    got = await run(app, "svc_run")
    await app.services.memory.commit([{"subject": "王小明", "relation": "喜欢", "object": "西湖"}])
    cleaned = await run(app, "svc_cleanup", doc_id=got["out"]["doc_id"])
    assert cleaned["merged"]["merged"] == 1 and "merr" not in cleaned
    assert cleaned["purged"] == {"purged": 2}
    assert cleaned["removed"] is True
    assert "role" in cleaned["berr"]
    assert app.memory.documents.get(got["out"]["doc_id"]) is None
    facts = app.memory.graph.introspect()
    assert facts["relations_active"] == 1 and facts["relations_deleted"] == 0  # hard purge


async def test_capabilities_not_granted_are_refused_with_the_reason(app: App) -> None:
    got = await run(app, "limited_run")
    for key, cap in (("doc", "doc_memory"), ("text", "text_memory"), ("social", "social"), ("llm", "llm"),
                     ("knowledge", "knowledge")):
        assert f'缺少 "{cap}" 能力' in got[key], (key, got[key])
        assert "插件 limited" in got[key]
    assert "recall_err" not in got and got["recalled"] == 0
    assert list(app.memory.textlog.iter_records()) == []
