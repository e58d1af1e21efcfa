"""Packages installed into a running daemon start at once: no restart between install and use."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from hmapdev.build import pack_project, render_template
from homeagent_sdk.testing import ToolCallReply

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)
ZIP = {"Content-Type": "application/zip"}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_until(predicate: Any, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


def broken_package(root: Path, name: str = "brokenweather") -> Path:
    """A real hmapdev-built plugin whose ``startup`` fails (the child answers plugin.start with an error)."""
    project = root / name
    render_template("proc", name, project)
    source = project / "src" / "plugin.py"
    text = source.read_text(encoding="utf-8")
    source.write_text(
        text.replace('self.outbox = Path(sdk.data_dir) / "outbox.txt"',
                     'raise RuntimeError("the weather service key is missing")'),
        encoding="utf-8",
    )
    return pack_project(project)


def lua_package(root: Path, name: str = "luagreeter") -> Path:
    project = root / name
    render_template("lua", name, project)
    return pack_project(project)


def tool_result(request: dict[str, Any]) -> list[str]:
    """The tool results the model was sent in one request."""
    return [str(m.get("content")) for m in request["messages"] if m.get("role") == "tool"]


async def test_an_hmap_installed_from_the_web_ui_is_started_its_tool_answers_in_the_next_turn_and_removal_stops_it(
    daemon: WebDaemon, tmp_path: Path, build_hmap
):
    app = daemon.app
    async with daemon.client() as client:
        installed = await client.post("/api/v1/plugins", content=build_hmap(tmp_path).read_bytes(), headers=ZIP)
        assert installed.status_code == 201, installed.text
        result = installed.json()
        assert result["action"] == "started" and "greeter_greet" in result["tools"], result
        pid = app.supervisor.live()["greeter"]
        assert alive(pid)

        rows = {r["name"]: r for r in (await client.get("/api/v1/plugins")).json()["plugins"]}
        assert rows["greeter"]["status"] == "started" and rows["greeter"]["kind"] == "proc"
        assert not rows["greeter"].get("restart_required") and rows["greeter"]["pid"] == pid

        daemon.model.add(ToolCallReply("greeter_greet", {"who": "小王"}), "打过招呼了")
        reply = await client.post("/api/v1/chat", json={"message": "跟小王打个招呼"})
        assert reply.status_code == 200 and reply.json()["response"] == "打过招呼了"
        assert tool_result(daemon.model.requests[-1]) == ["Hello, 小王!"]

        removed = (await client.delete("/api/v1/plugins/greeter")).json()
        assert removed["status"] == "removed" and removed["stopped"] is True
        await wait_until(lambda: not alive(pid))
        assert "greeter_greet" not in app.kernel.tools and app.host.info("greeter") is None
        names = [r["name"] for r in (await client.get("/api/v1/plugins")).json()["plugins"]]
        assert "greeter" not in names


async def test_a_broken_hmap_installed_live_fails_with_its_reason_and_the_daemon_keeps_serving(
    daemon: WebDaemon, tmp_path: Path, build_hmap
):
    app = daemon.app
    async with daemon.client() as client:
        installed = await client.post("/api/v1/plugins", content=broken_package(tmp_path).read_bytes(), headers=ZIP)
        assert installed.status_code == 201, installed.text
        result = installed.json()
        assert result["action"] == "start_failed"
        assert "brokenweather did not start" in result["start_error"]
        assert "the weather service key is missing" in result["start_error"]
        assert "brokenweather" not in app.supervisor.live()
        assert not [t for t in app.kernel.tools.by_plugin().get("brokenweather", [])]

        rows = {r["name"]: r for r in (await client.get("/api/v1/plugins")).json()["plugins"]}
        assert rows["brokenweather"]["status"] == "failed"
        assert "the weather service key is missing" in rows["brokenweather"]["error"]

        again = await client.post("/api/v1/plugins/brokenweather/start")
        assert again.status_code == 409 and "the weather service key is missing" in again.json()["error"]
        missing = await client.post("/api/v1/plugins/nosuch/start")
        assert missing.status_code == 404 and "not installed" in missing.json()["error"]

        daemon.model.add("还在")
        reply = await client.post("/api/v1/chat", json={"message": "你还在吗"})
        assert reply.status_code == 200 and reply.json()["response"] == "还在"

        # A working package installed next to it starts fine.
        good = await client.post("/api/v1/plugins", content=build_hmap(tmp_path).read_bytes(), headers=ZIP)
        assert good.json()["action"] == "started" and "greeter_greet" in app.kernel.tools


async def test_a_lua_package_and_a_package_put_on_disk_behind_the_daemon_start_without_a_restart(
    daemon: WebDaemon, tmp_path: Path, build_hmap
):
    from homeagent_core.plugins.packages import install_package

    app = daemon.app
    async with daemon.client() as client:
        lua = await client.post("/api/v1/plugins", content=lua_package(tmp_path).read_bytes(), headers=ZIP)
        assert lua.status_code == 201, lua.text
        assert (lua.json()["action"], lua.json()["tools"]) == ("started", ["luagreeter_greet"])
        daemon.model.add(ToolCallReply("luagreeter_greet", {"who": "阿花"}), "好")
        await client.post("/api/v1/chat", json={"message": "问候阿花"})
        assert tool_result(daemon.model.requests[-1]) == ["Hello, 阿花!"]

        # Installed on disk by another process (homeagent plugins install without a daemon connection):
        # the plugin list offers it as not running, and the Reload button starts it.
        install_package(app.data_dir, build_hmap(tmp_path))
        rows = {r["name"]: r for r in (await client.get("/api/v1/plugins")).json()["plugins"]}
        assert rows["greeter"]["restart_required"] is True
        reload = (await client.post("/api/v1/plugins/reload")).json()
        assert reload["started"] == ["greeter"] and reload["restart_required"] == [] and reload["failed"] == {}
        assert "greeter_greet" in app.kernel.tools

        removed = (await client.delete("/api/v1/plugins/luagreeter")).json()
        assert removed["stopped"] is True and "luagreeter_greet" not in app.kernel.tools


async def test_disable_stops_a_running_package_enable_starts_it_and_a_skill_package_is_indexed_on_install(
    daemon: WebDaemon, tmp_path: Path, build_hmap
):
    app = daemon.app
    async with daemon.client() as client:
        assert (await client.post("/api/v1/plugins", content=build_hmap(tmp_path).read_bytes(),
                                  headers=ZIP)).json()["action"] == "started"
        pid = app.supervisor.live()["greeter"]
        disabled = (await client.post("/api/v1/plugins/greeter/disable")).json()
        assert disabled["action"] == "stopped" and "greeter_greet" not in app.kernel.tools
        await wait_until(lambda: not alive(pid))
        refused = await client.post("/api/v1/plugins/greeter/start")
        assert refused.status_code == 409 and "greeter is disabled" in refused.json()["error"]
        enabled = (await client.post("/api/v1/plugins/greeter/enable")).json()
        assert enabled["action"] == "started" and "greeter_greet" in enabled["tools"]
        assert "greeter_greet" in app.kernel.tools and app.supervisor.live()["greeter"] != pid

        render_template("skill", "packing-list", tmp_path / "packing-list")
        skill = await client.post("/api/v1/plugins", content=pack_project(tmp_path / "packing-list").read_bytes(),
                                  headers=ZIP)
        assert skill.status_code == 201, skill.text
        assert skill.json()["action"] == "rescanned"
        assert "packing-list" in app.host.pm.get_plugin("skills").index.skills


async def test_a_skill_package_with_a_broken_skill_md_says_why_it_was_not_loaded(daemon: WebDaemon, tmp_path: Path):
    render_template("skill", "bad-skill", tmp_path / "bad-skill")
    (tmp_path / "bad-skill" / "SKILL.md").write_text("no front matter here\n", encoding="utf-8")
    package = pack_project(tmp_path / "bad-skill").read_bytes()
    async with daemon.client() as client:
        result = (await client.post("/api/v1/plugins", content=package, headers=ZIP)).json()
    assert result["action"] == "start_failed", result
    assert "skill package bad-skill was not loaded" in result["start_error"]
    assert "no YAML front matter" in result["start_error"]


async def test_two_doors_starting_one_package_at_once_start_it_once_and_a_builtins_name_is_refused(
    daemon: WebDaemon, tmp_path: Path, build_hmap
):
    from homeagent_core.plugins.packages import install_package

    app = daemon.app
    install_package(app.data_dir, build_hmap(tmp_path))
    first, second = await asyncio.gather(app.services.live.start("greeter"), app.services.live.start("greeter"))
    assert sorted([first["status"], second["status"]]) == ["reloaded", "started"]
    assert list(app.supervisor.live()) == ["greeter"] and "greeter_greet" in app.kernel.tools
    assert app.host.info("greeter").status == "started"

    install_package(app.data_dir, build_hmap(tmp_path / "clash", name="cfgmgr"))
    async with daemon.client() as client:
        clash = await client.post("/api/v1/plugins/cfgmgr/start")
    assert clash.status_code == 409 and "taken by a builtin plugin" in clash.json()["error"]
    assert app.host.info("cfgmgr").status == "started" and "config_list_plugins" in app.kernel.tools
