"""Out-of-process plugins' ``core.*`` data methods against the real services of a running App.

Two children: the raw NDJSON plugin (protocol only, its ``raw_call`` tool forwards any core
method) and a plugin written with the Python SDK's child runtime (``homeagent_sdk.proc.serve``),
whose ``RemoteSDK`` is what plugin authors call.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.app import App
from homeagent_core.plugins.packages import CAPABILITIES
from homeagent_sdk.testing import FakeEmbedder, FakeModel
from homeagent_sdk.types import ToolCall

RAW_SOURCE = Path(__file__).resolve().parents[2] / "plugins" / "raw_ndjson_plugin.py"

PY_PLUGIN = '''
import asyncio
import json

from homeagent_sdk import hookimpl
from homeagent_sdk.proc import serve
from homeagent_sdk.types import TextEvent, Triple


class Services:
    name = "pysvc"

    @hookimpl
    def register_tools(self, registry):
        registry.add(self.pysvc_run, name="pysvc_run", description="use every service")

    @hookimpl
    async def startup(self, sdk):
        self.sdk = sdk

    async def pysvc_run(self) -> str:
        sdk = self.sdk
        out = {}
        out["commit"] = await sdk.memory.commit([Triple("小王", "住在", "杭州")])
        recalled = await sdk.memory.recall(["小王"])
        out["recall"] = [(r["source_name"], r["relation_type"], r["target_name"]) for r in recalled["relations"]]
        out["relations"] = [r.to_dict() for r in await sdk.memory.relations("杭州")]
        doc_id = await sdk.doc.commit("笔记", "小王喜欢喝龙井茶")
        out["doc"] = [doc_id, [d.id for d in await sdk.doc.query("龙井茶")]]
        out["kb"] = await sdk.knowledge.create("饮品/龙井", "杭州的绿茶")
        out["kb_hits"] = [d.to_dict() for d in await sdk.knowledge.search("绿茶")]
        out["kb_list"] = await sdk.knowledge.list()
        out["person"] = await sdk.social.person("小李")
        out["persons"] = await sdk.social.persons()
        await sdk.text_memory.append(TextEvent("user", "子进程写的对话", 0.0, channel="pysvc"))
        out["chat"] = (await sdk.llm.chat([{"role": "user", "content": "你好"}]))["content"]
        out["quick"] = await sdk.llm.quick_chat("快速")
        out["source"] = await sdk.llm.current_source()
        return json.dumps(out, ensure_ascii=False)


serve(Services())
'''


def install_raw(data: Path, name: str, caps: list[str] | None) -> None:
    folder = data / "plugins" / name
    folder.mkdir(parents=True)
    manifest: dict[str, Any] = {"name": name, "version": "1.0.0", "entry": "plugin.bin"}
    if caps is not None:
        manifest["capabilities"] = caps
    (folder / "plugin.json").write_text(json.dumps(manifest))
    entry = folder / "plugin.bin"
    entry.write_text(f"#!{sys.executable}\n" + RAW_SOURCE.read_text())
    entry.chmod(0o755)


def install_python(data: Path) -> None:
    folder = data / "plugins" / "pysvc"
    folder.mkdir(parents=True)
    manifest = {"name": "pysvc", "version": "1.0.0", "entry": "plugin.bin",
                "capabilities": ["memory", "doc_memory", "knowledge", "social", "text_memory", "llm"]}
    (folder / "plugin.json").write_text(json.dumps(manifest))
    entry = folder / "plugin.bin"
    entry.write_text(f"#!{sys.executable}\n" + PY_PLUGIN)
    entry.chmod(0o755)


def answer(request: dict[str, Any]) -> str:
    return f"模型回答：{request['messages'][-1]['content']}"


async def start_app(data: Path) -> App:
    running = App(data, load_entrypoints=False, builtins=(), provider=FakeModel(responder=answer), memory=True,
                  embedder=FakeEmbedder(dimension=32))
    await running.start()
    assert running.status()["failed"] == []
    return running


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    data = tmp_path / "data"
    install_raw(data, "raw", [c for c in CAPABILITIES if c != "secrets"])  # every group but secrets
    install_python(data)
    running = await start_app(data)
    yield running
    await running.stop()


@pytest.fixture
async def limited_app(tmp_path: Path) -> AsyncIterator[App]:
    data = tmp_path / "limited"
    install_raw(data, "rawmem", ["memory"])
    running = await start_app(data)
    yield running
    await running.stop()


async def call(app: App, method: str, params: dict[str, Any] | None = None, *, tool: str = "raw_call") -> Any:
    """One core method through the raw child; returns its result, or raises with the host's error."""
    assert app.kernel is not None
    arguments: dict[str, Any] = {"method": method, "params": params or {}}
    done = await app.kernel.tools.execute(ToolCall("c", tool, arguments))
    assert done.success, done.result
    answer = json.loads(done.result)
    if answer["error"]:
        raise RuntimeError(answer["error"])
    return answer["result"]


