"""The pluginmgr built-in: tools and the loopback HTTP API over real packages, supervised proc
plugins, a real config and real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import functools
import http.server
import io
import json
import socket
import sys
import threading
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from homeagent_core.app import App
from homeagent_core.builtin.pluginmgr import PluginMgr, make_plugin, parse_http_addr
from homeagent_core.config import ConfigStore
from homeagent_core.events import EventBus
from homeagent_core.plugins.proc import discover_proc_plugins
from homeagent_core.plugins.registries import PluginSettings
from homeagent_core.plugins.sdk import ScopedSDK, Services
from homeagent_core.plugins.supervisor import Supervisor
from homeagent_sdk.errors import PluginLoadError
from homeagent_sdk.testing import FakeModel
from homeagent_sdk.types import StageContext, ToolCall

RAW = Path(__file__).resolve().parents[2] / "plugins" / "raw_ndjson_plugin.py"
MGR = "homeagent_core.builtin.pluginmgr"


def raw_hmap(path: Path, version: str, marker: str = "[raw]") -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("plugin.json", json.dumps({"name": "raw", "version": version, "entry": "plugin.bin"}))
        zf.writestr("plugin.bin", f"#!{sys.executable}\n" + RAW.read_text().replace("[raw]", marker))
    return path


def bad_hmap(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("plugin.json", "{}")
    return path


def mgr_sdk(services: Services, **settings: Any) -> ScopedSDK:
    """The pluginmgr's scoped SDK with its settings declared (and ``settings`` applied)."""
    PluginMgr().register_settings(PluginSettings("pluginmgr", services.config))
    for key, value in settings.items():
        services.config.set(f"plugin.pluginmgr.{key}", value)
    return ScopedSDK.for_plugin("pluginmgr", services, privileged=True)


async def test_install_list_info_upgrade_and_remove_through_the_tools(tmp_path: Path) -> None:
    config = ConfigStore(tmp_path / "config.db")
    bus = EventBus()
    supervisor = Supervisor(backoff=(0.01, 0.01, 0.01))
    services = Services(config=config, bus=bus, data_dir=tmp_path, supervisor=supervisor)
    mgr = make_plugin()
    await mgr.startup(mgr_sdk(services, http_addr=""))
    assert mgr.server is None  # empty address: no HTTP API
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
        await mgr.shutdown()
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


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Any]:
    """``await running(install_first=False)`` -> (App, pluginmgr plugin, httpx client)."""
    apps: list[App] = []
    clients: list[httpx.AsyncClient] = []

    async def make(*, install_first: bool = False) -> tuple[App, PluginMgr, httpx.AsyncClient]:
        data = tmp_path / "data"
        if install_first:  # an installed proc plugin the app starts and supervises
            from homeagent_core.plugins.packages import install_package

            install_package(data, raw_hmap(tmp_path / "first.hmap", "1.0"))
        app = App(data, load_entrypoints=False, builtins=[MGR], provider=FakeModel(default="ok"), memory=False,
                  overrides={"plugin.pluginmgr.http_addr": "127.0.0.1:0"})
        apps.append(app)
        await app.start()
        assert app.status()["failed"] == [], app.status()
        mgr = app.host.pm.get_plugin("pluginmgr")
        assert mgr.port and mgr.host == "127.0.0.1"
        client = httpx.AsyncClient(base_url=mgr.url, timeout=30)
        clients.append(client)
        return app, mgr, client

    yield make
    for client in clients:
        await client.aclose()
    for app in apps:
        if app.started:
            await app.stop()


