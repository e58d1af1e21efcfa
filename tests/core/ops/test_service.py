"""``homeagent service``: the unit systemd would run, the launchd agent, and the CLI on a machine
whose user service manager cannot be reached (as in a container)."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from homeagent_core.ops.service import launchd_plist, service_file, systemd_unit

WAIT_S = 120.0


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "homeagent_core.cli", "service", *args],
                          env={**os.environ, "HOMEAGENT_LOAD_PLUGINS": "", "NO_COLOR": "1", **env},
                          capture_output=True, text=True, timeout=WAIT_S)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("folder", ["ha", "my home 100% $HOME"])
def test_the_systemd_unit_passes_systemd_analyze_verify_without_a_warning(tmp_path: Path, folder: str) -> None:
    data = tmp_path / folder
    unit = tmp_path / "homeagent.service"
    unit.write_text(systemd_unit(data))
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ""
    text = unit.read_text()
    assert "Restart=on-failure" in text and "StandardOutput=journal" in text
    assert f"ExecStart={sys.executable} -m homeagent_core.cli serve --data" in text


def test_systemd_restarts_with_a_growing_delay_where_it_can_and_a_fixed_one_before_254() -> None:
    assert "RestartSteps=" in systemd_unit(Path("/d"), version=254)
    old = systemd_unit(Path("/d"), version=252)
    assert "RestartSteps=" not in old and "RestartSec=10s" in old


def test_the_launchd_agent_runs_this_python_on_the_data_directory_and_restarts_after_a_crash(tmp_path: Path) -> None:
    plist = plistlib.loads(launchd_plist(tmp_path / "ha"))
    assert plist["ProgramArguments"] == [sys.executable, "-m", "homeagent_core.cli", "serve", "--data",
                                         str(tmp_path / "ha")]
    assert plist["KeepAlive"] == {"SuccessfulExit": False} and plist["RunAtLoad"] is True
    assert service_file("darwin", tmp_path).path == tmp_path / "Library/LaunchAgents/dev.homeagent.daemon.plist"


def test_a_platform_without_systemd_or_launchd_gets_a_clear_refusal() -> None:
    from homeagent_sdk.errors import UsageError

    with pytest.raises(UsageError, match=r"systemd .* launchd"):
        service_file("win32")


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("systemctl") is None,
                    reason="needs Linux with systemctl")
def test_install_without_a_user_session_writes_the_unit_and_says_what_to_do(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"  # an empty runtime dir: no user bus, as in a container or over ssh -T
    runtime.mkdir(mode=0o700)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_RUNTIME_DIR": str(runtime),
           "DBUS_SESSION_BUS_ADDRESS": f"unix:path={runtime}/bus"}
    assert "not installed" in cli("status", env=env).stdout
    done = cli("install", "--data", str(tmp_path / "ha"), env=env)
    assert done.returncode != 0
    assert "systemctl --user daemon-reload failed" in done.stderr and "loginctl enable-linger" in done.stderr
    unit = tmp_path / "config/systemd/user/homeagent.service"
    assert f"--data {tmp_path / 'ha'}" in unit.read_text()
    status = cli("status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    assert '"installed": true' in status.stdout and '"active": false' in status.stdout
    removed = cli("uninstall", env=env)
    assert removed.returncode == 0, removed.stderr
    assert not unit.exists()


def test_print_shows_the_unit_for_the_data_directory_and_changes_nothing(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    done = cli("install", "--print", "--data", str(tmp_path / "ha"), env=env)
    assert done.returncode == 0, done.stderr
    assert str(tmp_path / "ha") in done.stdout
    assert not (tmp_path / "config").exists()
