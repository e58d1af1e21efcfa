"""Out-of-process plugin protocol: round trips, throughput and crash recovery.

A Python plugin (``homeagent_sdk.proc.serve``, uvloop + orjson in the child) runs as a real
``plugin.pyz`` subprocess; the host runs on uvloop when installed. Measured:
``tool.invoke`` round trip for 100 B, 4 KiB, 64 KiB and 1 MiB payloads, ``stage.invoke``
with a ~2 KB StageContext, calls per second with 32 in flight, and crash-to-ready (SIGKILL
until the restarted plugin answered ``plugin.start``, restart backoff set to 0).

The floor under every figure is measured in the same run: a raw pipe round trip, the same
100 B ``tool.invoke`` frame written by the host (same event loop, pipes made the same way as
the plugin's) to a child that copies its stdin to its stdout with blocking reads and writes,
and read back. ``pipe_ratio`` = tool.invoke p50 ÷ that p50 is the protocol's own cost (framing,
dispatch, the plugin object), independent of how fast or busy the machine is.

``--json`` keys: ``tool_invoke_p50_us`` (100 B payload), ``tool_invoke_p99_us``,
``stage_invoke_p50_us``, ``inflight32_calls_per_s``, ``crash_to_ready_s``, ``pipe_rtt_p50_us``,
``pipe_ratio``.
Targets: tool.invoke p50 ≤ 30 µs, stage.invoke p50 ≤ 50 µs, ≥ 100k calls/s with 32 in flight,
``pipe_ratio`` ≤ 2.5.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
import zipapp
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Row, arg_parser, emit, percentile

from homeagent_core.config import ConfigStore
from homeagent_core.events import EventBus
from homeagent_core.plugins.proc import ProcPlugin
from homeagent_core.plugins.sdk import ScopedSDK, Services
from homeagent_core.plugins.supervisor import Supervisor
from homeagent_sdk.proc.wire import dumps
from homeagent_sdk.types import StageContext, ToolCall

PLUGIN = '''
from homeagent_sdk import hookimpl
from homeagent_sdk.proc import serve


class Bench:
    name = "bench"

    @hookimpl
    def register_tools(self, registry):
        registry.add(self.echo)

    async def echo(self, data: str) -> str:
        """Echo."""
        return data

    @hookimpl
    async def on_input(self, ctx):
        ctx.llm_text = "seen"


serve(Bench())
'''


#: The raw-pipe child: copy stdin to stdout, chunk by chunk, with blocking system calls.
ECHO = """
import os
while True:
    data = os.read(0, 65536)
    if not data:
        break
    os.write(1, data)