async def test_the_http_api_installs_lists_details_and_removes_packages(
    running: Any, tmp_path: Path, file_server: tuple[str, Path]
) -> None:
    app, _mgr, client = await running()
    assert (await client.get("/plugins")).json() == []

    package = raw_hmap(tmp_path / "raw.hmap", "1.0").read_bytes()
    created = await client.post("/plugins", content=package, headers={"content-type": "application/zip"})
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["status"], body["name"], body["version"], body["action"]) == (
        "installed", "raw", "1.0", "reload_required")
    assert len(body["checksum"]) == 64 and (app.data_dir / "plugins" / "raw" / "plugin.bin").exists()

    again = await client.post("/plugins", content=package)
    assert again.status_code == 409
    assert again.json()["error"] == "plugin already exists" and again.json()["current"] == "1.0"

    by_path = await client.post("/plugins", json={"path": str(raw_hmap(tmp_path / "v2.hmap", "2.0")),
                                                  "overwrite": True})
    assert by_path.status_code == 201, by_path.text
    assert (by_path.json()["action"], by_path.json()["previous_version"]) == ("upgraded", "1.0")

    listed = (await client.get("/plugins")).json()
    assert listed == [{"name": "raw", "version": "2.0", "description": "", "author": "", "entry": "plugin.bin",
                       "deprecated": False}]
    details = (await client.get("/plugins/raw")).json()
    assert details["version"] == "2.0" and details["files"] == ["plugin.bin", "plugin.json"]
    for key in ("license", "homepage", "repository", "min_version", "tags", "deprecated"):
        assert key in details

    missing = await client.get("/plugins/nope")
    assert (missing.status_code, missing.json()) == (404, {"error": "plugin not found"})
    removed = await client.delete("/plugins/raw")
    assert removed.status_code == 200
    assert removed.json() == {"status": "removed", "name": "raw", "action": "reload_required"}
    assert not (app.data_dir / "plugins" / "raw").exists()
    gone = await client.delete("/plugins/raw")
    assert (gone.status_code, gone.json()) == (404, {"error": "plugin not found"})

    base, www = file_server
    raw_hmap(www / "served.hmap", "3.0")
    by_url = await client.post("/plugins", json={"url": f"{base}/served.hmap"})
    assert by_url.status_code == 201, by_url.text
    assert by_url.json()["version"] == "3.0"
    not_there = await client.post("/plugins", json={"url": f"{base}/absent.hmap"})
    assert not_there.status_code == 502 and "HTTP 404" in not_there.json()["details"]


async def test_the_http_api_refuses_bad_requests_with_clear_errors(running: Any, tmp_path: Path) -> None:
    app, _mgr, client = await running()
    neither = await client.post("/plugins", json={"overwrite": True})
    assert (neither.status_code, neither.json()) == (400, {"error": "url or path is required"})
    empty = await client.post("/plugins", content=b"")
    assert empty.status_code == 400 and empty.json()["error"] == "url or path is required"
    broken_json = await client.post("/plugins", content=b"{not json", headers={"content-type": "application/json"})
    assert broken_json.status_code == 400 and "not valid JSON" in broken_json.json()["error"]
    invalid = await client.post("/plugins", json={"path": str(bad_hmap(tmp_path / "bad.hmap"))})
    assert invalid.status_code == 400
    assert invalid.json()["error"] == "invalid package" and "missing required" in invalid.json()["details"]
    not_zip = await client.post("/plugins", content=b"PK-but-not-really")
    assert not_zip.status_code == 400 and "not a valid zip" in not_zip.json()["details"]
    no_file = await client.post("/plugins", json={"path": str(tmp_path / "absent.hmap")})
    assert no_file.status_code == 400 and "cannot read package" in no_file.json()["details"]
    scheme = await client.post("/plugins", json={"url": "ftp://example.com/x.hmap"})
    assert scheme.status_code == 502 and "only http and https" in scheme.json()["details"]
    flag = await client.post("/plugins?overwrite=maybe", content=b"x")
    assert flag.status_code == 400 and "overwrite must be true or false" in flag.json()["error"]
    assert not any((app.data_dir / "plugins").iterdir())  # nothing was left behind


