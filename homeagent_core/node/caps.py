"""A node's built-in capabilities: ``status``, ``notify``, ``run`` and ``files``.

Each is a :class:`homeagent_sdk.node.NodeCapability` built from its section of ``node.json``.
Nothing runs through a shell: ``run`` starts an argv from the node's own allowlist, ``notify``
an argv of the desktop's notifier; blocking work runs in a thread, never on the node's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import shutil
import signal
import socket
import time
from pathlib import Path
from typing import Any

from homeagent_sdk.node import CapabilityError, NodeResult

__all__ = ["FilesCapability", "NotifyCapability", "RunCapability", "StatusCapability", "run_argv", "status_facts"]

_OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _output(argv: list[str]) -> str:
    """What a small system tool prints ("" when it is missing or fails); for status facts only."""
    import subprocess

    if shutil.which(argv[0]) is None:
        return ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False).stdout
    return ""


def _battery() -> dict[str, Any] | None:
    """Charge and state of the first battery (Linux sysfs, Termux, macOS ``pmset``), or None."""
    import json
    import re

    base = Path("/sys/class/power_supply")
    with contextlib.suppress(OSError, ValueError):
        for entry in sorted(base.iterdir()):
            capacity = entry / "capacity"
            if entry.name.upper().startswith(("BAT", "BATTERY")) and capacity.exists():
                status = (entry / "status").read_text().strip() if (entry / "status").exists() else ""
                return {"percent": int(capacity.read_text().strip()), "status": status.lower()}
    termux = _output(["termux-battery-status"])
    with contextlib.suppress(ValueError, AttributeError):
        if termux:
            raw = json.loads(termux)
            return {"percent": int(raw["percentage"]), "status": str(raw.get("status", "")).lower()}
    found = re.search(r"(\d+)%;\s*([a-z ]+)", _output(["pmset", "-g", "batt"]))
    if found:
        return {"percent": int(found.group(1)), "status": found.group(2).strip()}
    return None


def _uptime_s() -> float | None:
    """Seconds since boot: ``/proc/uptime`` (Linux, Termux), else ``sysctl kern.boottime`` (macOS)."""
    import re

    with contextlib.suppress(OSError, ValueError, IndexError):
        return float(Path("/proc/uptime").read_text().split()[0])
    found = re.search(r"sec = (\d+)", _output(["sysctl", "-n", "kern.boottime"]))
    return time.time() - int(found.group(1)) if found else None


def status_facts() -> dict[str, Any]:
    """Host, OS, uptime, load, battery and disk of this device (no psutil: /proc and shutil)."""
    disk = shutil.disk_usage(Path.home())
    facts: dict[str, Any] = {
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "uptime_s": _uptime_s(),
        "battery": _battery(),
        "disk": {"path": str(Path.home()), "total_gb": round(disk.total / 1e9, 1),
                 "free_gb": round(disk.free / 1e9, 1), "used_percent": round(100 * disk.used / max(disk.total, 1), 1)},
        "time": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }
    with contextlib.suppress(OSError, AttributeError):
        facts["load"] = [round(x, 2) for x in os.getloadavg()]
    if "ANDROID_ROOT" in os.environ:
        facts["os"] += " (Android, Termux)"
    return facts


class StatusCapability:
    name = "status"
    description = "This device's host name, OS, uptime, load, battery and free disk space."

    def __init__(self) -> None:
        self.parameters: dict[str, Any] = dict(_OBJECT)
        self.meta: dict[str, Any] = {}

    async def call(self, args: dict[str, Any]) -> NodeResult:
        import json

        return NodeResult(json.dumps(await asyncio.to_thread(status_facts), ensure_ascii=False))


async def run_argv(argv: list[str], *, timeout: float, max_bytes: int, cwd: Path | None = None,
                   stdin: bytes | None = None) -> tuple[int, bytes, bytes, bool]:
    """Run ``argv`` (no shell): ``(exit code, stdout, stderr, timed out)``, each output capped.

    Raises:
        CapabilityError: the program does not exist or cannot be started.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=cwd, start_new_session=True,
        )
    except OSError as exc:
        raise CapabilityError(f"{argv[0]} cannot be started on this device: {exc.strerror or exc}") from None
    timed_out = False
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except TimeoutError:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = await proc.communicate()
    return proc.returncode if proc.returncode is not None else -1, out[:max_bytes], err[:max_bytes], timed_out


def _notifier() -> list[str] | None:
    """The argv template of this desktop's notifier (``{title}``, ``{text}`` filled in), or None."""
    if shutil.which("termux-notification"):
        return ["termux-notification", "--title", "{title}", "--content", "{text}"]
    if shutil.which("notify-send"):
        return ["notify-send", "--", "{title}", "{text}"]
    if shutil.which("osascript"):
        return ["osascript", "-e", "on run argv", "-e",
                "display notification (item 2 of argv) with title (item 1 of argv)", "-e", "end run",
                "{title}", "{text}"]
    return None


