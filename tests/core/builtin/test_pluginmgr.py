"""The pluginmgr built-in: tools over real packages, supervised proc plugins and a real config."""

from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path

from homeagent_core.builtin.pluginmgr import make_plugin
from homeagent_core.config import ConfigStore
from homeagent_core.events import EventBus
from homeagent_core.plugins.proc import discover_proc_plugins
from homeagent_core.plugins.sdk import ScopedSDK, Services
from homeagent_core.plugins.supervisor import Supervisor

RAW = Path(__file__).resolve().parents[2] / "plugins" / "raw_ndjson_plugin.py"


def raw_hmap(path: Path, version: str, marker: str = "[raw]") -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("plugin.json", json.dumps({"name": "raw", "version": version, "entry": "plugin.bin"}))
        zf.writestr("plugin.bin", f"#!{sys.executable}\n" + RAW.read_text().replace("[raw]", marker))
    return path


async def test_install_list_info_upgrade_and_remove_through_the_tools(tmp_path: Path) -> None:
    config = ConfigStore(tmp_path / "config.db")
    bus = EventBus()
    supervisor = Supervisor(backoff=(0.01, 0.01, 0.01))
    services = Services(config=config, bus=bus, data_dir=tmp_path)
    services.supervisor = supervisor  # type: ignore[attr-defined]
    mgr = make_plugin()
    mgr.startup(ScopedSDK.for_plugin("pluginmgr", services, privileged=True))
    try:
        first = json.loads(await mgr.plugin_install(str(raw_hmap(tmp_path / "a.hmap", "1.0"))))
        assert first["status"] == "installed" and first["action"] == "reload_required"
        again = json.loads(await mgr.plugin_install(str(tmp_path / "a.hmap")))
        assert again["error"] == "plugin already exists"
        bad = tmp_path / "bad.hmap"
        with zipfile.ZipFile(bad, "w") as zf:
            zf.writestr("plugin.json", "{}")
        assert "missing required" in json.loads(await mgr.plugin_install(str(bad)))["details"]

        [(name, plugin)] = discover_proc_plugins(tmp_path, supervisor=supervisor)
        await plugin.startup(ScopedSDK.for_plugin(name, services, privileged=True))
        listed = json.loads(mgr.plugin_list())
        assert listed[0]["name"] == "raw" and listed[0]["status"] == "started" and listed[0]["pid"] > 0
        assert "plugin.bin" in json.loads(mgr.plugin_info("raw"))["files"]

        upgraded = json.loads(await mgr.plugin_install(str(raw_hmap(tmp_path / "b.hmap", "2.0", "[v2]")), True))
        assert upgraded["action"] == "reloaded" and upgraded["previous_version"] == "1.0"
        assert plugin.runtime_info()["alive"]
        from homeagent_sdk.types import StageContext

        ctx = StageContext(final_text="x")
        await plugin.before_output(ctx)
        assert ctx.final_text == "x [v2]"

        removed = json.loads(await mgr.plugin_remove("raw"))
        assert removed["status"] == "removed"
        assert not plugin.runtime_info()["alive"] and supervisor.names() == []
        assert json.loads(mgr.plugin_info("raw")) == {"error": "plugin not found"}
    finally:
        await supervisor.stop_all()
        await bus.aclose()
        config.close()


def test_the_cli_commands_install_disable_enable_and_remove(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from homeagent_core.cli import plugins_install

    app = typer.Typer()
    for fn in (
        plugins_install.install,
        plugins_install.remove,
        plugins_install.enable,
        plugins_install.disable,
        plugins_install.reload,
    ):
        app.command()(fn)
    runner = CliRunner()
    data = tmp_path / "data"
    package = raw_hmap(tmp_path / "p.hmap", "1.0")
    out = runner.invoke(app, ["install", str(package), "--data", str(data)])
    assert out.exit_code == 0 and "installed raw 1.0" in out.output
    assert runner.invoke(app, ["install", str(package), "--data", str(data)]).exit_code == 1
    assert runner.invoke(app, ["disable", "raw", "--data", str(data)]).exit_code == 0
    config = ConfigStore(data / "config.db")
    assert "raw" in config.disabled_plugins()
    config.close()
    assert runner.invoke(app, ["enable", "raw", "--data", str(data)]).exit_code == 0
    assert "valid" in runner.invoke(app, ["reload", "raw", "--data", str(data)]).output
    assert runner.invoke(app, ["remove", "raw", "--data", str(data)]).exit_code == 0
    assert not (data / "plugins" / "raw").exists()
    bad = tmp_path / "bad.hmap"
    bad.write_bytes(io.BytesIO(b"nope").getvalue())
    failed = runner.invoke(app, ["install", str(bad), "--data", str(data)])
    assert failed.exit_code == 1 and "not a valid zip" in failed.output
