"""Built-in ``cmd``: run one program for the model, without a shell.

The command line is split like a POSIX shell would split it (quotes and escapes honoured) and
the program is executed directly, so pipes, redirections, globbing and ``$VAR`` expansion do
not exist — a ``|`` or ``&&`` token is refused with a message saying so. Every run has a
timeout (the whole process group is killed when it expires), its combined output is capped
(``max_output_bytes``, with a truncation note), its working directory is confined to the base
directory, and the last 100 runs are kept for ``cmd_history``.

Disabled unless ``plugin.cmd.enabled`` is true: a new install cannot run programs until its
owner decides so. A daemon running as root refuses to run programs unless the owner also set
``plugin.cmd.allow_root``: a model's command would otherwise run with every right on the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.durations import format_duration
from homeagent_sdk import ConfigDef, SettingsRegistry, ToolError, ToolRegistryProtocol, hookimpl

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "cmd"

__all__ = ["CmdPlugin", "RunRecord", "check_not_root", "make_plugin", "split_command"]

#: Tokens a shell would interpret; here they would silently become arguments, so refuse them.
_SHELL_TOKENS = frozenset({"|", "||", "&&", ";", ">", ">>", "<", "<<", "&", "2>", "2>&1", "|&"})
#: Largest timeout a call may ask for (the tool's own hard limit is a little longer).
MAX_TIMEOUT = 3600.0
HISTORY_SIZE = 100
_READ_CHUNK = 65536


@dataclass
class RunRecord:
    """One finished run, as ``cmd_history`` shows it."""

    command: str
    workdir: str
    exit_code: int | None
    seconds: float
    started: float
    output_bytes: int
    truncated: bool
    timed_out: bool


def split_command(command: str) -> list[str]:
    """Split ``command`` into argv like a POSIX shell, refusing shell syntax.

    Raises:
        ToolError: empty command, unbalanced quotes, or a shell operator token.
    """
    if not command or not command.strip():
        raise ToolError("command is empty; give a program and its arguments, e.g. 'ls -la'")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ToolError(f"cannot split the command line ({exc}); check the quotes") from None
    operators = [t for t in argv if t in _SHELL_TOKENS]
    if operators:
        raise ToolError(
            f"cmd_run executes one program without a shell, so {operators[0]!r} would be passed as a "
            "literal argument; run the programs one at a time (no pipes, redirection or chaining)"
        )
    return argv


def check_not_root(allow_root: bool, *, euid: int | None = None) -> None:
    """Refuse to run programs as root unless the owner allowed it (``plugin.cmd.allow_root``).

    Raises:
        ToolError: the daemon's effective uid is 0 and ``allow_root`` is false.
    """
    uid = os.geteuid() if euid is None else euid
    if uid == 0 and not allow_root:
        raise ToolError(
            "cmd_run refuses to run programs as root: the daemon runs as uid 0, so a command would have every "
            "right on this machine. Run HomeAgent as an ordinary user, or the owner allows it with "
            "`homeagent config set plugin.cmd.allow_root true`"
        )


def _names(raw: str) -> set[str]:
    return {item.strip() for item in raw.replace("\n", ",").split(",") if item.strip()}


class CmdPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self._base: Path | None = None
        self.history: deque[RunRecord] = deque(maxlen=HISTORY_SIZE)

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(
            key="enabled", type="bool", default=False,
            description="Allow the model to run programs with cmd_run (off on a new install).",
        ))
        registry.add(ConfigDef(
            key="default_timeout", type="duration", default="30s", min=0.001, max=MAX_TIMEOUT,
            description="Timeout of a run when the call gives none.",
        ))
        registry.add(ConfigDef(
            key="max_output_bytes", type="int", default=32000, min=256, max=16 * 1024 * 1024,
            description="Output kept per run (stdout and stderr together); the rest is dropped with a note.",
        ))
        registry.add(ConfigDef(
            key="workdir", type="string", default="",
            description="Base directory runs are confined to; empty = core.agent.workdir, else <data>/workspace.",
        ))
        registry.add(ConfigDef(
            key="allow", type="string", default="",
            description="Comma-separated program names that may run; empty = any program not denied.",
        ))
        registry.add(ConfigDef(
            key="allow_root", type="bool", default=False,
            description="Let cmd_run run programs when the daemon runs as root (uid 0); off: refused, "
            "run HomeAgent as an ordinary user instead.",
        ))
        registry.add(ConfigDef(
            key="deny", type="string", default="sudo,su,doas,shutdown,reboot,poweroff,halt,mkfs",
            description="Comma-separated program names that may never run.",
        ))

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.cmd_run, timeout=MAX_TIMEOUT + 15)
        registry.add(self.cmd_history, parallel_safe=True)

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk

    # ------------------------------------------------------------------ helpers

    @property
    def sdk(self) -> ScopedSDK:
        if self._sdk is None:
            raise ToolError("cmd has not started yet")
        return self._sdk

    def base_dir(self) -> Path:
        """The directory runs are confined to (created on first use)."""
        sdk = self.sdk
        raw = str(sdk.settings.get("workdir") or "")
        if not raw and sdk.config is not None:
            raw = str(sdk.config.get("core.agent.workdir") or "")
        if raw:
            base = Path(raw).expanduser()
        else:
            services = sdk.services
            data = services.data_dir if services is not None else sdk.data_dir.parent.parent
            base = Path(data) / "workspace"
        base.mkdir(parents=True, exist_ok=True)
        return base.resolve()

    def _workdir(self, workdir: str) -> Path:
        base = self.base_dir()
        if not workdir:
            return base
        candidate = Path(workdir).expanduser()
        target = (candidate if candidate.is_absolute() else base / candidate).resolve()
        if target != base and base not in target.parents:
            raise ToolError(f"workdir {workdir!r} is outside the allowed base directory {base}; use a path inside it")
        if not target.is_dir():
            raise ToolError(f"workdir {workdir!r} does not exist or is not a directory (base {base})")
        return target

    def _check_program(self, program: str) -> str:
        settings = self.sdk.settings
        name = os.path.basename(program)
        allow, deny = _names(str(settings.get("allow") or "")), _names(str(settings.get("deny") or ""))
        if name in deny:
            raise ToolError(f"program {name!r} is on the deny list (plugin.cmd.deny)")
        if allow and name not in allow:
            raise ToolError(
                f"program {name!r} is not on the allow list (plugin.cmd.allow: {', '.join(sorted(allow))})"
            )
        found = shutil.which(program)
        if found is None:
            raise ToolError(f"program {program!r} was not found on PATH or is not executable")
        return found

    # ------------------------------------------------------------------ tools

    async def cmd_run(self, command: str, timeout: float = 0, workdir: str = "") -> str:
        """Run one program directly (no shell: no pipes, redirection, globbing or $VARS) and return its output.

        Disabled unless the owner set plugin.cmd.enabled = true. Output (stdout and stderr
        together) is capped at plugin.cmd.max_output_bytes; the process group is killed on timeout.

        Args:
            command: the program and its arguments, quoted like in a shell, e.g. "grep -n 'a b' notes.txt".
            timeout: seconds before the run is killed; 0 = plugin.cmd.default_timeout (30s).
            workdir: working directory, relative to the base directory (default: the base directory).
        """
        sdk = self.sdk
        if not sdk.settings.get("enabled"):
            raise ToolError(
                "cmd_run is disabled on this install; the owner can enable it with "
                "`homeagent config set plugin.cmd.enabled true`"
            )
        check_not_root(bool(sdk.settings.get("allow_root")))
        if timeout < 0:
            raise ToolError(f"timeout must be positive seconds, got {timeout:g}")
        seconds = float(timeout or sdk.settings.get("default_timeout") or 30.0)
        if seconds > MAX_TIMEOUT:
            raise ToolError(f"timeout {seconds:g}s is above the maximum of {MAX_TIMEOUT:g}s")
        argv = split_command(command)
        executable = self._check_program(argv[0])
        cwd = self._workdir(workdir)
        cap = int(sdk.settings.get("max_output_bytes") or 32000)
        record, output = await self._execute(executable, argv, cwd, seconds, cap, command)
        self.history.append(record)
        header = f"$ {command}\n"
        if record.timed_out:
            status = f"[timed out after {format_duration(seconds)}; the process group was killed]"
        else:
            status = f"[exit code {record.exit_code} after {record.seconds:.2f}s]"
        note = (
            f"\n[output truncated: showing the first {cap} of {record.output_bytes} bytes]"
            if record.truncated else ""
        )
        return f"{header}{output}{note}\n{status}"

    async def _execute(
        self, executable: str, argv: list[str], cwd: Path, seconds: float, cap: int, command: str
    ) -> tuple[RunRecord, str]:
        started = time.time()
        t0 = time.perf_counter()
        try:
            proc = await asyncio.create_subprocess_exec(
                executable,
                *argv[1:],
                cwd=str(cwd),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # own process group, so a timeout kills the whole tree
            )
        except OSError as exc:
            raise ToolError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        kept = bytearray()
        total = 0

        async def pump() -> None:
            nonlocal total
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(_READ_CHUNK):
                total += len(chunk)
                room = cap - len(kept)
                if room > 0:
                    kept.extend(chunk[:room])
            await proc.wait()

        timed_out = False
        try:
            await asyncio.wait_for(pump(), seconds)
        except TimeoutError:
            timed_out = True
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        record = RunRecord(
            command=command,
            workdir=str(cwd),
            exit_code=None if timed_out else proc.returncode,
            seconds=round(time.perf_counter() - t0, 4),
            started=started,
            output_bytes=total,
            truncated=total > cap,
            timed_out=timed_out,
        )
        return record, kept.decode("utf-8", "replace")

    def cmd_history(self, limit: int = 20) -> list[dict[str, Any]]:
        """The most recent runs (newest first): command, exit code, duration, truncation, timeout.

        Args:
            limit: how many runs to show (at most 100 are kept).
        """
        if limit < 1:
            raise ToolError(f"limit must be at least 1, got {limit}")
        return [asdict(r) for r in list(self.history)[::-1][:limit]]


def make_plugin() -> CmdPlugin:
    return CmdPlugin()
