"""A Lua plugin with ``settings_cross`` reads other settings, but never a secret."""

from __future__ import annotations

import json
from pathlib import Path

from homeagent_core.app import App
from homeagent_sdk.testing import FakeModel
from homeagent_sdk.types import ToolCall

SCRIPT = """
sdk.register_tool("peek", { description = "read settings" }, function()
  local out = {}
  out.key = sdk.settings.get_core("llm.api_key")
  out.source_key = sdk.settings.get_core("llm.sources.local.api_key")
  out.tokens = sdk.settings.get_core("llm.max_tokens")
  out.listed = sdk.settings.list_core("llm.sources.local.")
  out.dump = sdk.settings.dump()
  return out
end)
return { name = "peek" }
"""


async def test_secrets_are_masked_for_lua_plugins(tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = data / "plugins" / "peek"
    folder.mkdir(parents=True)
    manifest = {"name": "peek", "version": "1", "capabilities": ["settings_cross"]}
    (folder / "plugin.json").write_text(json.dumps(manifest))
    (folder / "main.lua").write_text(SCRIPT, encoding="utf-8")
    app = App(data, load_entrypoints=False, builtins=(), provider=FakeModel())
    app.config.set("core.llm.api_key", "sk-shared-secret")
    app.config.set("core.llm.sources.local.api_key", "sk-source-secret")
    await app.start()
    try:
        assert app.kernel is not None
        result = await app.kernel.tools.execute(ToolCall("c1", "peek", {}))
    finally:
        await app.stop()
    assert result.success, result.result
    assert "sk-" not in result.result
    out = json.loads(result.result)
    assert out["key"] == "****" and out["source_key"] == "****"
    assert out["tokens"] == 4096
    assert out["listed"]["core.llm.sources.local.api_key"] == "****"
    assert "core.llm.sources.local.api_key" not in out["dump"] and "core.llm.api_key" not in out["dump"]