async def test_the_raw_protocol_reaches_every_real_service(app: App) -> None:
    app.memory.social.set_trait("小李", "生日", "3月5日")
    app.memory.social.relate("小李", "朋友", "老张")
    triples = [{"subject": "小王", "relation": "住在", "object": "杭州"}]
    assert (await call(app, "memory.commit", {"triples": triples}))["added"] == 1
    recalled = await call(app, "memory.recall", {"query": ["小王"], "depth": 2})
    assert [(r["source_name"], r["target_name"]) for r in recalled["relations"]] == [("小王", "杭州")]
    assert (await call(app, "memory.introspect"))["relations_active"] == 2
    assert (await call(app, "memory.entities", {"query": "小王"}))["entities"][0]["name"] == "小王"
    assert (await call(app, "memory.relations", {"name": "杭州"}))["relations"][0]["relation_type"] == "住在"

    doc_id = (await call(app, "doc.insert", {"doc": {"title": "笔记", "content": "小王喜欢喝龙井茶"}}))["id"]
    docs = (await call(app, "doc.query", {"text": "龙井茶", "top_k": 3}))["docs"]
    assert docs[0]["id"] == doc_id and docs[0]["title"] == "笔记"
    assert (await call(app, "doc.stats"))["documents"] == 1

    assert (await call(app, "knowledge.add", {"name": "饮品/龙井", "content": "杭州的绿茶"}))["name"] == "饮品/龙井"
    results = (await call(app, "knowledge.search", {"query": "绿茶", "top_k": 3}))["results"]
    assert results[0]["id"] == "饮品/龙井" and results[0]["content"] == "杭州的绿茶"
    assert (await call(app, "knowledge.list"))["names"] == ["饮品/龙井"]

    assert (await call(app, "social.getPerson", {"name": "小李"}))["person"]["traits"] == {"生日": "3月5日"}
    assert await call(app, "social.getTrait", {"name": "小李", "trait": "生日"}) == {"value": "3月5日", "found": True}
    assert (await call(app, "social.listPersons"))["persons"] == ["小李", "老张"]
    assert (await call(app, "social.getRelations", {"name": "老张"}))["relations"] == [
        {"person": "小李", "relation": "朋友", "direction": "in"}]
    assert (await call(app, "social.getNetwork", {"name": "小李", "depth": 1}))["network"]["people"] == [
        {"name": "老张", "distance": 1}]

    event = {"role": "user", "content": "协议写的对话", "timestamp": 1_700_000_000.0, "channel": "raw"}
    logged = await call(app, "textmemory.append", {"event": event})
    records = list(app.memory.textlog.iter_records())
    assert [(r["id"], r["content"], r["source"], r["timestamp"]) for r in records] == [
        (logged["id"], "协议写的对话", "raw", 1_700_000_000.0)]

    reply = await call(app, "llm.chat", {"messages": [{"role": "user", "content": "你好"}]})
    assert reply["content"] == "模型回答：你好"
    assert (await call(app, "llm.currentSource"))["source"] == "fake"
    assert (await call(app, "llm.listSources"))["sources"][0]["name"] == "fake"

    merged = await call(app, "memory.merge", {"source": "老张", "target": "小李"})
    assert merged["merged"] == 0 and merged["removed_self_loops"] == 1
    assert (await call(app, "memory.purge", {"criteria": {"relation_type": "住在"}, "mode": "hard"}))["purged"] == 1
    assert (await call(app, "memory.introspect"))["relations_deleted"] == 0
    assert len((await call(app, "doc.query", {"text": "小王", "top_k": 0}))["docs"]) == 0
    assert await call(app, "doc.remove", {"id": doc_id}) is None
    assert app.memory.documents.get(doc_id) is None


