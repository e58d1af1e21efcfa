"""Start HomeAgent at boot: a systemd user unit on Linux, a launchd agent on macOS.

The unit runs ``<this python> -m homeagent_core.cli serve --data DIR`` — the interpreter that
runs this command, so the service sees the same installed plugins. It restarts on failure with
a growing delay (systemd ≥ 254: ``RestartSteps``; older systemd: a fixed delay and a start
limit) and logs to the journal (launchd: ``<data>/log/service.log``).

A systemd *user* unit stops when its user logs out unless lingering is enabled
(``loginctl enable-linger USER``); :func:`linger_enabled` tells, and the CLI says so.
"""

from __future__ import annotations

import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from homeagent_sdk._atomic import atomic_write
from homeagent_sdk.errors import UsageError

__all__ = [
    "LAUNCHD_LABEL",
    "SYSTEMD_UNIT",
    "ServiceFile",
    "ServiceStatus",
    "install",
    "launchd_plist",
    "linger_enabled",
    "service_file",
    "status",
    "systemd_unit",
    "systemd_version",
    "uninstall",
]

SYSTEMD_UNIT = "homeagent.service"
LAUNCHD_LABEL = "dev.homeagent.daemon"
_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class ServiceFile:
    """Where the service definition goes on this system, and what manages it."""

    manager: str  # "systemd" | "launchd"
    path: Path


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    """What the service manager says about the unit."""

    manager: str
    path: Path
    installed: bool
    enabled: bool
    active: bool
    detail: str
    linger: bool | None = None

    def to_dict(self) -> dict[str, object]:
        return {"manager": self.manager, "path": str(self.path), "installed": self.installed,
                "enabled": self.enabled, "active": self.active, "linger": self.linger, "detail": self.detail}


def _command(data_dir: Path) -> list[str]:
    return [sys.executable, "-m", "homeagent_core.cli", "serve", "--data", str(data_dir)]


def systemd_version() -> int:
    """The running systemd's version (0 when systemctl is missing or says nothing readable)."""
    exe = shutil.which("systemctl")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=_TIMEOUT).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    match = re.match(r"systemd (\d+)", out)
    return int(match.group(1)) if match else 0


def _systemd_quote(arg: str) -> str:
    """One ExecStart argument: systemd's quoting is close to the shell's, but ``%`` and ``$``
    are its own specifiers and must be doubled."""
    return shlex.quote(arg.replace("%", "%%").replace("$", "$$"))


