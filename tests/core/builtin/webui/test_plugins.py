"""Plugin management over HTTP with real ``.hmap`` packages and real plugin processes."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.plugins.packages import install_package
from homeagent_sdk.types import ToolCall

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)
ZIP = {"Content-Type": "application/zip"}


def leftovers(data_dir: Path) -> list[str]:
    root = data_dir / "plugins"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


async def test_an_uploaded_hmap_is_installed_started_listed_upgraded_only_on_request_and_removed(
    daemon: WebDaemon, tmp_path: Path, build_hmap
):
    package = build_hmap(tmp_path).read_bytes()
    plugins_dir = daemon.app.data_dir / "plugins"
    async with daemon.client() as client:
        installed = await client.post("/api/v1/plugins", content=package, headers=ZIP)
        assert installed.status_code == 201, installed.text
        result = installed.json()
        assert (result["status"], result["name"], result["version"], result["kind"]) == (
            "installed", "greeter", "0.1.0", "proc")
        assert result["action"] == "started"
        assert (plugins_dir / "greeter" / "plugin.pyz").is_file()

        rows = {r["name"]: r for r in (await client.get("/api/v1/plugins")).json()["plugins"]}
        assert rows["greeter"]["status"] == "started" and not rows["greeter"].get("restart_required")
        assert rows["greeter"]["version"] == "0.1.0" and rows["webui"]["status"] == "started"
        details = (await client.get("/api/v1/plugins/greeter")).json()
        assert "plugin.pyz" in details["package"]["files"] and details["package"]["version"] == "0.1.0"

        again = await client.post("/api/v1/plugins", content=package, headers=ZIP)
        assert again.status_code == 409 and "already installed" in again.json()["error"]
        newer = build_hmap(tmp_path, version="0.2.0").read_bytes()
        upgraded = await client.post("/api/v1/plugins", params={"overwrite": "true"}, content=newer, headers=ZIP)
        assert upgraded.status_code == 201 and upgraded.json()["action"] == "reloaded"
        bad_flag = await client.post("/api/v1/plugins", params={"overwrite": "perhaps"}, content=newer, headers=ZIP)
        assert bad_flag.status_code == 400 and "overwrite" in bad_flag.json()["error"]

        reload = (await client.post("/api/v1/plugins/reload")).json()
        assert reload["status"] == "reloaded" and reload["reloaded"] == []
        assert reload["restart_required"] == [] and reload["started"] == []  # it runs already

        removed = await client.delete("/api/v1/plugins/greeter")
        assert removed.json() == {"status": "removed", "name": "greeter", "action": "stopped", "stopped": True}
        assert leftovers(daemon.app.data_dir) == []
        assert (await client.get("/api/v1/plugins/greeter")).status_code == 404
        gone = await client.delete("/api/v1/plugins/greeter")
        assert gone.status_code == 404 and "not installed" in gone.json()["error"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("slip", "zip slip"),
        ("absolute", "absolute path"),
        ("symlink", "symbolic link"),
        (b"MZ\x90\x00 not a zip at all", "not a valid zip"),
        (b"", "empty body"),
    ],
)
async def test_malicious_or_broken_packages_are_refused_with_the_installers_message(
    daemon: WebDaemon, hostile_hmap, body: bytes | str, message: str
):
    if isinstance(body, str):
        body = hostile_hmap(body)
    async with daemon.client() as client:
        response = await client.post("/api/v1/plugins", content=body, headers=ZIP)
    assert response.status_code == 400 and message in response.json()["error"]
    assert leftovers(daemon.app.data_dir) == []
    assert not (daemon.app.data_dir.parent / "outside.sh").exists()


async def test_a_package_is_taken_by_its_declared_type_and_never_sniffed(
    daemon: WebDaemon, tmp_path: Path, build_hmap
):
    path = build_hmap(tmp_path, name="typed")
    package = path.read_bytes()
    async with daemon.client() as client:
        for kind in ("text/plain", "application/x-www-form-urlencoded", ""):
            refused = await client.post("/api/v1/plugins", content=package, headers={"content-type": kind})
            assert refused.status_code == 415, kind
            assert "application/zip" in refused.json()["error"]
        empty_field = await client.post("/api/v1/plugins", files={"file": ("x.hmap", b"", "application/zip")})
        assert empty_field.status_code == 400 and "'file' is empty" in empty_field.json()["error"]
        form = await client.post("/api/v1/plugins", files={"file": ("typed.hmap", package, "application/zip")})
        assert form.status_code == 201, form.text
        by_path = await client.post("/api/v1/plugins?overwrite=true", json={"path": str(path)})
        assert by_path.status_code == 201 and by_path.json()["name"] == "typed", by_path.text
        neither = await client.post("/api/v1/plugins", json={"overwrite": True})
        assert neither.status_code == 400 and '{"path"' in neither.json()["error"]
        scheme = await client.post("/api/v1/plugins", json={"url": "ftp://example.com/x.hmap"})
        assert scheme.status_code == 502 and "only http and https" in scheme.json()["error"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_until(predicate, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_a_running_process_plugin_is_upgraded_in_place_reloaded_and_stopped_on_removal(
    tmp_path: Path, start_daemon, build_hmap
):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    install_package(data_dir, build_hmap(tmp_path))
    async with start_daemon(data_dir) as daemon:
        supervisor = daemon.app.supervisor
        await wait_until(lambda: supervisor.live().get("greeter"))
        first_pid = supervisor.live()["greeter"]
        assert "greeter_greet" in daemon.app.kernel.tools
        async with daemon.client() as client:
            rows = {r["name"]: r for r in (await client.get("/api/v1/plugins")).json()["plugins"]}
            assert rows["greeter"]["kind"] == "proc" and rows["greeter"]["pid"] == first_pid

            newer = build_hmap(tmp_path, version="0.2.0", greeting="Hi").read_bytes()
            upgraded = await client.post("/api/v1/plugins?overwrite=1", content=newer, headers=ZIP)
            assert upgraded.status_code == 201 and upgraded.json()["action"] == "reloaded", upgraded.text
            second_pid = supervisor.live()["greeter"]
            assert second_pid != first_pid and not alive(first_pid)
            greeting = await daemon.app.kernel.tools.execute(ToolCall("c1", "greeter_greet", {"who": "小王"}))
            assert greeting.success and greeting.result == "Hi, 小王!"  # the new version answers

            # The entry replaced on disk behind the agent's back: reload picks it up.
            install_package(data_dir, build_hmap(tmp_path, version="0.3.0", greeting="Hey"), overwrite=True)
            reload = (await client.post("/api/v1/plugins/reload")).json()
            assert reload["reloaded"] == ["greeter"] and reload["restart_required"] == []
            third_pid = supervisor.live()["greeter"]
            assert third_pid != second_pid

            removed = (await client.delete("/api/v1/plugins/greeter")).json()
            assert removed["status"] == "removed" and removed["stopped"] is True
            await wait_until(lambda: not alive(third_pid))
            assert "greeter" not in supervisor.live() and not (data_dir / "plugins" / "greeter").exists()


async def test_disabled_plugins_are_listed_with_who_and_when(daemon: WebDaemon):
    before = time.time()
    async with daemon.client() as client:
        assert (await client.get("/api/v1/plugins/disabled")).json() == {"disabled": []}
        await client.post("/api/v1/plugins/cfgmgr/disable")
        listing = (await client.get("/api/v1/plugins/disabled")).json()["disabled"]
        assert [(d["name"], d["disabled_by"]) for d in listing] == [("cfgmgr", "webui")]
        assert before <= listing[0]["disabled_at"] <= time.time()
        await client.post("/api/v1/plugins/cfgmgr/enable")
        assert (await client.get("/api/v1/plugins/disabled")).json() == {"disabled": []}
