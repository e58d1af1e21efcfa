"""The original system's kernel tools: persona_set, memory_document_query, plgreload for every kind."""

from __future__ import annotations

import shutil
from pathlib import Path

from homeagent_sdk._fake_model import FakeModel

LUA_FIXTURES = Path(__file__).resolve().parents[2] / "plugins" / "lua"
PLUGINMGR = "homeagent_core.builtin.pluginmgr"


async def test_persona_set_writes_the_web_ui_file_and_applies_from_the_next_turn(harness, tmp_path):
    model = FakeModel(default="好")
    h = await harness([], model=model)
    out = await h.ok("persona_set", content="你是「阿福」，说话带一点上海口音。")
    data = h.app.data_dir
    assert (data / "personal" / "personal.md").read_text(encoding="utf-8") == "你是「阿福」，说话带一点上海口音。"
    assert (data / "personal" / ".persona_choice").read_text(encoding="utf-8") == "custom"
    assert "下一轮起生效" in out
    await h.kernel.ask("你好")
    assert "阿福" in model.requests[-1]["messages"][0]["content"]
    assert "empty" in await h.fails("persona_set", content="   ")
    assert "at most 20000" in await h.fails("persona_set", content="长" * 20001)
    await h.stop()
    again = await harness([], data=data, model=FakeModel(default="好"))
    assert again.kernel.prompt.persona == "你是「阿福」，说话带一点上海口音。"  # read back at start


async def test_memory_document_query_is_doc_query_under_the_original_name(harness):
    h = await harness([], memory=True)
    await h.ok("doc_commit", content="冰箱滤芯每六个月换一次，上次是三月。", title="家务")
    alias = h.tools.get("memory_document_query")
    assert alias.parameters == h.tools.get("doc_query").parameters
    out = await h.ok("memory_document_query", query="冰箱滤芯")
    assert "六个月" in out


async def test_plgreload_reaches_lua_and_skills_and_built_ins_say_why_not(harness, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(LUA_FIXTURES / "greeter", data / "plugins" / "greeter")
    skill = data / "skills" / "tea"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: tea\ndescription: brew tea\n---\nBoil water.\n", encoding="utf-8")
    h = await harness([PLUGINMGR], data=data)
    main = data / "plugins" / "greeter" / "main.lua"
    v2 = 'sdk.register_tool("lua_v2", { description = "v2" }, function() return "v2" end)\n'
    main.write_text(v2 + 'return { name = "greeter" }\n', encoding="utf-8")
    out = await h.ok("plgreload", name="greeter")
    assert '"kind": "lua"' in out and "lua_v2" in h.tools
    main.write_text("return {", encoding="utf-8")
    broken = await h.fails("plgreload", name="greeter")
    assert "old version keeps running" in broken and "lua_v2" in h.tools
    (data / "skills" / "coffee").mkdir()
    (data / "skills" / "coffee" / "SKILL.md").write_text(
        "---\nname: coffee\ndescription: brew coffee\n---\nGrind.\n", encoding="utf-8")
    rescanned = await h.ok("plgreload", name="tea")
    assert '"kind": "skill"' in rescanned and "coffee" in rescanned
    builtin = await h.fails("plgreload", name="pluginmgr")
    assert "built-in plugin" in builtin and "restart" in builtin
    assert "no plugin named 'nope'" in await h.fails("plgreload", name="nope")
