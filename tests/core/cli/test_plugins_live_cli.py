"""``homeagent plugins install`` / ``homeagent install --data`` against a running ``homeagent serve``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_procs import Proc, env, homeagent, serve

from hmapdev.build import pack_project, render_template


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(homeagent(*args), env=env(), capture_output=True, text=True, timeout=300)


def proc_package(root: Path, name: str, *, failing: bool = False) -> Path:
    project = root / name
    render_template("proc", name, project)
    if failing:
        source = project / "src" / "plugin.py"
        source.write_text(
            source.read_text(encoding="utf-8").replace(
                'self.outbox = Path(sdk.data_dir) / "outbox.txt"',
                'raise RuntimeError("the weather service key is missing")',
            ),
            encoding="utf-8",
        )
    return pack_project(project)


@pytest.fixture
def daemons() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.stop()


def test_packages_installed_from_the_command_line_start_in_the_running_daemon_and_removal_stops_them(
    tmp_path: Path, daemons: list[Proc]
):
    data = tmp_path / "d"
    serve(data, daemons)

    installed = run("plugins", "install", str(proc_package(tmp_path, "greeter")), "--data", str(data))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "running daemon: started greeter (proc); tools: greeter_greet" in installed.stdout

    render_template("lua", "luahello", tmp_path / "luahello")
    lua = run("install", str(pack_project(tmp_path / "luahello")), "--data", str(data))
    assert lua.returncode == 0, lua.stdout + lua.stderr
    assert "running daemon: started luahello (lua); tools: luahello_greet" in lua.stdout

    listed = run("ask", "/plugin list", "--data", str(data))
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip()}
    assert "started" in rows["greeter"] and "started" in rows["luahello"]

    broken = run("install", str(proc_package(tmp_path, "brokenweather", failing=True)), "--data", str(data))
    assert broken.returncode == 1
    assert "installed brokenweather 0.1.0" in broken.stdout
    assert "the running daemon could not start brokenweather" in broken.stderr
    assert "the weather service key is missing" in broken.stderr

    disabled = run("plugins", "disable", "greeter", "--data", str(data))
    assert "running daemon: disabled greeter; it was stopped and its tools removed" in disabled.stdout, disabled
    enabled = run("plugins", "enable", "greeter", "--data", str(data))
    assert "running daemon: enabled greeter; it is running" in enabled.stdout, enabled

    removed = run("plugins", "remove", "greeter", "--data", str(data))
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "the running daemon stopped it first" in removed.stdout and not (data / "plugins" / "greeter").exists()
    after = run("ask", "/plugin list", "--data", str(data)).stdout
    assert "greeter " not in after and "luahello" in after  # the daemon kept running throughout


def test_against_a_running_daemon_install_list_and_config_set_each_say_one_true_thing(
    tmp_path: Path, daemons: list[Proc]
):
    data = tmp_path / "d"
    serve(data, daemons)

    installed = run("plugins", "install", str(proc_package(tmp_path, "greeter")), "--data", str(data))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    lines = installed.stdout.splitlines()
    assert lines[0] == f"installed greeter 0.1.0 into {data / 'plugins'}"
    assert lines[-1].startswith("running daemon: started greeter (proc); tools: greeter_greet")
    assert len([line for line in lines if "started" in line or "reload" in line]) == 1

    listed = run("plugins", "list", "--json", "--data", str(data))
    row = {r["name"]: r for r in json.loads(listed.stdout)}["greeter"]
    assert (row["kind"], row["version"], row["status"]) == ("proc", "0.1.0", "started")
    assert "greeter_greet" in row["contributions"]["tools"]

    live = run("config", "set", "core.agent.max_tool_turns", "7", "--data", str(data))
    assert live.stdout.strip() == "core.agent.max_tool_turns = 7 (applied to the running daemon)", live
    later = run("config", "set", "plugin.webui.trusted_proxies", "10.0.0.1", "--data", str(data))
    assert later.stdout.strip() == (
        "plugin.webui.trusted_proxies = 10.0.0.1 "
        "(saved by the running daemon; it takes effect when the daemon restarts)"
    ), later

    # A Python plugin installed after the daemon started: this command loads it, the daemon has not.
    with_onebot = subprocess.run(
        homeagent("config", "set", "plugin.onebot.ws_url", "ws://127.0.0.1:3999", "--data", str(data)),
        env=env(HOMEAGENT_LOAD_PLUGINS="onebot"), capture_output=True, text=True, timeout=300,
    )
    assert with_onebot.returncode == 0, with_onebot.stdout + with_onebot.stderr
    assert "saved; the running daemon started before plugin onebot was installed" in with_onebot.stdout
    assert "restart the daemon" in with_onebot.stdout
    stored = subprocess.run(
        homeagent("config", "get", "plugin.onebot.ws_url", "--data", str(data)),
        env=env(HOMEAGENT_LOAD_PLUGINS="onebot"), capture_output=True, text=True, timeout=300,
    )
    assert stored.stdout.strip() == "ws://127.0.0.1:3999", stored
