"""Real ``homeagent`` processes for CLI tests: a daemon, a client, their output read line by line."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

#: Bound on every wait for a process to print something (not a speed assertion).
WAIT_S = 60.0


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HOMEAGENT_LOAD_PLUGINS": "", "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", **extra}


def homeagent(*args: str) -> list[str]:
    return [sys.executable, "-m", "homeagent_core.cli", *args]


class Proc:
    """A child process whose output is collected line by line on a thread."""

    def __init__(self, args: list[str], env: dict[str, str], stdin: bool = False) -> None:
        self.popen = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)
        self.lines.put("")

    def wait_for(self, text: str) -> str:
        """Read output until a line containing ``text``; fail with everything seen if it never comes."""
        while True:
            try:
                line = self.lines.get(timeout=WAIT_S)
            except queue.Empty:
                raise AssertionError(f"{text!r} not printed within {WAIT_S}s:\n{''.join(self.seen)}") from None
            self.seen.append(line)
            if text in line:
                return line
            if line == "":
                raise AssertionError(f"process ended before printing {text!r}:\n{''.join(self.seen)}")

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def rest(self) -> str:
        """Everything printed until the process ends."""
        self.popen.wait(timeout=WAIT_S)
        while True:
            line = self.lines.get(timeout=WAIT_S)
            if line == "":
                self.close()
                return "".join(self.seen)
            self.seen.append(line)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.close()

    def close(self) -> None:
        """Close the pipes once the process has ended and its output was read."""
        self.pump.join(timeout=WAIT_S)
        for pipe in (self.popen.stdin, self.popen.stdout):
            if pipe is not None:
                pipe.close()


def serve(data: Path, started: list[Proc]) -> Proc:
    """Start ``homeagent serve`` on ``data`` and wait until it says it runs."""
    proc = Proc(homeagent("serve", "--data", str(data), "--port", "0"), env())
    started.append(proc)
    proc.wait_for("HomeAgent running")
    return proc
