"""A real ``homeagent serve`` in a subprocess, for end-to-end tests of a plugin.

Part of the test kit; import it from :mod:`homeagent_sdk.testing`. Nothing here imports
``homeagent_core``: the daemon and the command line run as ``python -m homeagent_core.cli``
in child processes of the test's own interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path

__all__ = [
    "CommandFailed",
    "ServedDaemon",
    "cli_output",
    "daemon_env",
    "free_port",
    "plugin_pythonpath",
    "run_cli",
    "serve_daemon",
]

#: What the daemon prints once every plugin has started (or failed to).
RUNNING = "HomeAgent running"
_URL = re.compile(r"web UI on (http://\S+?)/?$")
#: Longest output line read from the daemon (a long traceback line must not end the reading).
_LINE_LIMIT = 1024 * 1024


class CommandFailed(AssertionError):
    """A ``homeagent`` command exited with an error; the message carries its whole output."""

    def __init__(self, args: list[str], returncode: int, output: str) -> None:
        super().__init__(f"`homeagent {' '.join(args)}` exited with {returncode}:\n{output}")
        self.returncode = returncode
        self.output = output


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def plugin_pythonpath(project: Path | str, entry_point: str, workdir: Path | str) -> str:
    """A ``PYTHONPATH`` entry under which the plugin distribution at ``project`` is installed.

    ``""`` when the environment has the ``homeagent`` entry point ``entry_point`` already (an
    editable install, ``make test``). Otherwise the project is copied (without ``build``,
    ``*.egg-info``, ``__pycache__`` and ``tests``) and installed the way a user installs it,
    ``pip install --no-deps --no-build-isolation --target``, into a folder under ``workdir``,
    whose path is returned: pass it as ``daemon_env(pythonpath=...)``. Blocking (pip); call it
    from a module-scoped fixture.

    Raises:
        subprocess.CalledProcessError: pip failed (its output went to the test's output).
    """
    if any(ep.name == entry_point for ep in importlib.metadata.entry_points(group="homeagent")):
        return ""
    project, workdir = Path(project), Path(workdir)
    source = workdir / "src" / project.name
    shutil.copytree(project, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
    target = workdir / "site"
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target",
         str(target), str(source)],
        check=True, timeout=300,
    )
    return str(target)


def daemon_env(plugins: str, *, pythonpath: str = "", llm_api_key: str = "test-key", **extra: str) -> dict[str, str]:
    """The environment for ``homeagent`` child processes: this process's, plus the settings of a test.

    ``plugins`` is ``HOMEAGENT_LOAD_PLUGINS`` (comma-separated entry-point names; ``""`` loads
    none); ``pythonpath`` goes in front of ``PYTHONPATH`` (see :func:`plugin_pythonpath`);
    ``llm_api_key`` is ``HOMEAGENT_LLM_API_KEY`` (a loopback :class:`FakeModelServer` accepts
    any); ``extra`` are more variables, e.g. ``HOMEAGENT_WEBUI_API_KEY="..."``.
    """
    env = dict(os.environ)
    paths = [p for p in (pythonpath, env.get("PYTHONPATH", "")) if p]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(HOMEAGENT_LOAD_PLUGINS=plugins, HOMEAGENT_LLM_API_KEY=llm_api_key, **extra)
    return env


def _homeagent(data: Path | str, args: Iterable[str]) -> list[str]:
    return [sys.executable, "-m", "homeagent_core.cli", *args, "--data", str(data)]


def cli_output(env: Mapping[str, str], data: Path | str, *args: str, timeout: float = 120.0) -> str:
    """Run ``homeagent ARGS --data DATA`` and return what it printed (stdout, then stderr),
    whatever its exit status (``doctor`` exits non-zero when it found a problem). Blocking: from
    a test's event loop, ``await asyncio.to_thread(cli_output, ...)``.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds.
    """
    result = subprocess.run(_homeagent(data, args), env=dict(env), capture_output=True, text=True, timeout=timeout)
    return result.stdout + result.stderr


def run_cli(env: Mapping[str, str], data: Path | str, *args: str, timeout: float = 120.0) -> str:
    """Run ``homeagent ARGS --data DATA`` and return its stdout. Blocking: from a test's event
    loop, ``await asyncio.to_thread(run_cli, ...)`` (or :meth:`ServedDaemon.cli`).

    Raises:
        CommandFailed: it exited with an error (the message has stdout and stderr).
        subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds.
    """
    result = subprocess.run(_homeagent(data, args), env=dict(env), capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise CommandFailed(list(args), result.returncode, result.stdout + result.stderr)
    return result.stdout


class ServedDaemon:
    """One running ``homeagent serve`` (what :func:`serve_daemon` yields).

    ``url`` is its web UI (``""`` where the web UI is off), ``data`` its data directory, ``env``
    the environment it and :meth:`cli` run with, ``output`` its output lines so far (stdout and
    stderr; they keep coming while it runs), ``process`` the child process.
    """

    __test__ = False

    def __init__(self, process: asyncio.subprocess.Process, data: Path, env: dict[str, str]) -> None:
        self.process = process
        self.data = data
        self.env = env
        self.url = ""
        self.output: list[str] = []

    @property
    def text(self) -> str:
        """All output so far, one string."""
        return "".join(self.output)

    async def cli(self, *args: str, timeout: float = 120.0) -> str:
        """``homeagent ARGS --data DATA`` against this daemon's data directory (off the event loop);
        its stdout.

        Raises:
            CommandFailed: it exited with an error (the message has its output).
        """
        return await asyncio.to_thread(run_cli, self.env, self.data, *args, timeout=timeout)

    async def cli_output(self, *args: str, timeout: float = 120.0) -> str:
        """Like :meth:`cli`, but stdout and stderr whatever the exit status (see :func:`cli_output`)."""
        return await asyncio.to_thread(cli_output, self.env, self.data, *args, timeout=timeout)

    async def printed(self, text: str, *, timeout: float = 60.0) -> str:
        """The first output line containing ``text``, waiting until the daemon prints it.

        Raises:
            AssertionError: not printed within ``timeout`` seconds (the message has the output).
        """
        try:
            async with asyncio.timeout(timeout):
                while not any(text in line for line in self.output):
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(f"{text!r} not printed within {timeout:g} s:\n{self.text}") from None
        return next(line for line in self.output if text in line)

    async def _read_until_running(self, stream: asyncio.StreamReader) -> None:
        while True:
            line = (await stream.readline()).decode(errors="replace")
            if not line:
                raise AssertionError("homeagent serve exited:\n" + self.text)
            self.output.append(line)
            found = _URL.search(line.strip())
            self.url = found.group(1) if found else self.url
            if RUNNING in line:
                return

    async def _pump(self, stream: asyncio.StreamReader) -> None:
        while line := (await stream.readline()).decode(errors="replace"):
            self.output.append(line)


@contextlib.asynccontextmanager
async def serve_daemon(
    data: Path | str,
    env: Mapping[str, str],
    *,
    settings: Iterable[tuple[str, str]] = (),
    secrets: Iterable[str] = (),
    start_timeout: float = 120.0,
    stop_timeout: float = 60.0,
) -> AsyncIterator[ServedDaemon]:
    """Run ``homeagent serve --data DATA --port 0`` for the ``async with`` block.

    First each ``(key, value)`` of ``settings`` is set with ``homeagent config set``; then the
    daemon starts with ``env`` (see :func:`daemon_env`) and the block begins once it printed
    ``HomeAgent running`` (its plugins started or failed). At the end it gets SIGTERM, and
    SIGKILL if it has not stopped within ``stop_timeout`` seconds. Where the block ended without
    an error, the daemon must have exited with status 0, and none of ``secrets`` may appear in
    its output or in what ``config set`` printed.

    Raises:
        AssertionError: the daemon exited or did not say it runs within ``start_timeout``
            seconds, it did not stop cleanly, or it printed a secret (each with its output).
        CommandFailed: a ``config set`` failed.
    """
    data, env = Path(data), dict(env)
    hidden = [s for s in secrets if s]
    for key, value in settings:
        said = await asyncio.to_thread(run_cli, env, data, "config", "set", key, value)
        if any(secret in said for secret in hidden):
            raise AssertionError(f"`homeagent config set {key}` printed a secret:\n{said}")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "homeagent_core.cli", "serve", "--data", str(data), "--port", "0",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, limit=_LINE_LIMIT,
    )
    stdout = proc.stdout
    if stdout is None:  # pragma: no cover - PIPE always gives one
        raise RuntimeError("homeagent serve has no stdout pipe")
    daemon = ServedDaemon(proc, data, env)
    pump: asyncio.Task[None] | None = None
    killed = False
    try:
        try:
            async with asyncio.timeout(start_timeout):
                await daemon._read_until_running(stdout)
        except TimeoutError:
            raise AssertionError(f"homeagent serve did not say it runs within {start_timeout:g} s:\n"
                                 + daemon.text) from None
        pump = asyncio.get_running_loop().create_task(daemon._pump(stdout))
        yield daemon
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(stop_timeout):
                    await proc.wait()
            except TimeoutError:
                killed = True
                proc.kill()
                await proc.wait()
        if pump is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await pump
            pump.cancel()
    if killed:
        raise AssertionError(f"homeagent serve did not stop within {stop_timeout:g} s of SIGTERM (killed):\n"
                             + daemon.text)
    if proc.returncode != 0:
        raise AssertionError(f"homeagent serve exited with {proc.returncode}:\n{daemon.text}")
    if any(secret in daemon.text for secret in hidden):
        raise AssertionError(f"homeagent serve printed a secret:\n{daemon.text}")
