"""Remote devices ("nodes"): a call's round trip, reconnecting after a restart, a node's memory.

The home daemon (an ``App`` with the web UI and the ``nodes`` built-in, no memory, a FakeModel)
runs on its own event loop in a thread; the node is a real ``homeagent node serve`` process on
127.0.0.1 with its own data directory.

Cases:

* ``node_call``  — ``node_lap_status`` through the kernel's tool registry: the call frame goes out
  on the node's WebSocket, the node reads its status (``/proc``, ``shutil``) and answers; p50/p90
  of 200 sequential calls after 10 warm-up calls.
* ``reconnect``  — the daemon is stopped and a new one started on the same port; the time from
  the new daemon's start to the node being online again (its tools registered). The node's
  backoff (0.5 s doubling from its first retry, with jitter) is part of it; 3 restarts, each after
  the link lived 11 s (a longer-lived link starts the backoff afresh), the median is reported.
* ``idle_node_rss`` — the node process's resident memory after it has idled 3 s (target ≤ 60 MiB).

``--json`` keys: ``node_call_p50_ms``, ``node_call_p90_ms``, ``reconnect_s``, ``idle_node_rss_mb``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from _harness import Row, arg_parser, emit

API_KEY = "bench-api-key-0123456789"


class Daemon:
    """An App with the web UI and nodes on a fixed port, on its own loop in a thread."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir, self.port = data_dir, port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="daemon", daemon=True)
        self.thread.start()
        self.app: Any = None

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        from homeagent_core.app import App
        from homeagent_sdk.testing import FakeModel

        async def start() -> None:
            self.app = App(self.data_dir, load_entrypoints=False, memory=False, local_plugins=False,
                           builtins=("homeagent_core.builtin.nodes", "homeagent_core.builtin.webui"),
                           provider=FakeModel(default="ok"))
            self.app.services.listen_port = self.port
            await self.app.start()

        self.call(start())

    @property
    def nodes(self) -> Any:
        return self.app.host.pm.get_plugin("nodes")

    def stop(self) -> None:
        self.call(self.app.stop())


def _wait(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout}s")
        time.sleep(0.005)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    args = arg_parser(__doc__.splitlines()[0]).parse_args()
    from homeagent_core.node.client import join
    from homeagent_sdk.types import ToolCall

    os.environ["HOMEAGENT_WEBUI_API_KEY"] = API_KEY
    with tempfile.TemporaryDirectory(prefix="bench-nodes-") as tmp, socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        home, lap = Path(tmp) / "home", Path(tmp) / "lap"
        daemon = Daemon(home, port)
        daemon.start()
        code, _ = daemon.nodes.store.pair("lap")
        join(f"http://127.0.0.1:{port}", code, lap)
        node = subprocess.Popen([sys.executable, "-m", "homeagent_core.cli", "node", "serve", "--data", str(lap)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait(lambda: "lap" in daemon.nodes.hub.links, "the node connects")
            tools = daemon.app.kernel.tools

            async def one() -> float:
                t0 = time.perf_counter()
                result = await tools.execute(ToolCall("b", "node_lap_status", {}))
                if not result.success:
                    raise RuntimeError(result.result)
                return time.perf_counter() - t0

            for _ in range(10):
                daemon.call(one())
            calls = [daemon.call(one()) for _ in range(200)]

            time.sleep(3)  # let the node go idle before its memory is read
            rss = _rss_mb(node.pid)

            restarts = []
            for _ in range(3):
                time.sleep(11)  # a link that lived over 10 s starts the node's backoff afresh
                daemon.stop()
                started = time.perf_counter()
                daemon.start()
                _wait(lambda: daemon.nodes.hub is not None and "lap" in daemon.nodes.hub.links, "the node reconnects")
                restarts.append(time.perf_counter() - started)
        finally:
            node.terminate()
            node.wait(10)
            daemon.stop()
    rows = [Row.of("node_call (node_lap_status)", calls), Row.of("reconnect after restart", restarts, scale=1.0,
                                                                   unit="s")]
    figures = {
        "node_call_p50_ms": statistics.median(calls) * 1e3,
        "node_call_p90_ms": sorted(calls)[int(len(calls) * 0.9)] * 1e3,
        "reconnect_s": statistics.median(restarts),
        "idle_node_rss_mb": rss,
    }
    emit(args, "Nodes (loopback)", [*rows, {"name": "idle node RSS (MiB)", "p50 (ms)": rss}], figures)


if __name__ == "__main__":
    main()
