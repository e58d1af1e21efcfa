"""Adapter deployment with the .bundled manifest, listing and resolution."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from homeagent_core.providers.deploy import (
    MANIFEST_NAME,
    bundled_adapters_dir,
    deploy_bundled_adapters,
    list_adapters,
    resolve_adapter,
)

BUNDLED = {
    "anthropic",
    "deepseek",
    "gemini",
    "github",
    "groq",
    "kimi",
    "mistral",
    "ollama",
    "openai",
    "qwen",
    "server",
    "zhipu",
}


def test_twelve_adapters_are_bundled() -> None:
    assert {p.stem for p in bundled_adapters_dir().glob("*.lua")} == BUNDLED


def test_deploy_writes_files_and_manifest_idempotently(tmp_path: Path) -> None:
    first = deploy_bundled_adapters(tmp_path)
    assert {r["status"] for r in first} == {"installed"}
    manifest = (tmp_path / "adapters" / MANIFEST_NAME).read_text(encoding="utf-8")
    for line in manifest.splitlines():
        name, digest = line.split("\t")
        assert hashlib.sha256((tmp_path / "adapters" / name).read_bytes()).hexdigest() == digest
    assert {r["status"] for r in deploy_bundled_adapters(tmp_path)} == {"unchanged"}


def test_user_edits_are_never_overwritten(tmp_path: Path) -> None:
    deploy_bundled_adapters(tmp_path)
    mine = tmp_path / "adapters" / "openai.lua"
    mine.write_text("-- my tweak\n" + mine.read_text(encoding="utf-8"), encoding="utf-8")
    rows = {r["name"]: r["status"] for r in deploy_bundled_adapters(tmp_path)}
    assert rows["openai"] == "kept"
    assert mine.read_text(encoding="utf-8").startswith("-- my tweak")


def test_unmodified_old_copy_is_updated(tmp_path: Path) -> None:
    src = tmp_path / "v1"
    src.mkdir()
    (src / "a.lua").write_text("-- v1\n", encoding="utf-8")
    data = tmp_path / "data"
    deploy_bundled_adapters(data, source_dir=src)
    (src / "a.lua").write_text("-- v2\n", encoding="utf-8")
    assert deploy_bundled_adapters(data, source_dir=src)[0]["status"] == "updated"
    assert (data / "adapters" / "a.lua").read_text(encoding="utf-8") == "-- v2\n"


def test_deleted_file_is_reinstalled(tmp_path: Path) -> None:
    deploy_bundled_adapters(tmp_path)
    (tmp_path / "adapters" / "gemini.lua").unlink()
    rows = {r["name"]: r["status"] for r in deploy_bundled_adapters(tmp_path)}
    assert rows["gemini"] == "installed"


def test_list_adapters_reports_origin_status_and_shadowing(tmp_path: Path) -> None:
    deploy_bundled_adapters(tmp_path)
    adir = tmp_path / "adapters"
    (adir / "mistral.lua").write_text(
        (adir / "mistral.lua").read_text(encoding="utf-8") + "\n-- edited\n", encoding="utf-8"
    )
    (adir / "mine.lua").write_text(
        'return {name="mine", version="0.1", transform_request=function(r) return r end}', encoding="utf-8"
    )
    (adir / "bad.lua").write_text("return {", encoding="utf-8")
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / "extra.lua").write_text(
        'return {name="extra", version="1", transform_request=function(r) return r end}', encoding="utf-8"
    )
    rows = list_adapters(tmp_path, [plugin_dir])
    by = {(r["name"], r["origin"]): r for r in rows}
    assert by[("openai", "deployed")]["status"] == "ok"
    assert by[("openai", "deployed")]["version"] == "2.0.0"
    assert by[("mistral", "modified")]["active"] is True
    assert by[("mine", "user")]["version"] == "0.1"
    assert by[("bad", "user")]["status"] == "error"
    assert "syntax error" in by[("bad", "user")]["error"]
    assert by[("extra", "plugin")]["status"] == "ok"
    assert by[("openai", "bundled")]["active"] is False  # shadowed by the deployed copy


def test_resolve_adapter_order_and_aliases(tmp_path: Path) -> None:
    assert resolve_adapter("openai") == bundled_adapters_dir() / "openai.lua"
    assert resolve_adapter("kimicode") == bundled_adapters_dir() / "kimi.lua"
    assert resolve_adapter("nope") is None
    deploy_bundled_adapters(tmp_path)
    assert resolve_adapter("openai", data_dir=tmp_path) == tmp_path / "adapters" / "openai.lua"
    custom = tmp_path / "custom.lua"
    custom.write_text("return {}", encoding="utf-8")
    assert resolve_adapter("openai", adapter_path="custom.lua", data_dir=tmp_path) == custom


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_manifest_survives_unreadable_garbage(tmp_path: Path) -> None:
    adir = tmp_path / "adapters"
    adir.mkdir()
    (adir / MANIFEST_NAME).write_text("garbage line\nopenai.lua\tnothex\n", encoding="utf-8")
    rows = deploy_bundled_adapters(tmp_path)
    assert {r["status"] for r in rows} == {"installed"}


def test_import_is_light() -> None:
    import subprocess

    code = "import sys, homeagent_core.providers as p; print('lupa' in sys.modules, 'httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]


def test_the_name_a_script_declares_is_its_registry_key(tmp_path: Path) -> None:
    deploy_bundled_adapters(tmp_path)
    adir = tmp_path / "adapters"
    mine = adir / "my-claude.lua"
    mine.write_text(
        'return {name = "anthropic", version = "9.9", transform_request = function(r) return r end}', encoding="utf-8"
    )
    assert resolve_adapter("anthropic", data_dir=tmp_path) == mine
    assert resolve_adapter("claude", data_dir=tmp_path) == mine  # the alias reaches it too
    rows = [r for r in list_adapters(tmp_path) if r["name"] == "anthropic"]
    active = [r for r in rows if r["active"]]
    assert [(r["path"], r["version"]) for r in active] == [(str(mine), "9.9")]
    assert {r["origin"] for r in rows if not r["active"]} == {"deployed", "bundled"}
    # A file keeps its file name only while it declares no other name.
    proxy = adir / "openai.lua"
    proxy.write_text(proxy.read_text(encoding="utf-8").replace('name = "openai"', 'name = "openai-proxy"'), "utf-8")
    assert resolve_adapter("openai-proxy", data_dir=tmp_path) == proxy
    assert resolve_adapter("openai", data_dir=tmp_path) == bundled_adapters_dir() / "openai.lua"
    names = {(r["name"], r["origin"]): r["active"] for r in list_adapters(tmp_path)}
    assert names[("openai-proxy", "modified")] is True and names[("openai", "bundled")] is True


async def test_a_source_uses_the_user_file_that_declares_its_adapter_name(tmp_path: Path) -> None:
    from homeagent_core.providers.manager import ProviderManager, SourceConfig

    deploy_bundled_adapters(tmp_path)
    bundled = (bundled_adapters_dir() / "openai.lua").read_text(encoding="utf-8")
    (tmp_path / "adapters" / "zz-mine.lua").write_text(
        bundled.replace('name = "openai"', 'name = "house"').replace("headers = {}", 'headers = {["x-house"] = "1"}'),
        encoding="utf-8",
    )
    mgr = ProviderManager(
        [SourceConfig(name="box", base_url="http://127.0.0.1:9/v1", model="m", adapter="house")], data_dir=tmp_path
    )
    (provider,) = mgr.candidates()
    assert provider.adapter.origin == str(tmp_path / "adapters" / "zz-mine.lua")
    assert provider.adapter.headers == {"x-house": "1"}
    await mgr.aclose()
