"""The config registry validates every write and survives restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from homeagent_core.config import ConfigStore
from homeagent_core.durations import format_duration, parse_duration
from homeagent_sdk.errors import ConfigValueError, UnknownConfigKey
from homeagent_sdk.types import ConfigDef


@pytest.fixture
def store(tmp_path: Path) -> ConfigStore:
    s = ConfigStore(tmp_path / "config.db")
    yield s
    s.close()


def test_defaults_are_typed_and_not_written(store: ConfigStore, tmp_path: Path):
    assert store.get("core.agent.max_tool_turns") == 10
    assert store.get("core.agent.tool_timeout") == 60.0
    assert store.get("core.memory.media.enabled") is True
    assert store.source("core.agent.max_tool_turns") == "default"
    import sqlite3

    assert sqlite3.connect(tmp_path / "config.db").execute("SELECT count(*) FROM config").fetchone() == (0,)


def test_an_unknown_key_is_refused_with_a_suggestion(store: ConfigStore):
    with pytest.raises(UnknownConfigKey, match=r"did you mean core\.agent\.max_tool_turns"):
        store.set("core.agent.max_tool_turn", 3)


def test_a_wrong_typed_value_names_the_key_and_the_expected_type(store: ConfigStore):
    with pytest.raises(ConfigValueError, match=r"core\.agent\.max_tool_turns: expected an integer, got 'many'"):
        store.set("core.agent.max_tool_turns", "many")
    with pytest.raises(ConfigValueError, match="expected a boolean"):
        store.set("core.memory.media.enabled", "perhaps")
    with pytest.raises(ConfigValueError, match="one of debug, info, warn, error"):
        store.set("core.daemon.log_level", "loud")
    with pytest.raises(ConfigValueError, match="duration such as 30s"):
        store.set("core.agent.tool_timeout", "soon")


def test_out_of_range_numbers_are_refused(store: ConfigStore):
    with pytest.raises(ConfigValueError, match="above the maximum 2"):
        store.set("core.llm.temperature", "3.5")
    with pytest.raises(ConfigValueError, match="below the minimum 1"):
        store.set("core.agent.max_tool_turns", 0)


def test_values_persist_across_reopen(tmp_path: Path):
    first = ConfigStore(tmp_path / "c.db")
    first.set("core.agent.max_tool_turns", "7")
    first.set("core.agent.tool_timeout", "1h30m")
    first.close()
    second = ConfigStore(tmp_path / "c.db")
    assert second.get("core.agent.max_tool_turns") == 7
    assert second.get("core.agent.tool_timeout") == 5400.0
    assert second.source("core.agent.max_tool_turns") == "set"
    second.close()


def test_llm_source_fields_are_a_free_but_typed_namespace(store: ConfigStore):
    store.set("core.llm.sources.local.base_url", "http://127.0.0.1:11434")
    store.set("core.llm.sources.local.priority", "5")
    assert store.get("core.llm.sources.local.priority") == 5
    assert "core.llm.sources.local.base_url" in store.items("core.llm.sources.")
    with pytest.raises(ConfigValueError):
        store.set("core.llm.sources.local.max_concurrent", "lots")
    with pytest.raises(UnknownConfigKey):
        store.set("core.llm.sources.local.colour", "red")


def test_plugin_settings_live_in_their_own_table(store: ConfigStore, tmp_path: Path):
    store.define_plugin("web-ui", ConfigDef(key="addr", type="string", default="127.0.0.1:8080"))
    store.set("plugin.web-ui.addr", "127.0.0.1:9000")
    import sqlite3

    rows = sqlite3.connect(tmp_path / "config.db").execute("SELECT key, value FROM config_web_ui").fetchall()
    assert rows == [("plugin.web-ui.addr", "127.0.0.1:9000")]
    with pytest.raises(UnknownConfigKey, match="is the plugin installed"):
        store.set("plugin.nothere.addr", "x")


def test_secrets_are_masked_in_listings_and_fall_back_to_the_environment(
    store: ConfigStore, monkeypatch: pytest.MonkeyPatch
):
    assert store.get("core.llm.api_key") == ""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-from-deepseek-env")
    assert store.get("core.llm.api_key") == "sk-from-deepseek-env"
    monkeypatch.setenv("HOMEAGENT_LLM_API_KEY", "sk-homeagent")
    assert store.get("core.llm.api_key") == "sk-homeagent"
    assert store.source("core.llm.api_key") == "env"
    store.set("core.llm.api_key", "sk-stored")
    assert store.get("core.llm.api_key") == "sk-stored"
    row = next(r for r in store.describe("core.llm.api_key") if r["key"] == "core.llm.api_key")
    assert row["value"] == "****" and "sk-" not in str(row)


def test_listeners_hear_sets_and_unsets_and_can_unsubscribe(store: ConfigStore):
    heard: list[str] = []
    stop = store.on_change(heard.append)
    store.set("core.agent.max_tool_turns", 4)
    assert store.unset("core.agent.max_tool_turns") is True
    assert store.get("core.agent.max_tool_turns") == 10
    stop()
    store.set("core.agent.max_tool_turns", 5)
    assert heard == ["core.agent.max_tool_turns", "core.agent.max_tool_turns"]


def test_an_invalid_definition_is_refused(store: ConfigStore):
    with pytest.raises(ConfigValueError, match="unknown type 'colour'"):
        store.define(ConfigDef(key="core.x", type="colour"))
    with pytest.raises(ConfigValueError):
        store.define(ConfigDef(key="core.y", type="int", default="abc"))


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("5m", 300), ("2h", 7200), ("1h30m", 5400), ("500ms", 0.5), ("45", 45)]
)
def test_durations_parse_and_format_back(text: str, seconds: float):
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["", "5 minutes", "m5", "-3s", "1x"])
def test_bad_durations_are_refused_with_examples(text: str):
    with pytest.raises(ValueError, match=r"30s|negative"):
        parse_duration(text)