class NotifyCapability:
    name = "notify"
    description = "Show a notification on this device's screen (desktop or phone)."

    def __init__(self, section: dict[str, Any]) -> None:
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The message."},
                           "title": {"type": "string", "description": "A short title (default: HomeAgent)."}},
            "required": ["text"],
        }
        self.meta: dict[str, Any] = {}
        argv = section.get("argv")
        self.argv: list[str] | None = [str(a) for a in argv] if isinstance(argv, list) and argv else _notifier()

    async def call(self, args: dict[str, Any]) -> NodeResult:
        if self.argv is None:
            raise CapabilityError(
                "notifications are not available on this device (no notify-send, osascript or termux-notification; "
                'the device owner can set "argv" under capabilities.notify in node.json)'
            )
        text = str(args.get("text", ""))[:2000]
        title = str(args.get("title") or "HomeAgent")[:200]
        argv = [a.replace("{title}", title).replace("{text}", text) for a in self.argv]
        code, _out, err, timed_out = await run_argv(argv, timeout=15, max_bytes=2000)
        if timed_out or code != 0:
            why = "timed out" if timed_out else f"exit code {code}: {err.decode(errors='replace').strip()}"
            raise CapabilityError(f"the notification could not be shown ({why})")
        return NodeResult("notification shown")


class RunCapability:
    """A command from the node's own allowlist: ``commands: {name: {"argv": [...], "silent": bool}}``."""

    name = "run"

    def __init__(self, section: dict[str, Any], folder: Path) -> None:
        raw = section.get("commands") or {}
        if not isinstance(raw, dict):
            raise ValueError('capabilities.run.commands must map names to {"argv": [...]}')
        self.commands: dict[str, dict[str, Any]] = {}
        for key, entry in raw.items():
            argv = entry.get("argv") if isinstance(entry, dict) else None
            if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
                raise ValueError(f'capabilities.run.commands.{key}: "argv" must be a non-empty list of strings')
            self.commands[str(key)] = entry
        self.timeout = float(section.get("timeout_s") or 30)
        self.max_bytes = int(section.get("max_output_bytes") or 65536)
        self.folder = folder
        names = ", ".join(sorted(self.commands)) or "(none)"
        self.description = f"Run one of this device's allowed commands: {names}. No shell; output is capped."
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {"command": {"type": "string", "enum": sorted(self.commands),
                                       "description": "Which allowed command to run."}},
            "required": ["command"],
        }
        self.meta: dict[str, Any] = {"silent": sorted(k for k, v in self.commands.items() if v.get("silent"))}

    async def call(self, args: dict[str, Any]) -> NodeResult:
        name = str(args.get("command", ""))
        entry = self.commands.get(name)
        if entry is None:
            allowed = ", ".join(sorted(self.commands)) or "none"
            raise CapabilityError(f"{name!r} is not an allowed command on this device (allowed: {allowed})")
        cwd = Path(entry["cwd"]).expanduser() if entry.get("cwd") else self.folder
        code, out, err, timed_out = await run_argv(list(entry["argv"]), timeout=self.timeout,
                                                    max_bytes=self.max_bytes, cwd=cwd)
        head = f"timed out after {self.timeout:g}s (killed)" if timed_out else f"exit code {code}"
        parts = [head]
        if out:
            parts.append(out.decode(errors="replace"))
        if err:
            parts.append("stderr:\n" + err.decode(errors="replace"))
        return NodeResult("\n".join(parts))


class FilesCapability:
    """A sandbox folder the model may list, read and write; nothing outside it is reachable."""

    name = "files"
    description = "List, read or write files in this device's shared sandbox folder (paths are relative to it)."

    def __init__(self, section: dict[str, Any], folder: Path) -> None:
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "read", "write"]},
                "path": {"type": "string", "description": "Relative path inside the sandbox ('' or '.' for its top)."},
                "content": {"type": "string", "description": "Text to write (action write)."},
            },
            "required": ["action"],
        }
        self.meta: dict[str, Any] = {}
        root = Path(str(section.get("folder") or "sandbox")).expanduser()
        self.root = (root if root.is_absolute() else folder / root).resolve()
        self.max_bytes = int(section.get("max_file_bytes") or 1048576)

    def _path(self, rel: str) -> Path:
        target = (self.root / rel.lstrip("/")).resolve()
        if target != self.root and not target.is_relative_to(self.root):
            raise CapabilityError(f"{rel!r} is outside the sandbox folder; use a path relative to it")
        return target

    def _do(self, action: str, rel: str, content: str) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self._path(rel)
        if action == "list":
            if not path.is_dir():
                raise CapabilityError(f"{rel!r} is not a folder in the sandbox")
            rows = []
            for entry in sorted(path.iterdir())[:500]:
                kind = "dir" if entry.is_dir() else f"{entry.stat().st_size} bytes"
                rows.append(f"{entry.relative_to(self.root)}  ({kind})")
            return "\n".join(rows) or "(empty)"
        if action == "read":
            if not path.is_file():
                raise CapabilityError(f"{rel!r} is not a file in the sandbox")
            size = path.stat().st_size
            if size > self.max_bytes:
                raise CapabilityError(f"{rel!r} has {size} bytes, more than this device allows ({self.max_bytes})")
            return path.read_bytes().decode(errors="replace")
        if action == "write":
            data = content.encode()
            if len(data) > self.max_bytes:
                raise CapabilityError(
                    f"the content has {len(data)} bytes, more than this device allows ({self.max_bytes})"
                )
            if path == self.root:
                raise CapabilityError("give a file path to write")
            path.parent.mkdir(parents=True, exist_ok=True)
            from homeagent_sdk._atomic import atomic_write

            atomic_write(path, data, mode=0o644)
            return f"wrote {len(data)} bytes to {path.relative_to(self.root)}"
        raise CapabilityError(f"unknown action {action!r}; use list, read or write")

    async def call(self, args: dict[str, Any]) -> NodeResult:
        action = str(args.get("action", ""))
        rel = str(args.get("path") or ".")
        return NodeResult(await asyncio.to_thread(self._do, action, rel, str(args.get("content") or "")))
