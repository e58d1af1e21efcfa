"""Idle daemon: start-up time and resident memory of a real ``homeagent serve``.

Starts ``python -m homeagent_core.cli serve`` on a fresh data folder (default plugins, the
default TF-IDF search tier, no model loaded, loopback port 0) as a subprocess, times the
"HomeAgent running" line (``startup_s``), then samples the process's RSS until it has changed
by less than 1 MiB for three seconds (start-up settled; at most 30 s) and reports it
(``idle_rss_mb``, with its anonymous and file-backed parts). Median of ``--runs`` daemons.
Target: ``idle_rss_mb`` ≤ 120.

``--audit`` adds one run under ``python -X importtime`` and lists the top-level packages whose
import took longest (cumulative), the first place to look when the figure grows.

    python bench/bench_idle.py [--runs 3] [--audit] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SETTLE_S, WINDOW_S, STEP_S, MAX_WAIT_S = 1.0, 3.0, 0.25, 30.0


def _status(pid: int) -> dict[str, int]:
    """VmRSS / RssAnon / RssFile of ``pid`` in KiB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(rest.split()[0])
    return out


def _serve(data: Path, extra: list[str] | None = None, stderr: Any = subprocess.STDOUT) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "HOMEAGENT_LOAD_PLUGINS"}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.Popen(
        [sys.executable, *(extra or []), "-m", "homeagent_core.cli", "serve", "--data", str(data), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=env,
        cwd=str(data.parent),
        start_new_session=True,
    )


def _wait_running(proc: subprocess.Popen[str]) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        if "HomeAgent running" in line:
            return lines
    raise SystemExit("homeagent serve exited before it was running:\n" + "".join(lines))


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the daemon, wait for it, then end what is left of its process group.

    Its helpers (plugin subprocesses) may hold the output pipe open after it exits, so the
    pipe is closed rather than read to its end.
    """
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group this bench started the daemon in


def one_run() -> dict[str, float]:
    """Start a daemon, time it to running, wait for its RSS to settle, stop it."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        proc = _serve(Path(tmp) / "data")
        try:
            _wait_running(proc)
            startup = time.perf_counter() - t0
            time.sleep(SETTLE_S)
            samples: list[tuple[float, int]] = []
            start = time.monotonic()
            while time.monotonic() - start < MAX_WAIT_S:
                samples.append((time.monotonic(), _status(proc.pid)["VmRSS"]))
                recent = [rss for when, rss in samples if when >= samples[-1][0] - WINDOW_S]
                if samples[-1][0] - samples[0][0] >= WINDOW_S and max(recent) - min(recent) < 1024:
                    break
                time.sleep(STEP_S)
            status = _status(proc.pid)
        finally:
            _stop(proc)
    return {
        "startup_s": startup,
        "idle_rss_mb": status["VmRSS"] / 1024,
        "idle_rss_anon_mb": status.get("RssAnon", 0) / 1024,
        "idle_rss_file_mb": status.get("RssFile", 0) / 1024,
    }


def import_audit(top: int = 15) -> list[tuple[str, float]]:
    """Top-level packages by cumulative import time (ms) in a real daemon start."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "importtime.log"
        with open(log, "w", encoding="utf-8") as sink:  # a file: a pipe would fill and stall the daemon
            proc = _serve(Path(tmp) / "data", ["-X", "importtime"], stderr=sink)
            try:  # the log (and the running line) goes to stderr too: watch the file
                deadline = time.monotonic() + 120
                while "HomeAgent running" not in log.read_text(encoding="utf-8", errors="replace"):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("homeagent serve did not start under -X importtime")
                    time.sleep(STEP_S)
            finally:
                _stop(proc)
        err = log.read_text(encoding="utf-8", errors="replace")
    by_root: dict[str, float] = defaultdict(float)
    for line in err.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        if cumulative.isdigit() and not name.startswith(" ") and "." not in name.strip():
            by_root[name.strip()] += int(cumulative) / 1000
    return sorted(by_root.items(), key=lambda kv: -kv[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--audit", action="store_true", help="also list the slowest imports of a start")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = [one_run() for _ in range(args.runs)]
    result: dict[str, Any] = {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}
    result["runs"] = args.runs
    if args.audit:
        result["slowest_imports_ms"] = {name: round(ms, 1) for name, ms in import_audit()}
    if args.json:
        print(json.dumps(result))
        return
    print(f"| metric | median of {args.runs} |\n|---|---:|")
    for key, value in result.items():
        if key not in ("runs", "slowest_imports_ms"):
            print(f"| {key} | {value} |")
    for name, ms in result.get("slowest_imports_ms", {}).items():
        print(f"| import {name} | {ms} ms |")


if __name__ == "__main__":
    main()
