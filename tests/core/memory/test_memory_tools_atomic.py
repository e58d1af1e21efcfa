"""memory_purge / memory_edit through real turns: the conversation log is cleaned too, and a
failure while cleaning it leaves graph memory exactly as it was (all-or-nothing)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from homeagent_core.app import App
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.types import Triple


def make_app(tmp_path: Path, model: FakeModel) -> App:
    return App(tmp_path / "data", load_entrypoints=False, builtins=(), provider=model, memory=True)


def relations(app: App) -> list[tuple[str, str, str, str]]:
    assert app.memory is not None

    def rows(conn: sqlite3.Connection) -> list[tuple[str, str, str, str]]:
        return conn.execute(
            "SELECT s.name, r.type, t.name, r.status FROM relations r JOIN entities s ON s.id = r.source_id"
            " JOIN entities t ON t.id = r.target_id ORDER BY r.id"
        ).fetchall()

    return app.memory.graph.read(rows)


def log_lines(app: App) -> list[str]:
    assert app.memory is not None
    return [str(rec.get("content")) for rec in app.memory.textlog.iter_records()]


def break_log_rewrites(app: App) -> None:
    """Make every rewrite of the conversation log fail: its temporary file name is taken by a folder."""
    assert app.memory is not None
    for path in app.memory.textlog.files():
        path.with_name(path.name + ".tmp").mkdir()


async def prepare(app: App) -> None:
    assert app.memory is not None
    app.memory.graph.commit([Triple("小王", "住在", "杭州"), Triple("小李", "住在", "上海")], "s1")
    app.memory.textlog.append("user", "小王住在杭州")
    app.memory.textlog.append("user", "小李住在上海")


async def ask(app: App, text: str) -> Any:
    assert app.kernel is not None
    return await app.kernel.ask(text, timeout=30)


async def test_memory_purge_removes_the_relation_and_the_log_lines(tmp_path: Path) -> None:
    model = FakeModel([ToolCallReply("memory_purge", {"criteria": {"subject_contains": "小王"}}), "已忘记"])
    async with make_app(tmp_path, model) as app:
        await prepare(app)
        reply = await ask(app, "请忘掉这个人")
        (result,) = reply.tool_results
        assert result.success, result.result
        assert '"purged": 1' in result.result and '"text_lines_removed": 1' in result.result
        assert relations(app) == [("小王", "住在", "杭州", "deleted"), ("小李", "住在", "上海", "active")]
        assert "小王住在杭州" not in log_lines(app)


async def test_a_failing_log_purge_leaves_the_graph_unchanged(tmp_path: Path) -> None:
    model = FakeModel([ToolCallReply("memory_purge", {"criteria": {"subject_contains": "小王"}}), "没能忘记"])
    async with make_app(tmp_path, model) as app:
        await prepare(app)
        before = relations(app)
        break_log_rewrites(app)
        reply = await ask(app, "请忘掉这个人")
        assert reply == "没能忘记"
        (result,) = reply.tool_results
        assert not result.success
        assert "the purge was not applied (graph memory is unchanged)" in result.result
        assert "IsADirectoryError" in result.result
        assert relations(app) == before
        assert "小王住在杭州" in log_lines(app)


async def test_memory_edit_rewrites_the_relation_and_the_log(tmp_path: Path) -> None:
    call = {"old": {"subject": "小王", "relation": "住在", "object": "杭州"},
            "new": {"subject": "小王", "relation": "住在", "object": "苏州"}}  # fmt: skip
    model = FakeModel([ToolCallReply("memory_edit", call), "已更正"])
    async with make_app(tmp_path, model) as app:
        await prepare(app)
        reply = await ask(app, "他其实住在苏州")
        (result,) = reply.tool_results
        assert result.success, result.result
        assert '"text_lines_changed": 1' in result.result
        assert ("小王", "住在", "苏州", "active") in relations(app)
        assert ("小王", "住在", "杭州", "active") not in relations(app)
        assert "小王住在苏州" in log_lines(app)


async def test_a_failing_log_edit_leaves_the_graph_unchanged(tmp_path: Path) -> None:
    call = {"old": {"subject": "小王", "relation": "住在", "object": "杭州"},
            "new": {"subject": "小王", "relation": "住在", "object": "苏州"}}  # fmt: skip
    model = FakeModel([ToolCallReply("memory_edit", call), "没能更正"])
    async with make_app(tmp_path, model) as app:
        await prepare(app)
        before = relations(app)
        break_log_rewrites(app)
        reply = await ask(app, "他其实住在苏州")
        (result,) = reply.tool_results
        assert not result.success
        assert "the edit was not applied (graph memory is unchanged)" in result.result
        assert relations(app) == before
        assert app.memory is not None
        recalled = app.memory.graph.recall(["小王"])
        assert [r.target for r in recalled.relations] == ["杭州"]