def systemd_unit(data_dir: Path, *, version: int | None = None) -> str:
    """The text of the systemd user unit that runs the daemon on ``data_dir``."""
    version = systemd_version() if version is None else version
    exec_start = " ".join(_systemd_quote(a) for a in _command(data_dir))
    backoff = (
        "RestartSec=2s\nRestartSteps=6\nRestartMaxDelaySec=5min\n"
        if version >= 254
        else "RestartSec=10s\n"
    )
    return (
        "[Unit]\n"
        "Description=HomeAgent personal agent daemon\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        "StartLimitIntervalSec=10min\n"
        "StartLimitBurst=20\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={exec_start}\n"
        "Restart=on-failure\n"
        f"{backoff}"
        "TimeoutStopSec=30s\n"
        "Environment=PYTHONUNBUFFERED=1\n"
        "StandardOutput=journal\n"
        "StandardError=journal\n"
        "SyslogIdentifier=homeagent\n"
        "UMask=0077\n"
        "NoNewPrivileges=yes\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def launchd_plist(data_dir: Path) -> bytes:
    """The launchd agent that runs the daemon on ``data_dir`` (kept alive after a crash)."""
    log = str(data_dir / "log" / "service.log")
    return plistlib.dumps({
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": _command(data_dir),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 30,
        "EnvironmentVariables": {"PYTHONUNBUFFERED": "1"},
        "StandardOutPath": log,
        "StandardErrorPath": log,
        "ProcessType": "Background",
    })


def service_file(platform: str | None = None, home: Path | None = None) -> ServiceFile:
    """The service definition's path for ``platform`` (default: this one).

    Raises:
        UsageError: a platform with neither systemd nor launchd.
    """
    platform = platform or sys.platform
    home = home or Path.home()
    if platform == "darwin":
        return ServiceFile("launchd", home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist")
    if platform.startswith("linux"):
        config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        return ServiceFile("systemd", config / "systemd" / "user" / SYSTEMD_UNIT)
    raise UsageError(
        f"`homeagent service` knows systemd (Linux) and launchd (macOS), not {platform!r}; "
        "start `homeagent serve` with your system's own service manager"
    )


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    exe = shutil.which(args[0])
    if exe is None:
        manager = "systemd" if args[0].startswith("system") else "launchd"
        raise UsageError(f"{args[0]} is not on PATH; is {manager} running here?")
    try:
        return subprocess.run([exe, *args[1:]], capture_output=True, text=True, timeout=_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise UsageError(f"`{' '.join(args)}` did not answer in {_TIMEOUT:.0f} s") from exc


def _checked(args: list[str], what: str) -> None:
    done = _run(args)
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        hint = ""
        if "bus" in message.lower() or "XDG_RUNTIME_DIR" in message:
            hint = " (no user session bus: log in as this user, or run `loginctl enable-linger $USER` and try again)"
        raise UsageError(f"{what} failed: {message}{hint}")


def linger_enabled(user: str | None = None) -> bool | None:
    """Whether systemd keeps this user's services running after logout (None: cannot tell)."""
    user = user or os.environ.get("USER") or ""
    if not user or shutil.which("loginctl") is None:
        return None
    try:
        done = subprocess.run(["loginctl", "show-user", user, "--property=Linger"], capture_output=True,
                              text=True, timeout=_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() == "Linger=yes"


def install(data_dir: Path, *, start: bool = True) -> ServiceFile:
    """Write the service definition for ``data_dir`` and enable it (and start it when ``start``).

    The file is written first (atomically, 0644), so a service manager that cannot be reached
    leaves it in place with a clear error saying what to run.
    """
    target = service_file()
    data_dir = data_dir.expanduser().resolve()
    target.path.parent.mkdir(parents=True, exist_ok=True)
    if target.manager == "systemd":
        atomic_write(target.path, systemd_unit(data_dir).encode(), mode=0o644)
        _checked(["systemctl", "--user", "daemon-reload"], "systemctl --user daemon-reload")
        _checked(["systemctl", "--user", "enable", *(["--now"] if start else []), SYSTEMD_UNIT],
                 f"systemctl --user enable {SYSTEMD_UNIT}")
    else:
        (data_dir / "log").mkdir(parents=True, exist_ok=True)
        atomic_write(target.path, launchd_plist(data_dir), mode=0o644)
        if start:
            _checked(["launchctl", "load", "-w", str(target.path)], "launchctl load")
    return target


def uninstall() -> ServiceFile:
    """Stop and disable the service and remove its definition (nothing in the data directory)."""
    target = service_file()
    if target.manager == "systemd":
        if target.path.exists():
            _run(["systemctl", "--user", "disable", "--now", SYSTEMD_UNIT])
            target.path.unlink()
            _run(["systemctl", "--user", "daemon-reload"])
    elif target.path.exists():
        _run(["launchctl", "unload", "-w", str(target.path)])
        target.path.unlink()
    return target


def status() -> ServiceStatus:
    """The service's state as its manager reports it."""
    target = service_file()
    installed = target.path.exists()
    if target.manager == "systemd":
        enabled = _run(["systemctl", "--user", "is-enabled", SYSTEMD_UNIT]) if installed else None
        active = _run(["systemctl", "--user", "is-active", SYSTEMD_UNIT]) if installed else None
        detail = ", ".join(
            x for x in ((enabled.stdout.strip() if enabled else ""), (active.stdout.strip() if active else "")) if x
        )
        return ServiceStatus("systemd", target.path, installed,
                             enabled is not None and enabled.stdout.strip() == "enabled",
                             active is not None and active.stdout.strip() == "active",
                             detail or ("not installed" if not installed else "unknown"), linger_enabled())
    listed = _run(["launchctl", "list", LAUNCHD_LABEL]) if installed else None
    loaded = listed is not None and listed.returncode == 0
    return ServiceStatus("launchd", target.path, installed, loaded, loaded,
                         "loaded" if loaded else ("not installed" if not installed else "not loaded"))