"""


class _Echo(asyncio.Protocol):
    """Host end of the raw pipe: resolves ``waiter`` when a whole line came back."""

    def __init__(self) -> None:
        self.waiter: asyncio.Future[None] | None = None
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.buf.endswith(b"\n") and self.waiter is not None and not self.waiter.done():
            self.buf = b""
            self.waiter.set_result(None)


async def pipe_trips(frame: bytes, n: int) -> list[float]:
    """Round trips of ``frame`` through a child that echoes its stdin (the protocol-free floor)."""
    import subprocess

    loop = asyncio.get_running_loop()
    to_child, from_child = os.pipe(), os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", ECHO], stdin=to_child[0], stdout=from_child[1], close_fds=True)
    os.close(to_child[0])
    os.close(from_child[1])
    writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(to_child[1], "wb", buffering=0))
    reader, echo = await loop.connect_read_pipe(_Echo, os.fdopen(from_child[0], "rb", buffering=0))
    if hasattr(reader, "max_size"):
        reader.max_size = 64 * 1024  # as the plugin connection sets it
    out = []
    try:
        for i in range(n + 200):
            echo.waiter = loop.create_future()
            t0 = time.perf_counter()
            writer.write(frame)
            await echo.waiter
            if i >= 200:
                out.append(time.perf_counter() - t0)
    finally:
        writer.close()
        reader.close()
        await asyncio.to_thread(proc.wait, 10)  # the close above takes effect on the loop
    return out


def make_plugin(root: Path) -> Path:
    src = root / "src"
    src.mkdir(parents=True)
    (src / "__main__.py").write_text(PLUGIN)
    plugin_dir = root / "data" / "plugins" / "bench"
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "plugin.json").write_text(json.dumps({"name": "bench", "version": "1", "entry": "plugin.pyz"}))
    zipapp.create_archive(src, plugin_dir / "plugin.pyz")
    return plugin_dir


async def round_trips(plugin: ProcPlugin, params: dict[str, Any], n: int, method: str = "tool.invoke") -> list[float]:
    for _ in range(min(200, n)):
        await plugin.call(method, params)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await plugin.call(method, params)
        out.append(time.perf_counter() - t0)
    return out


async def stage_trips(plugin: ProcPlugin, n: int) -> list[float]:
    msgs = [{"role": "user", "content": "你好，今天的天气怎么样？" * 4} for _ in range(6)]
    ctx = StageContext(
        raw_message="hello there",
        source="bench",
        channel="cli",
        context_msgs=msgs,
        tool_calls=[ToolCall("c1", "weather", {"city": "Beijing"})],
    )
    size = len(json.dumps(ctx.to_dict(), ensure_ascii=False).encode())
    out = []
    for i in range(n + 200):
        ctx.llm_text = ""
        t0 = time.perf_counter()
        await plugin.on_input(ctx)
        if i >= 200:
            out.append(time.perf_counter() - t0)
    assert ctx.llm_text == "seen"
    print(f"stage context: {size} bytes", file=sys.stderr)
    return out


async def inflight(plugin: ProcPlugin, total: int, width: int = 32) -> float:
    params = {"name": "echo", "args": {"data": "x" * 100}}
    per = total // width

    async def worker() -> None:
        for _ in range(per):
            await plugin.call("tool.invoke", params)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(width)))
    return per * width / (time.perf_counter() - t0)


async def crash_to_ready(plugin: ProcPlugin, bus: EventBus, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        ready = asyncio.get_running_loop().create_future()

        def seen(event: Any, ready: asyncio.Future[None] = ready) -> None:
            if event.data.get("event") == "plugin_restarted" and not ready.done():
                ready.set_result(None)

        unsubscribe = bus.subscribe(seen, "system")
        assert plugin.conn is not None
        t0 = time.perf_counter()
        os.kill(plugin.conn.pid, signal.SIGKILL)
        await asyncio.wait_for(ready, 30)
        out.append(time.perf_counter() - t0)
        unsubscribe()
        plugin.supervisor.reset(plugin.name)
    return out


async def run(quick: bool) -> tuple[list[Row], dict[str, float]]:
    n = 300 if quick else 3000
    with tempfile.TemporaryDirectory() as tmp:
        plugin_dir = make_plugin(Path(tmp))
        bus = EventBus()
        config = ConfigStore(":memory:")
        supervisor = Supervisor(backoff=(0.0, 0.0, 0.0))
        plugin = ProcPlugin(plugin_dir, supervisor=supervisor)
        services = Services(config=config, bus=bus, data_dir=Path(tmp) / "data")
        await plugin.startup(ScopedSDK.for_plugin("bench", services, privileged=True))
        rows: list[Row] = []
        figures: dict[str, float] = {}
        for label, size, count in (
            ("100 B", 100, n),
            ("4 KiB", 4096, n),
            ("64 KiB", 65536, n // 3),
            ("1 MiB", 1 << 20, max(20, n // 30)),
        ):
            samples = await round_trips(plugin, {"name": "echo", "args": {"data": "x" * size}}, count)
            rows.append(
                Row.of(
                    f"tool.invoke {label}", samples, scale=1e6, unit="µs", **{"p99 (µs)": percentile(samples, 99) * 1e6}
                )
            )
            if size == 100:
                figures["tool_invoke_p50_us"] = rows[-1]["p50 (µs)"]
                figures["tool_invoke_p99_us"] = rows[-1]["p99 (µs)"]
                params = {"name": "echo", "args": {"data": "x" * size}}
                frame = dumps({"id": 1, "method": "tool.invoke", "params": params})
                raw = await pipe_trips(frame, count)
                rows.append(Row.of("raw pipe round trip 100 B", raw, scale=1e6, unit="µs"))
                figures["pipe_rtt_p50_us"] = rows[-1]["p50 (µs)"]
                figures["pipe_ratio"] = figures["tool_invoke_p50_us"] / figures["pipe_rtt_p50_us"]
        stage = await stage_trips(plugin, n)
        rows.append(
            Row.of("stage.invoke (~2 KB ctx)", stage, scale=1e6, unit="µs", **{"p99 (µs)": percentile(stage, 99) * 1e6})
        )
        figures["stage_invoke_p50_us"] = rows[-1]["p50 (µs)"]
        rate = await inflight(plugin, 3200 if quick else 64000)
        rows.append(Row(name="32 in flight (calls/s)", **{"p50 (µs)": 1e6 / rate * 32}, n=1, rate=rate))
        figures["inflight32_calls_per_s"] = rate
        crash = await crash_to_ready(plugin, bus, 3 if quick else 5)
        rows.append(Row.of("crash to ready", crash, scale=1e3, unit="ms"))
        figures["crash_to_ready_s"] = sorted(crash)[len(crash) // 2]
        await plugin.shutdown()
        await bus.aclose()
        config.close()
        return rows, figures


def main() -> None:
    parser = arg_parser(__doc__ or "")
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    quick = bool(args.quick)
    try:
        import uvloop

        rows, figures = uvloop.run(run(quick))
    except ImportError:
        rows, figures = asyncio.run(run(quick))
    emit(args, "Out-of-process plugin protocol", rows, figures)


if __name__ == "__main__":
    main()
