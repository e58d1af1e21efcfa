"""memory_* and person_* tools: schemas, validation, results and clear errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.indexer import MemoryIndexer
from homeagent_core.memory.social import SocialGraph
from homeagent_core.memory.tools import memory_tools
from homeagent_sdk.errors import ToolError
from homeagent_sdk.types import ToolDef, Triple

D1 = "ab" * 32

NAMES = [
    "memory_recall",
    "memory_path",
    "memory_commit",
    "memory_merge",
    "memory_purge",
    "memory_edit",
    "memory_delete_entity",
    "memory_introspect",
    "memory_block_merge",
    "person_query",
    "person_set_trait",
    "person_relate",
    "person_network",
]


@pytest.fixture
def env(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> Any:
    graph = open_graph(tmp_path / "graph.db")
    indexer = MemoryIndexer(graph)
    purged: list[str] = []

    def text_purge(subject: str) -> int:  # the conversation log's purge is a plain function
        purged.append(subject)
        return 2

    tools = memory_tools(
        graph,
        SocialGraph(graph),
        indexer,
        resolve_digest=lambda p: D1 if D1.startswith(p) else None,
        session=lambda: "sess-1",
        text_purge=text_purge,
    )
    yield {t.name: t for t in tools}, graph, indexer, purged
    graph.close()


async def call(tools: dict[str, ToolDef], tool: str, /, **kwargs: Any) -> Any:
    handler = tools[tool].handler
    assert handler is not None
    return await handler(**kwargs)


def test_every_tool_has_a_json_schema_and_an_async_handler(env: Any) -> None:
    tools = env[0]
    assert sorted(tools) == sorted(NAMES)
    for tool in tools.values():
        assert tool.parameters["type"] == "object"
        assert tool.openai_schema()["function"]["name"] == tool.name
        assert all(k in tool.parameters["properties"] for k in tool.parameters["required"])


async def test_commit_then_recall_round_trips_and_marks_recalled(env: Any) -> None:
    tools, graph, indexer, _ = env
    out = await call(
        tools,
        "memory_commit",
        triples=[{"subject": "小王", "relation": "住在", "object": "杭州"}],
        sentence_text="小王说他住在杭州",
        media_digests=[D1[:12], "cafebabe1234", "zz"],
    )
    assert out["added"] == 1 and out["media_blocks"] == [D1]
    assert any("cafebabe1234" in n and "not in the media store" in n for n in out["notes"])
    assert any("'zz'" in n for n in out["notes"])
    rel = graph.recall(["小王"]).relations[0]
    assert (rel.session, rel.sentence, rel.media_digests) == ("sess-1", "小王说他住在杭州", [D1])
    found = await call(tools, "memory_recall", query_intent="小王，杭州")
    assert {e["name"] for e in found["entities"]} == {"小王", "杭州"}
    assert await indexer.build_context("小王") == ""  # both were just fetched by the tool


async def test_commit_with_only_bad_names_says_why(env: Any) -> None:
    tools = env[0]
    with pytest.raises(ToolError, match=r"nothing was committed.*shorter than 2"):
        await call(tools, "memory_commit", triples=[{"subject": "猫", "relation": "是", "object": "动物"}])
    with pytest.raises(ToolError, match=r"triples\[0\] is missing object"):
        await call(tools, "memory_commit", triples=[{"subject": "小王", "relation": "是"}])
    with pytest.raises(ToolError, match="non-empty array"):
        await call(tools, "memory_commit", triples=[])


async def test_merge_purge_edit_delete_report_clear_errors(env: Any) -> None:
    tools, _, _, purged = env
    await call(
        tools,
        "memory_commit",
        triples=[
            {"subject": "小王", "relation": "住在", "object": "杭州"},
            {"subject": "王小明", "relation": "喜欢", "object": "咖啡"},
        ],
    )
    with pytest.raises(ToolError, match="unknown entity '小李'"):
        await call(tools, "memory_merge", keep="小王", drop="小李")
    assert (await call(tools, "memory_merge", keep="小王", drop="王小明"))["moved"] == 1
    with pytest.raises(ToolError, match="no relation matched"):
        await call(tools, "memory_purge", criteria={"relation_type": "讨厌"})
    with pytest.raises(ToolError, match="unknown purge criteria"):
        await call(tools, "memory_purge", criteria={"color": "red"})
    out = await call(tools, "memory_purge", criteria={"subject_contains": "小王", "relation_type": "喜欢"})
    assert out == {"purged": 1, "mode": "soft", "text_lines_removed": 2}
    assert purged == ["小王"]
    edited = await call(
        tools,
        "memory_edit",
        old={"subject": "小王", "relation": "住在", "object": "杭州"},
        new={"subject": "小王", "relation": "住在", "object": "上海"},
    )
    assert edited["added"] == 1
    with pytest.raises(ToolError, match="no relation"):
        await call(
            tools,
            "memory_edit",
            old={"subject": "小王", "relation": "住在", "object": "杭州"},
            new={"subject": "小王", "relation": "住在", "object": "北京"},
        )
    assert (await call(tools, "memory_delete_entity", name="上海"))["relations_removed"] == 1
    with pytest.raises(ToolError, match="unknown entity"):
        await call(tools, "memory_delete_entity", name="上海")
    stats = await call(tools, "memory_introspect")
    assert stats["entities"] == 3 and stats["relations_active"] == 0  # 小王, 杭州, 咖啡


async def test_block_merge_resolves_unique_prefixes(env: Any) -> None:
    tools, graph = env[0], env[1]
    d2 = "cd" * 32
    graph.commit([Triple("小王", "拍了", "雷峰塔", media_digests=[d2])])
    await call(
        tools, "memory_commit", triples=[{"subject": "小王", "relation": "拍了", "object": "西湖"}], media_digests=[D1]
    )
    out = await call(tools, "memory_block_merge", keep_digest=D1[:12], drop_digest="cdcd")
    assert out == {"kept": D1, "removed": d2, "edges_moved": 1}
    with pytest.raises(ToolError, match="no media block"):
        await call(tools, "memory_block_merge", keep_digest=D1, drop_digest="cdcd")


async def test_person_tools(env: Any) -> None:
    tools = env[0]
    await call(tools, "person_set_trait", name="小王", trait="年龄", value="25")
    await call(tools, "person_relate", person="小王", relation="朋友", other="小李")
    person = await call(tools, "person_query", name="小王")
    assert person["traits"] == {"年龄": "25"}
    net = await call(tools, "person_network", name="小李", depth=1)
    assert net["people"] == [{"name": "小王", "distance": 1}]
    with pytest.raises(ToolError, match=r"no person named '小赵'.*小李, 小王"):
        await call(tools, "person_query", name="小赵")
    with pytest.raises(ToolError, match="'depth' must be an integer from 1 to 4"):
        await call(tools, "person_network", name="小王", depth=9)
    with pytest.raises(ToolError, match="'value' is empty"):
        await call(tools, "person_set_trait", name="小王", trait="年龄", value=" ")
