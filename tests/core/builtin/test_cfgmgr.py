from __future__ import annotations

import json

CFG = "homeagent_core.builtin.cfgmgr"
CLI = "homeagent_core.builtin.cli_socket"
WEB = "homeagent_core.builtin.web"


async def test_scopes_are_core_and_every_plugin_with_settings(harness):
    h = await harness([CFG, CLI])
    scopes = json.loads(await h.ok("config_list_plugins"))
    assert scopes[0] == "cli" and "core" in scopes


async def test_get_and_set_validate_types_and_name_the_key(harness):
    h = await harness([CFG])
    row = json.loads(await h.ok("config_get", scope="core", key="agent.max_tool_turns"))
    assert row["key"] == "core.agent.max_tool_turns" and row["value"] == 10 and row["source"] == "default"
    changed = await h.ok("config_set", scope="core", key="agent.max_tool_turns", value="12")
    assert changed == "core.agent.max_tool_turns = 12"
    assert h.config.get("core.agent.max_tool_turns") == 12
    assert "expected an integer" in await h.fails("config_set", scope="core", key="agent.max_tool_turns", value="many")
    assert "unknown setting" in await h.fails("config_get", scope="core", key="agent.nope")
    assert "restart" in await h.ok("config_set", scope="core", key="agent.system_prompt", value="hi")
    assert "scope is empty" in await h.fails("config_get", scope=" ", key="x")


async def test_secrets_are_masked_everywhere(harness):
    h = await harness([CFG, CLI, WEB])
    changed = await h.ok("config_set", scope="web", key="search_api_key", value="s3cret")
    assert changed == "plugin.web.search_api_key = ****"
    assert "s3cret" not in await h.ok("config_get", scope="web", key="search_api_key")
    h.config.set("plugin.cli.api_key", "hunter2")  # guarded: the owner sets it outside the model's tools
    for text in (
        await h.ok("config_get", scope="cli", key="api_key"),
        await h.ok("config_list_keys", scope="cli"),
        await h.ok("config_dump"),
        await h.ok("config_get_defs", scope="cli"),
    ):
        assert "hunter2" not in text
    assert json.loads(await h.ok("config_list_keys", scope="cli"))["plugin.cli.api_key"] == "****"


async def test_batch_set_is_all_or_nothing(harness):
    h = await harness([CFG, CLI])
    items = [
        {"scope": "core", "key": "agent.max_tool_turns", "value": "7"},
        {"scope": "core", "key": "agent.tool_timeout", "value": "forever"},
    ]
    message = await h.fails("config_batch_set", items=items)
    assert "items[1]" in message and "nothing was changed" in message
    assert h.config.get("core.agent.max_tool_turns") == 10
    assert "lacks 'value'" in await h.fails("config_batch_set", items=[{"scope": "core", "key": "agent.workdir"}])
    items[1]["value"] = "90s"
    assert (await h.ok("config_batch_set", items=items)).startswith("2 settings changed")
    assert h.config.get("core.agent.max_tool_turns") == 7 and h.config.get("core.agent.tool_timeout") == 90


async def test_definitions_describe_types_defaults_and_options(harness):
    h = await harness([CFG, CLI])
    defs = {d["key"]: d for d in json.loads(await h.ok("config_get_defs", scope="cli"))}
    assert defs["plugin.cli.socket_mode"]["options"] == ["0600", "0660", "0666"]
    assert defs["plugin.cli.api_key"]["default"] is None
