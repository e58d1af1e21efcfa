"""The pluginmgr built-in: tools over real packages and supervised proc plugins, and its HTTP
door (the web UI's /api/v1/plugins) over real HTTP on 127.0.0.1."""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import json
import os
import sys
import threading
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from homeagent_core.app import App
from homeagent_core.builtin.pluginmgr import make_plugin
from homeagent_core.config import ConfigStore
from homeagent_core.events import EventBus
from homeagent_core.plugins.proc import discover_proc_plugins
from homeagent_core.plugins.sdk import ScopedSDK, Services
from homeagent_core.plugins.supervisor import Supervisor
from homeagent_sdk.testing import FakeModel
from homeagent_sdk.types import StageContext, ToolCall

RAW = Path(__file__).resolve().parents[2] / "plugins" / "raw_ndjson_plugin.py"
MGR = "homeagent_core.builtin.pluginmgr"
WEBUI = "homeagent_core.builtin.webui"
API_KEY = "test-api-key-0123456789"


def raw_hmap(path: Path, version: str, marker: str = "[raw]") -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("plugin.json", json.dumps({"name": "raw", "version": version, "entry": "plugin.bin"}))
        zf.writestr("plugin.bin", f"#!{sys.executable}\n" + RAW.read_text().replace("[raw]", marker))
    return path


