"""Persona and memory-tool routes over real HTTP, checked against what the model is sent."""

from __future__ import annotations

from typing import Any

import pytest

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)


def system_prompt(daemon: WebDaemon) -> str:
    return str(daemon.model.requests[-1]["messages"][0]["content"])


async def test_the_persona_starts_unanswered_and_a_custom_one_is_saved_and_used_at_once(daemon: WebDaemon):
    path = daemon.app.data_dir / "personal" / "personal.md"
    async with daemon.client() as client:
        first = (await client.get("/api/v1/persona")).json()
        assert first["initialized"] is False and first["file_override"] is False
        assert first["current_prompt"] == "" and first["file"] == str(path)

        persona = "你叫小家，说话简短，偶尔用一点幽默。"
        saved = await client.post("/api/v1/persona", json={"mode": "custom", "content": persona})
        assert saved.json() == {"status": "ok", "mode": "custom", "restart_required": False}
        assert path.read_text(encoding="utf-8") == persona
        state = (await client.get("/api/v1/persona")).json()
        assert state["initialized"] is True and state["mode"] == "custom"
        assert state["current_prompt"] == persona and state["file_override"] is True

        await client.post("/api/v1/chat", json={"message": "你是谁"})
        assert persona in system_prompt(daemon)

        await client.put("/api/v1/settings", json={"key": "core.agent.personal_prompt", "value": "配置里的人格"})
        back = await client.post("/api/v1/persona", json={"mode": "default"})
        assert back.json()["mode"] == "default" and not path.exists()
        state = (await client.get("/api/v1/persona")).json()
        assert state["current_prompt"] == "配置里的人格" and state["file_override"] is False
        await client.post("/api/v1/chat", json={"message": "现在呢"})
        assert persona not in system_prompt(daemon) and "配置里的人格" in system_prompt(daemon)


async def test_choosing_later_records_the_answer_without_changing_the_persona(daemon: WebDaemon):
    async with daemon.client() as client:
        later = await client.post("/api/v1/persona", json={"mode": "later"})
        assert later.json()["mode"] == "later"
        state = (await client.get("/api/v1/persona")).json()
    assert state["initialized"] is True and state["mode"] == "later" and state["current_prompt"] == ""
    assert not (daemon.app.data_dir / "personal" / "personal.md").exists()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"mode": "sometimes"}, "mode must be one of default, custom, later"),
        ({"mode": "custom"}, "non-empty string field 'content'"),
        ({"mode": "custom", "content": "   "}, "non-empty string field 'content'"),
        ({"mode": "custom", "content": 42}, "non-empty string field 'content'"),
        ({"mode": "custom", "content": "长" * 20_001}, "20000 at most"),
        ({"content": "x"}, "missing field 'mode'"),
    ],
)
async def test_bad_persona_requests_say_what_is_wrong(daemon: WebDaemon, body: dict[str, Any], message: str):
    async with daemon.client() as client:
        response = await client.post("/api/v1/persona", json=body)
    assert response.status_code == 400 and message in response.json()["error"]
    assert not (daemon.app.data_dir / "personal" / "personal.md").exists()


async def test_memory_tools_lists_the_memory_tools_and_the_prompt_catalogue(daemon: WebDaemon):
    async with daemon.client() as client:
        data = (await client.get("/api/v1/memory/tools")).json()
    names = {t["name"]: t for t in data["tools"]}
    assert "memory_commit" in names and names["memory_commit"]["plugin"] == "memory"
    assert names["memory_commit"]["parameters"]["type"] == "object"
    assert {t["plugin"] for t in data["tools"]} <= {"memory", "knowledge"}
    assert "config_get" not in names  # other plugins' tools are not memory tools
    catalogue = data["tool_prompt"]
    assert catalogue.startswith("## 工具目录") and "- memory (" in catalogue and "- cfgmgr (" in catalogue
    assert catalogue == daemon.app.kernel.prompt.catalogue(daemon.app.kernel.tools)