async def test_bad_parameters_and_read_only_social_are_refused_clearly(app: App) -> None:
    with pytest.raises(RuntimeError, match=r"textmemory\.append needs event"):
        await call(app, "textmemory.append", {"event": {"content": "no role"}})
    with pytest.raises(RuntimeError, match="缺少 doc 字段"):
        await call(app, "doc.insert", {})
    with pytest.raises(RuntimeError, match="read-only"):
        await call(app, "social.setTrait", {"name": "小李", "trait": "x", "value": "y"})
    with pytest.raises(RuntimeError, match="non-empty list of messages"):
        await call(app, "llm.chat", {"messages": []})
    assert list(app.memory.textlog.iter_records()) == []


async def test_capabilities_the_manifest_does_not_grant_are_denied(limited_app: App) -> None:
    app = limited_app
    for method, params, cap in (
        ("doc.query", {"text": "x"}, "doc_memory"),
        ("textmemory.append", {"event": {"role": "user", "content": "x"}}, "text_memory"),
        ("social.getPerson", {"name": "小李"}, "social"),
        ("llm.chat", {"messages": [{"role": "user", "content": "x"}]}, "llm"),
        ("knowledge.add", {"name": "a/b", "content": "c"}, "knowledge"),
    ):
        with pytest.raises(RuntimeError, match=re.escape(f'插件 rawmem 调用 {method} 被拒：缺少 "{cap}" 能力')):
            await call(app, method, params)
    recalled = await call(app, "memory.recall", {"query": ["小王"]})
    assert recalled["entities"] == [] and recalled["relations"] == []
    assert list(app.memory.textlog.iter_records()) == []
    assert len(app.memory.documents) == 0
    assert len(app.memory.knowledge) == 0


async def test_a_python_sdk_plugin_uses_every_service_through_its_remote_sdk(app: App) -> None:
    app.memory.social.set_trait("小李", "生日", "3月5日")
    assert app.kernel is not None
    done = await app.kernel.tools.execute(ToolCall("c", "pysvc_run", {}))
    assert done.success, done.result
    out = json.loads(done.result)
    assert out["commit"]["added"] == 1
    assert out["recall"] == [["小王", "住在", "杭州"]]
    assert out["relations"] == [{"source_name": "小王", "target_name": "杭州", "relation_type": "住在",
                                 "confidence": 1.0}]
    assert out["doc"][1] == [out["doc"][0]]
    assert out["kb"] == "饮品/龙井" and out["kb_hits"][0]["title"] == "饮品/龙井"
    assert out["kb_list"] == ["饮品/龙井"]
    assert out["person"]["traits"] == {"生日": "3月5日"} and out["persons"] == ["小李"]
    assert out["chat"] == "模型回答：你好" and out["quick"] == "模型回答：快速"
    assert out["source"] == "fake"
    records = list(app.memory.textlog.iter_records())
    assert [(r["content"], r["channel"], r["source"]) for r in records] == [("子进程写的对话", "pysvc", "pysvc")]
    assert app.memory.documents.get(out["doc"][0]).content == "小王喜欢喝龙井茶"


async def test_after_giving_up_the_agent_status_and_the_model_say_why(app: App) -> None:
    assert app.kernel is not None and app.supervisor is not None
    app.supervisor.backoff = (0.01, 0.02, 0.03)
    plugin = app.supervisor.get("raw")
    assert "raw" in app.status()["started"]
    for _ in range(4):
        await app.kernel.tools.execute(ToolCall("c", "raw_crash", {"how": "kill"}))
        async with asyncio.timeout(10):
            while plugin.status == "restarting" or plugin._restart is not None:
                await plugin.wait_restarted()
                await asyncio.sleep(0)
    status = app.status()
    row = next(p for p in status["plugins"] if p["name"] == "raw")
    assert "raw" not in status["started"] and row["status"] == "stopped"
    assert re.fullmatch(r"crashed 4 times in 5 minutes \(last: killed by signal 9\) since \d\d:\d\d:\d\d", row["error"])
    down = await app.kernel.tools.execute(ToolCall("c", "raw_echo", {"text": "x"}))
    assert not down.success
    assert "plugin raw crashed and was stopped after 4 crashes; use plugin_reload" in down.result