def bad_hmap(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("plugin.json", "{}")
    return path


def mgr_sdk(services: Services) -> ScopedSDK:
    """The pluginmgr's privileged scoped SDK."""
    return ScopedSDK.for_plugin("pluginmgr", services, privileged=True)


async def test_install_list_info_upgrade_and_remove_through_the_tools(tmp_path: Path) -> None:
    config = ConfigStore(tmp_path / "config.db")
    bus = EventBus()
    supervisor = Supervisor(backoff=(0.01, 0.01, 0.01))
    services = Services(config=config, bus=bus, data_dir=tmp_path, supervisor=supervisor)
    mgr = make_plugin()
    await mgr.startup(mgr_sdk(services))
    try:
        first = json.loads(await mgr.plugin_install(str(raw_hmap(tmp_path / "a.hmap", "1.0"))))
        assert first["status"] == "installed" and first["action"] == "reload_required"
        again = json.loads(await mgr.plugin_install(str(tmp_path / "a.hmap")))
        assert again["error"] == "plugin already exists"
        assert "missing required" in json.loads(await mgr.plugin_install(str(bad_hmap(tmp_path / "bad.hmap"))))[
            "details"
        ]

        [(name, plugin)] = discover_proc_plugins(tmp_path, supervisor=supervisor)
        await plugin.startup(ScopedSDK.for_plugin(name, services, privileged=True))
        listed = json.loads(mgr.plugin_list())
        assert listed[0]["name"] == "raw" and listed[0]["status"] == "started" and listed[0]["pid"] > 0
        assert "plugin.bin" in json.loads(mgr.plugin_info("raw"))["files"]

        upgraded = json.loads(await mgr.plugin_install(str(raw_hmap(tmp_path / "b.hmap", "2.0", "[v2]")), True))
        assert upgraded["action"] == "reloaded" and upgraded["previous_version"] == "1.0"
        assert plugin.runtime_info()["alive"]
        ctx = StageContext(final_text="x")
        await plugin.before_output(ctx)
        assert ctx.final_text == "x [v2]"

        removed = json.loads(await mgr.plugin_remove("raw"))
        assert removed["status"] == "removed"
        assert not plugin.runtime_info()["alive"] and supervisor.names() == []
        assert json.loads(mgr.plugin_info("raw")) == {"error": "plugin not found"}
        assert json.loads(await mgr.plugin_remove("raw")) == {"error": "plugin not found"}
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


# --------------------------------------------------------------------------- HTTP API


@pytest.fixture
def file_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real HTTP server on 127.0.0.1 serving ``<tmp>/www`` (for ``{"url": ...}`` installs)."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def listening_tcp_ports() -> set[int]:
    """TCP ports this process listens on (its own sockets, matched in /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table, encoding="ascii") as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture
async def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """``await running(install_first=False)`` -> (App, web UI plugin, httpx client with the API key)."""
    monkeypatch.setenv("HOMEAGENT_WEBUI_API_KEY", API_KEY)
    apps: list[App] = []
    clients: list[httpx.AsyncClient] = []

    async def make(*, install_first: bool = False) -> tuple[App, Any, httpx.AsyncClient]:
        data = tmp_path / "data"
        if install_first:  # an installed proc plugin the app starts and supervises
            from homeagent_core.plugins.packages import install_package

            install_package(data, raw_hmap(tmp_path / "first.hmap", "1.0"))
        before = listening_tcp_ports()
        app = App(data, load_entrypoints=False, builtins=[MGR, WEBUI], provider=FakeModel(default="ok"),
                  memory=False)
        app.services.listen_port = 0
        apps.append(app)
        await app.start()
        assert app.status()["failed"] == [], app.status()
        web = app.host.pm.get_plugin("webui")
        # the web UI is the only listener the daemon added: the plugin manager has no port of its own
        assert listening_tcp_ports() - before == {web.port}
        client = httpx.AsyncClient(base_url=web.url, timeout=30, headers={"X-API-Key": API_KEY})
        clients.append(client)
        return app, web, client

    yield make
    for client in clients:
        await client.aclose()
    for app in apps:
        if app.started:
            await app.stop()


async def test_the_plugin_manager_http_door_is_the_authenticated_web_ui(
    running: Any, tmp_path: Path, file_server: tuple[str, Path]
) -> None:
    app, web, client = await running()
    package = raw_hmap(tmp_path / "raw.hmap", "1.0").read_bytes()
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as stranger:
        anonymous = await stranger.post("/api/v1/plugins", content=package, headers={"content-type": "application/zip"})
        assert anonymous.status_code == 401
    assert not (app.data_dir / "plugins" / "raw").exists()

    created = await client.post("/api/v1/plugins", content=package, headers={"content-type": "application/zip"})
    assert created.status_code == 201, created.text
    assert (created.json()["name"], created.json()["version"]) == ("raw", "1.0")
    by_path = await client.post("/api/v1/plugins", json={"path": str(raw_hmap(tmp_path / "v2.hmap", "2.0")),
                                                         "overwrite": True})
    assert by_path.status_code == 201, by_path.text
    assert (by_path.json()["action"], by_path.json()["previous_version"]) == ("reloaded", "1.0")  # it was started
    base, www = file_server
    raw_hmap(www / "served.hmap", "3.0")
    by_url = await client.post("/api/v1/plugins?overwrite=true", json={"url": f"{base}/served.hmap"})
    assert by_url.status_code == 201 and by_url.json()["version"] == "3.0", by_url.text
    not_there = await client.post("/api/v1/plugins", json={"url": f"{base}/absent.hmap"})
    assert not_there.status_code == 502 and "HTTP 404" in not_there.json()["error"]
    invalid = await client.post("/api/v1/plugins", json={"path": str(bad_hmap(tmp_path / "bad.hmap"))})
    assert invalid.status_code == 400 and "missing required" in invalid.json()["error"]
    assert (await client.delete("/api/v1/plugins/raw")).status_code == 200
    assert not (app.data_dir / "plugins" / "raw").exists()


async def test_installing_over_a_running_proc_plugin_restarts_it_on_the_new_version(
    running: Any, tmp_path: Path
) -> None:
    app, _web, client = await running(install_first=True)
    assert app.supervisor is not None and app.kernel is not None
    plugin = app.supervisor.get("raw")
    old_pid = plugin.runtime_info()["pid"]
    assert old_pid > 0

    package = raw_hmap(tmp_path / "v2.hmap", "2.0", "[v2]").read_bytes()
    upgraded = await client.post("/api/v1/plugins?overwrite=true", content=package,
                                 headers={"content-type": "application/octet-stream"})
    assert upgraded.status_code == 201, upgraded.text
    assert (upgraded.json()["action"], upgraded.json()["previous_version"]) == ("reloaded", "1.0")
    info = plugin.runtime_info()
    assert info["alive"] and info["pid"] != old_pid and info["version"] == "2.0"
    ctx = StageContext(final_text="x")
    await plugin.before_output(ctx)
    assert ctx.final_text == "x [v2]"

    removed = await client.delete("/api/v1/plugins/raw")
    assert removed.status_code == 200
    assert not plugin.runtime_info()["alive"]
    assert plugin.runtime_info()["tools"] == []
    result = await app.kernel.tools.execute(ToolCall("c", "raw_echo", {"text": "hi"}))
    assert not result.success


async def test_a_stored_listen_address_from_older_versions_is_reported_as_unused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from homeagent_sdk.types import ConfigDef

    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    old = ConfigStore(data / "config.db")
    old.define(ConfigDef(key="plugin.pluginmgr.http_addr", type="string", default="127.0.0.1:9876"))
    old.set("plugin.pluginmgr.http_addr", "127.0.0.1:9876")
    old.close()
    caplog.set_level("WARNING", logger="homeagent.pluginmgr")
    before = listening_tcp_ports()
    app = App(data, load_entrypoints=False, builtins=[MGR], provider=FakeModel(default="ok"), memory=False)
    await app.start()
    try:
        assert app.status()["failed"] == []
        assert listening_tcp_ports() == before
    finally:
        await app.stop()
    assert any("plugin.pluginmgr.http_addr no longer does anything" in r.getMessage() for r in caplog.records)


async def test_the_models_tools_start_a_package_installed_while_running_and_plgreload_starts_one_put_on_disk(
    running: Any, tmp_path: Path
) -> None:
    from homeagent_core.plugins.packages import install_package

    app, _web, _client = await running()
    tools = app.kernel.tools
    installed = await tools.execute(ToolCall("c1", "plugin_install", {"source": str(raw_hmap(tmp_path / "a.hmap",
                                                                                                   "1.0"))}))
    result = json.loads(installed.result)
    assert result["action"] == "started" and "raw_echo" in result["tools"], result
    echoed = await tools.execute(ToolCall("c2", "raw_echo", {"text": "在"}))
    assert echoed.success and echoed.result == "在"
    assert json.loads((await tools.execute(ToolCall("c3", "plugin_remove", {"name": "raw"}))).result)[
        "status"] == "removed"
    assert "raw_echo" not in tools and "raw" not in app.supervisor.live()

    install_package(app.data_dir, raw_hmap(tmp_path / "b.hmap", "2.0"))  # behind the daemon's back
    started = await tools.execute(ToolCall("c4", "plgreload", {"name": "raw"}))
    assert started.success and json.loads(started.result)["status"] == "started", started.result
    assert (await tools.execute(ToolCall("c5", "raw_echo", {"text": "again"}))).result == "again"
