"""The remaining ``RemoteSDK`` data functions (merge, purge, append_text, doc stats, social
queries, the model source switch) from a real Python SDK child against a running App."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from homeagent_core.app import App
from homeagent_sdk.testing import FakeEmbedder, FakeModel
from homeagent_sdk.types import ToolCall

CHILD = '''
import json

from homeagent_sdk import hookimpl
from homeagent_sdk.errors import PluginError
from homeagent_sdk.proc import serve
from homeagent_sdk.types import TextEvent, Triple


class Extras:
    name = "extras"

    @hookimpl
    def register_tools(self, registry):
        registry.add(self.extras_run, name="extras_run", description="use the extra data functions")

    @hookimpl
    async def startup(self, sdk):
        self.sdk = sdk

    async def extras_run(self) -> str:
        sdk = self.sdk
        out = {}
        out["trait"] = await sdk.social.trait("小李", "生日")
        out["no_trait"] = await sdk.social.trait("小李", "血型")
        out["relations"] = await sdk.social.relations("老张")
        out["network"] = (await sdk.social.network("小李", 1))["people"]
        try:
            await sdk.social.network("无名氏")
        except PluginError as exc:
            out["network_error"] = str(exc)
        await sdk.memory.commit([Triple("小王", "住在", "杭州")])
        out["merge"] = await sdk.memory.merge("老张", "小李")
        out["purged"] = await sdk.memory.purge({"relation_type": "住在"}, "hard")
        try:
            await sdk.memory.purge({"relation_type": "住在"}, "sideways")
        except PluginError as exc:
            out["purge_error"] = str(exc)
        out["text_id"] = await sdk.memory.append_text(TextEvent("user", "子进程记的一句话", 0.0, channel="extras"))
        out["text_id2"] = await sdk.text_memory.append(TextEvent("assistant", "第二句", 0.0))
        await sdk.doc.commit("笔记", "小王喜欢喝龙井茶")
        out["doc_stats"] = await sdk.doc.stats()
        await sdk.llm.set_source("fake")
        try:
            await sdk.llm.set_source("nope")
        except PluginError as exc:
            out["source_error"] = str(exc)
        return json.dumps(out, ensure_ascii=False)


serve(Extras())
'''


def install_child(data: Path) -> None:
    folder = data / "plugins" / "extras"
    folder.mkdir(parents=True)
    manifest = {"name": "extras", "version": "1.0.0", "entry": "plugin.bin",
                "capabilities": ["memory", "doc_memory", "social", "text_memory", "llm"]}
    (folder / "plugin.json").write_text(json.dumps(manifest))
    entry = folder / "plugin.bin"
    entry.write_text(f"#!{sys.executable}\n" + CHILD)
    entry.chmod(0o755)


async def test_a_python_sdk_plugin_reaches_merge_purge_text_stats_social_and_source(tmp_path: Path) -> None:
    data = tmp_path / "data"
    install_child(data)
    app = App(data, load_entrypoints=False, builtins=(), provider=FakeModel(default="ok"), memory=True,
              embedder=FakeEmbedder(dimension=32))
    await app.start()
    try:
        assert app.status()["failed"] == [] and app.kernel is not None
        app.memory.social.set_trait("小李", "生日", "3月5日")
        app.memory.social.relate("小李", "朋友", "老张")
        done = await app.kernel.tools.execute(ToolCall("c", "extras_run", {}))
        assert done.success, done.result
        out = json.loads(done.result)
        assert out["trait"] == "3月5日" and out["no_trait"] is None
        assert out["relations"] == [{"person": "小李", "relation": "朋友", "direction": "in"}]
        assert out["network"] == [{"name": "老张", "distance": 1}]
        assert "无名氏" in out["network_error"]
        assert out["merge"]["merged"] == 0 and out["merge"]["removed_self_loops"] == 1
        assert set(out["merge"]) >= {"merged", "moved", "deduplicated", "removed_self_loops"}
        assert out["purged"] == 1
        assert "purge mode must be 'soft' or 'hard'" in out["purge_error"]
        records = list(app.memory.textlog.iter_records())
        assert [(r["id"], r["content"], r["source"]) for r in records] == [
            (out["text_id"], "子进程记的一句话", "extras"), (out["text_id2"], "第二句", "extras")]
        assert out["doc_stats"]["documents"] == 1
        assert "unknown source 'nope'" in out["source_error"]
        assert (await app.memory.graph.aintrospect())["relations_deleted"] == 0
    finally:
        await app.stop()