async def test_installing_over_a_running_proc_plugin_restarts_it_on_the_new_version(
    running: Any, tmp_path: Path
) -> None:
    app, _mgr, client = await running(install_first=True)
    assert app.supervisor is not None and app.kernel is not None
    plugin = app.supervisor.get("raw")
    old_pid = plugin.runtime_info()["pid"]
    assert old_pid > 0
    listed = (await client.get("/plugins")).json()
    assert listed[0]["status"] == "started" and listed[0]["pid"] == old_pid

    package = raw_hmap(tmp_path / "v2.hmap", "2.0", "[v2]").read_bytes()
    upgraded = await client.post("/plugins?overwrite=true", content=package)
    assert upgraded.status_code == 201, upgraded.text
    assert (upgraded.json()["action"], upgraded.json()["previous_version"]) == ("reloaded", "1.0")
    info = plugin.runtime_info()
    assert info["alive"] and info["pid"] != old_pid and info["version"] == "2.0"
    ctx = StageContext(final_text="x")
    await plugin.before_output(ctx)
    assert ctx.final_text == "x [v2]"

    removed = await client.delete("/plugins/raw")
    assert removed.status_code == 200
    assert not plugin.runtime_info()["alive"]
    assert plugin.runtime_info()["tools"] == []
    result = await app.kernel.tools.execute(ToolCall("c", "raw_echo", {"text": "hi"}))
    assert not result.success


async def test_a_non_loopback_address_is_refused_unless_allowed(tmp_path: Path) -> None:
    config = ConfigStore(":memory:")
    bus = EventBus()
    services = Services(config=config, bus=bus, data_dir=tmp_path)
    try:
        refused = PluginMgr()
        with pytest.raises(PluginLoadError, match=r"not a loopback address.*http_allow_remote"):
            await refused.startup(mgr_sdk(services, http_addr="0.0.0.0:0"))
        assert refused.server is None
        allowed = PluginMgr()
        config.set("plugin.pluginmgr.http_allow_remote", True)
        await allowed.startup(ScopedSDK.for_plugin("pluginmgr", services, privileged=True))
        try:
            assert allowed.host == "0.0.0.0" and allowed.port
            async with httpx.AsyncClient(timeout=30) as client:
                reply = await client.get(f"http://127.0.0.1:{allowed.port}/plugins")
            assert reply.json() == []
        finally:
            await allowed.shutdown()
    finally:
        await bus.aclose()
        config.close()


def test_listen_addresses_are_parsed_and_checked() -> None:
    assert parse_http_addr("127.0.0.1:9876", allow_remote=False) == ("127.0.0.1", 9876)
    assert parse_http_addr(":9876", allow_remote=False) == ("127.0.0.1", 9876)
    assert parse_http_addr("[::1]:9876", allow_remote=False) == ("::1", 9876)
    assert parse_http_addr("localhost:1", allow_remote=False) == ("localhost", 1)
    assert parse_http_addr("192.168.1.5:80", allow_remote=True) == ("192.168.1.5", 80)
    for bad in ("9876", "host:port", "127.0.0.1:70000"):
        with pytest.raises(ValueError, match="not host:port"):
            parse_http_addr(bad, allow_remote=False)
    for remote in ("0.0.0.0:9876", "192.168.1.5:9876", "example.com:9876"):
        with pytest.raises(ValueError, match="not a loopback address"):
            parse_http_addr(remote, allow_remote=False)


async def test_a_port_in_use_is_a_clear_plugin_start_error(tmp_path: Path) -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    app = App(tmp_path / "data", load_entrypoints=False, builtins=[MGR], provider=FakeModel(default="ok"),
              memory=False, overrides={"plugin.pluginmgr.http_addr": f"127.0.0.1:{port}"})
    try:
        await app.start()
        info = app.host.info("pluginmgr")
        assert info is not None and info.status == "failed"
        assert f"cannot listen on 127.0.0.1:{port}" in info.error
        assert "plugin.pluginmgr.http_addr" in info.error
    finally:
        await app.stop()
        taken.close()


async def test_shutdown_closes_the_listening_socket(tmp_path: Path) -> None:
    config = ConfigStore(":memory:")
    bus = EventBus()
    services = Services(config=config, bus=bus, data_dir=tmp_path)
    mgr = PluginMgr()
    try:
        await mgr.startup(mgr_sdk(services, http_addr="127.0.0.1:0"))
        port = mgr.port
        async with httpx.AsyncClient(timeout=30) as client:
            assert (await client.get(f"http://127.0.0.1:{port}/plugins")).status_code == 200
        await mgr.shutdown()
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
    finally:
        await mgr.shutdown()
        await bus.aclose()
        config.close()
