"""docs/CONFIG.md is the rendered configuration reference, and the renderer is faithful."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from homeagent_core.cli.config_docs import (
    REGENERATE,
    SOURCE_FIELD_DOCS,
    collect_plugin_definitions,
    render_config_reference,
    render_table,
)
from homeagent_core.config import _SOURCE_FIELDS, CORE_DEFS
from homeagent_core.plugins.manager import DEFAULT_PLUGINS
from homeagent_sdk.errors import PluginLoadError
from homeagent_sdk.types import ConfigDef

ROOT = Path(__file__).resolve().parents[1]
CONFIG_MD = ROOT / "docs" / "CONFIG.md"


@pytest.fixture(scope="module")
def rendered() -> str:
    return render_config_reference()


def test_the_committed_reference_is_the_rendered_one(rendered: str) -> None:
    committed = CONFIG_MD.read_text(encoding="utf-8") if CONFIG_MD.exists() else ""
    assert committed == rendered, f"docs/CONFIG.md is out of date; regenerate it with: {REGENERATE}"


def test_every_core_setting_and_source_field_is_documented(rendered: str) -> None:
    for definition in CORE_DEFS:
        assert f"| `{definition.key}` |" in rendered, definition.key
    for field in _SOURCE_FIELDS:
        assert f"| `core.llm.sources.<name>.{field}` |" in rendered, field
    assert set(SOURCE_FIELD_DOCS) >= set(_SOURCE_FIELDS)


def test_every_builtin_plugin_setting_is_documented_under_its_plugin(rendered: str) -> None:
    plugins = collect_plugin_definitions()
    assert {"webui", "cmd", "mcp", "timer"} <= set(plugins)
    for name, definitions in plugins.items():
        section = rendered.split(f"### plugin.{name}\n", 1)[1].split("\n### ", 1)[0]
        for definition in definitions:
            assert definition.key.startswith(f"plugin.{name}.")
            assert f"| `{definition.key}` |" in section, definition.key


def test_the_operator_plugin_switches_do_not_change_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    before = collect_plugin_definitions()
    monkeypatch.setenv("HOMEAGENT_DISABLE_PLUGINS", "webui,cmd")
    monkeypatch.setenv("HOMEAGENT_LOAD_PLUGINS", "")
    assert collect_plugin_definitions() == before


def test_secret_defaults_never_appear() -> None:
    table = render_table([
        ConfigDef(key="plugin.demo.token", type="password", default="hunter2-default", secret=True),
        ConfigDef(key="plugin.demo.hidden", type="string", default="s3cret-string", secret=True),
    ])
    assert "hunter2" not in table and "s3cret" not in table
    assert table.count("*(secret)*") == 2


def test_cells_show_ranges_options_units_and_escape_markup() -> None:
    table = render_table([
        ConfigDef(key="a.timeout", type="duration", default="90s", min=0.5, max=7200, description="x <data> y"),
        ConfigDef(key="a.mode", type="select", default="b", options=["a|1", "b"], restart_required=True),
        ConfigDef(key="a.max_bytes", type="int", default=2 * 1024 * 1024, min=1024),
        ConfigDef(key="a.prompt", type="text", default="line one\nline two"),
    ])
    rows = {line.split(" | ")[0].strip("| `"): line for line in table.splitlines() if line.startswith("| `a.")}
    assert "500ms – 2h" in rows["a.timeout"] and "x &lt;data&gt; y" in rows["a.timeout"]
    assert "`a\\|1`, `b`" in rows["a.mode"] and rows["a.mode"].endswith("| restart |")
    assert "`2097152` (2 MiB)" in rows["a.max_bytes"] and "≥ 1,024" in rows["a.max_bytes"]
    assert "*(below)*" in rows["a.prompt"]
    assert "Default of `a.prompt`:\n\n```text\nline one\nline two\n```" in table


def test_a_plugin_that_fails_to_load_stops_the_rendering_with_its_name() -> None:
    with pytest.raises(PluginLoadError, match="homeagent_no_such_plugin_module"):
        collect_plugin_definitions([*DEFAULT_PLUGINS, "homeagent_no_such_plugin_module"])


def test_the_module_prints_the_reference_as_utf8() -> None:
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "LC_ALL": "C"}
    out = subprocess.run(
        [sys.executable, "-m", "homeagent_core.cli.config_docs"],
        capture_output=True, check=True, cwd=ROOT, env=env, timeout=60,
    ).stdout
    assert out.decode("utf-8") == render_config_reference()
